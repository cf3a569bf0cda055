package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/cli/command"
)

// leafCommands is every command that does something, with a positional
// argument it accepts ("" when it takes none). TestHelpLayoutOnEveryCommand
// fails when a group lists a command missing here.
func leafCommands() []struct{ path, arg string } {
	return []struct{ path, arg string }{
		{"serve", ""}, {"reconcile", ""}, {"register", "batches/x"}, {"replay", "batches/x"},
		{"send", "batch.succeeded"}, {"bench", ""}, {"simulate", ""}, {"version", ""},
		{"ops list", ""}, {"ops show", "batches/x"}, {"ops backfill-shards", ""},
		{"webhooks create", ""}, {"webhooks list", ""}, {"webhooks rotate", "wh_1"},
		{"webhooks ping", "wh_1"}, {"webhooks delete", "wh_1"},
		{"submit batch", ""}, {"submit video", ""}, {"submit interaction", ""},
	}
}

// groupCommands are the commands made of subcommands ("" is lrosink).
func groupCommands() []string { return []string{"", "ops", "webhooks", "submit"} }

func words(path string) []string { return strings.Fields(path) }

// sections returns the section headers of a help text ("Flags:") in order,
// and the lines under each.
func sections(help string) (order []string, body map[string][]string) {
	body = map[string][]string{}
	cur := ""
	for _, line := range strings.Split(help, "\n") {
		if line != "" && !strings.HasPrefix(line, " ") && strings.HasSuffix(line, ":") {
			cur = line
			order = append(order, line)
			continue
		}
		if cur != "" && line != "" {
			body[cur] = append(body[cur], line)
		}
	}
	return order, body
}

// listed is the names a group's help lists under Commands: or Subcommands:.
func listed(help string) []string {
	_, body := sections(help)
	var names []string
	for _, line := range append(body["Commands:"], body["Subcommands:"]...) {
		if f := strings.Fields(line); strings.HasPrefix(line, "  ") && len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

// TestHelpLayoutOnEveryCommand: every command, subcommand and group answers
// --help (and -h) on stdout, exit 0, in the one layout: "Usage: lrosink
// PATH ..." first, then the sections in one order, a Flags section in one
// format ending in "-h, --help", and Examples. The commands are found by
// walking the groups' own listings, so a new command cannot be missed.
func TestHelpLayoutOnEveryCommand(t *testing.T) {
	known := map[string]bool{}
	for _, l := range leafCommands() {
		known[l.path] = true
	}
	groups := map[string]bool{}
	for _, g := range groupCommands() {
		groups[g] = true
	}
	seen := map[string]bool{}
	queue := []string{""}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		seen[path] = true
		for _, h := range []string{"--help", "-h"} {
			r := run(t, nil, append(words(path), h)...)
			checkHelpLayout(t, path, h, r, groups[path])
			if h != "--help" {
				continue
			}
			for _, name := range listed(r.stdout) {
				sub := strings.TrimSpace(path + " " + name)
				if !known[sub] && !groups[sub] {
					t.Errorf("lrosink %s --help lists %q, which is not in leafCommands or groupCommands", path, name)
					continue
				}
				if !seen[sub] && !slices.Contains(queue, sub) {
					queue = append(queue, sub)
				}
			}
		}
	}
	for path := range known {
		if !seen[path] {
			t.Errorf("lrosink %s: not listed by its group's --help", path)
		}
	}
	for path := range groups {
		if !seen[path] {
			t.Errorf("group lrosink %s: not listed by its group's --help", path)
		}
	}
}

func checkHelpLayout(t *testing.T, path, h string, r runResult, group bool) {
	t.Helper()
	name := strings.Join(strings.Fields("lrosink "+path+" "+h), " ")
	if r.code != command.ExitOK || r.stderr != "" {
		t.Errorf("%s: exit %d, stderr %q; want 0 and nothing on stderr", name, r.code, r.stderr)
		return
	}
	first, _, _ := strings.Cut(r.stdout, "\n")
	if want := strings.TrimSpace("Usage: lrosink " + path); !strings.HasPrefix(first, want) {
		t.Errorf("%s: first line %q, want it to start with %q", name, first, want)
	}
	order, body := sections(r.stdout)
	// The one order of sections; a group adds its listing before Flags.
	want := []string{"Flags:", "Environment:", "Examples:"}
	if group {
		want = append([]string{"Commands:", "Subcommands:"}, want...)
	}
	var got []string
	for _, s := range order {
		if slices.Contains(want, s) {
			got = append(got, s)
		}
	}
	if !slices.IsSortedFunc(got, func(a, b string) int { return slices.Index(want, a) - slices.Index(want, b) }) {
		t.Errorf("%s: sections %q, want them in the order %q", name, got, want)
	}
	if group && len(listed(r.stdout)) == 0 {
		t.Errorf("%s: a group's help lists no subcommands:\n%s", name, r.stdout)
	}
	for _, s := range []string{"Flags:", "Examples:"} {
		if len(body[s]) == 0 {
			t.Errorf("%s: no %s section:\n%s", name, s, r.stdout)
		}
	}
	flags := body["Flags:"]
	if len(flags) == 0 || !strings.HasPrefix(flags[len(flags)-1], "  -h, --help ") {
		t.Errorf("%s: the Flags section does not end with \"  -h, --help\":\n%s", name, r.stdout)
	}
	for _, line := range flags {
		if !strings.HasPrefix(line, "  --") && !strings.HasPrefix(line, "  -h, --help ") {
			t.Errorf("%s: flag line %q is not \"  --name ...\"", name, line)
		}
		// "--page N", never package flag's "--page int" (issue #50).
		if f := strings.Fields(line); len(f) > 1 && slices.Contains([]string{"int", "uint", "float", "string", "duration", "value"}, f[1]) {
			t.Errorf("%s: flag line %q shows a Go type, want an upper-case placeholder", name, line)
		}
		if strings.Contains(line, "(default ") && (strings.Contains(line, "m0s)") || strings.Contains(line, "h0m")) {
			t.Errorf("%s: flag line %q shows a Go duration default", name, line)
		}
	}
}

// TestFlagsAfterArguments: every command that takes an argument parses the
// flags after it: --help there is help, an unknown flag there is named.
func TestFlagsAfterArguments(t *testing.T) {
	for _, l := range leafCommands() {
		if l.arg == "" {
			continue
		}
		args := append(words(l.path), l.arg)
		if r := run(t, nil, append(slices.Clone(args), "--help")...); r.code != command.ExitOK || !strings.HasPrefix(r.stdout, "Usage: lrosink "+l.path) {
			t.Errorf("lrosink %s %s --help: exit %d, stdout %q, stderr %q", l.path, l.arg, r.code, r.stdout, r.stderr)
		}
		r := run(t, nil, append(slices.Clone(args), "--no-such-flag")...)
		if r.code != command.ExitUsage || !strings.Contains(r.stderr, "no-such-flag") || !strings.Contains(r.stderr, "Run 'lrosink "+l.path+" --help' for usage.") {
			t.Errorf("lrosink %s %s --no-such-flag: exit %d, stderr %q; want 2 naming the flag", l.path, l.arg, r.code, r.stderr)
		}
	}
	// A flag after the argument takes effect.
	env := storeEnv(t)
	if r := run(t, env, "register", "abc", "--kind", "batch"); r.code != command.ExitOK || !strings.Contains(r.stdout, "created batches/abc") {
		t.Errorf("register abc --kind batch: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := run(t, env, "ops", "show", "abc", "--kind", "batch", "--json"); r.code != command.ExitOK || !strings.Contains(r.stdout, `"name": "batches/abc"`) {
		t.Errorf("ops show abc --kind batch --json: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestUnexpectedArguments: a command given more arguments than it takes
// answers a usage error: exit 2, one line naming the command, and the
// pointer to its --help. Nothing runs.
func TestUnexpectedArguments(t *testing.T) {
	env := storeEnv(t)
	for _, l := range leafCommands() {
		args := append(words(l.path), "extra1", "extra2")
		r := run(t, env, args...)
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if r.code != command.ExitUsage || r.stdout != "" || len(lines) != 2 ||
			!strings.HasPrefix(lines[0], "lrosink "+l.path+": ") || lines[1] != "Run 'lrosink "+l.path+" --help' for usage." {
			t.Errorf("lrosink %v: exit %d, stdout %q, stderr %q; want 2 and a usage error", args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestGroupAnswers: every group (lrosink, ops, webhooks) answers the same
// way. No subcommand or an unknown one: exit 2, its usage on stderr. --help,
// -h and help: its usage on stdout, exit 0. help X is X --help.
func TestGroupAnswers(t *testing.T) {
	for _, g := range groupCommands() {
		name := strings.TrimSpace("lrosink " + g)
		usage := strings.TrimSpace("Usage: lrosink " + g)
		noun := "subcommand"
		if g == "" {
			noun = "command"
		}
		r := run(t, nil, words(g)...)
		if r.code != command.ExitUsage || r.stdout != "" || !strings.HasPrefix(r.stderr, usage) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 and the usage on stderr", name, r.code, r.stdout, r.stderr)
		}
		r = run(t, nil, append(words(g), "frobnicate")...)
		wantErr := name + ": unknown " + noun + " \"frobnicate\"\n\n" + usage
		if r.code != command.ExitUsage || r.stdout != "" || !strings.HasPrefix(r.stderr, wantErr) {
			t.Errorf("%s frobnicate: exit %d, stdout %q, stderr %q; want 2 and %q", name, r.code, r.stdout, r.stderr, wantErr)
		}
		var help string
		for _, a := range [][]string{{"--help"}, {"-h"}, {"help"}} {
			r = run(t, nil, append(words(g), a...)...)
			if r.code != command.ExitOK || r.stderr != "" || !strings.HasPrefix(r.stdout, usage) {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q", name, a[0], r.code, r.stdout, r.stderr)
			}
			if help == "" {
				help = r.stdout
			} else if r.stdout != help {
				t.Errorf("%s %s: a different help from --help", name, a[0])
			}
		}
		subs := listed(help)
		if len(subs) == 0 {
			t.Errorf("%s --help lists nothing", name)
			continue
		}
		sub := subs[len(subs)-1]
		direct := run(t, nil, append(words(g), sub, "--help")...)
		viaHelp := run(t, nil, append(words(g), "help", sub)...)
		if viaHelp.code != command.ExitOK || viaHelp.stdout != direct.stdout || direct.stdout == "" {
			t.Errorf("%s help %s: exit %d, stdout %q; want %s %s --help's %q", name, sub, viaHelp.code, viaHelp.stdout, name, sub, direct.stdout)
		}
		if r = run(t, nil, append(words(g), "help", "frobnicate")...); r.code != command.ExitUsage || !strings.Contains(r.stderr, "frobnicate") {
			t.Errorf("%s help frobnicate: exit %d, stderr %q", name, r.code, r.stderr)
		}
	}
}
