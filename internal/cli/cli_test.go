package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/cli/command"
)

// commandPaths lists every command and subcommand that must answer --help.
func commandPaths() [][]string {
	var paths [][]string
	for name := range (&env{}).commands() {
		paths = append(paths, []string{name})
	}
	return append(paths, []string{"ops", "list"}, []string{"ops", "show"})
}

func TestHelpOnEveryCommand(t *testing.T) {
	for _, path := range commandPaths() {
		for _, h := range []string{"--help", "-h"} {
			r := run(t, nil, append(slices.Clone(path), h)...)
			p := strings.Join(path, " ")
			if r.code != command.ExitOK {
				t.Errorf("lrosink %s %s: exit %d, stderr %q", p, h, r.code, r.stderr)
				continue
			}
			for _, want := range []string{"Usage: lrosink " + p, "Examples:\n  lrosink " + path[0]} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("lrosink %s %s: help lacks %q:\n%s", p, h, want, r.stdout)
				}
			}
		}
	}
	// `lrosink help CMD` is `lrosink CMD --help`.
	if r := run(t, nil, "help", "ops", "list"); r.code != command.ExitOK || !strings.Contains(r.stdout, "Usage: lrosink ops list") {
		t.Errorf("lrosink help ops list: %d %q", r.code, r.stdout)
	}
}

func TestTopLevelUsage(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := run(t, nil, args...)
		if r.code != command.ExitOK || !strings.Contains(r.stdout, "Commands:") || r.stderr != "" {
			t.Errorf("lrosink %v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
		for name := range (&env{}).commands() {
			if !strings.Contains(r.stdout, "  "+name+" ") {
				t.Errorf("lrosink %v does not list %s", args, name)
			}
		}
	}
	r := run(t, nil)
	if r.code != command.ExitUsage || !strings.Contains(r.stderr, "Commands:") || r.stdout != "" {
		t.Errorf("lrosink: exit %d, stderr %q", r.code, r.stderr)
	}
	r = run(t, nil, "frobnicate")
	if r.code != command.ExitUsage || !strings.Contains(r.stderr, `unknown command "frobnicate"`) || !strings.Contains(r.stderr, "Commands:") {
		t.Errorf("lrosink frobnicate: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	env := storeEnv(t)
	for _, args := range [][]string{
		{"serve", "--no-such-flag"},
		{"serve", "extra"},
		{"register"},
		{"register", "a", "b"},
		{"register", "abc"}, // a bare id needs --kind
		{"register", "batches/x", "--kind", "galaxy"},
		{"register", "batches/x", "--meta", "novalue"},
		{"ops"},
		{"ops", "frob"},
		{"ops", "list", "--limit", "0"},
		{"ops", "list", "--state", "DONE"},
		{"ops", "list", "--state", "PENDING", "--stuck"},
		{"ops", "show"},
		{"ops", "show", "batches/x", "--json=maybe"},
		{"replay"},
		{"replay", "batches/x", "--kind", "video"}, // the prefix contradicts the kind
	} {
		r := run(t, env, args...)
		if r.code != command.ExitUsage {
			t.Errorf("lrosink %v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
			continue
		}
		if !strings.Contains(r.stderr, "--help' for usage") {
			t.Errorf("lrosink %v: stderr lacks the --help hint: %q", args, r.stderr)
		}
	}
}

func TestConfigErrorNamesFlagOrVariable(t *testing.T) {
	r := run(t, map[string]string{"LROSINK_GRACE": "soon"}, "ops", "list")
	if r.code != command.ExitUsage || !strings.Contains(r.stderr, "LROSINK_GRACE") {
		t.Errorf("LROSINK_GRACE=soon: exit %d, stderr %q", r.code, r.stderr)
	}
	r = run(t, nil, "serve", "--grace", "soon", "--store", "mysql:x")
	if r.code != command.ExitUsage || !strings.Contains(r.stderr, "--grace (LROSINK_GRACE)") || !strings.Contains(r.stderr, "--store (LROSINK_STORE)") {
		t.Errorf("serve --grace soon --store mysql:x: exit %d, stderr %q", r.code, r.stderr)
	}
	r = run(t, nil, "serve", "--webhook-deadline", "0s")
	if r.code != command.ExitUsage || !strings.Contains(r.stderr, "--webhook-deadline (LROSINK_WEBHOOK_DEADLINE)") {
		t.Errorf("serve --webhook-deadline 0s: exit %d, stderr %q", r.code, r.stderr)
	}
	// The flag wins over the variable: a valid flag hides a bad variable.
	env := storeEnv(t)
	env["LROSINK_STORE"] = "bogus"
	r = run(t, env, "register", "batches/flagwins", "--create", "--store", "sqlite:"+t.TempDir()+"/x.db")
	if r.code != command.ExitOK {
		t.Errorf("--store over a bad LROSINK_STORE: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestListenAddr(t *testing.T) {
	for _, c := range []struct {
		flag, host, port, want string
	}{
		{"", "", "", "127.0.0.1:8080"},
		{"127.0.0.1:9", "", "7000", "127.0.0.1:9"},
		{"", "", "7000", "127.0.0.1:7000"}, // PORT alone changes only the port
		{"", "10.0.0.1", "7000", "10.0.0.1:7000"},
		{"", "10.0.0.1", "", "10.0.0.1:8080"},
		{"0.0.0.0:9", "127.0.0.1", "7000", "0.0.0.0:9"},
	} {
		got, err := listenAddr(c.flag, mapEnv(map[string]string{"HOST": c.host, "PORT": c.port}))
		if err != nil || got != c.want {
			t.Errorf("listenAddr(%q, HOST=%q PORT=%q) = %q, want %q", c.flag, c.host, c.port, got, c.want)
		}
	}
}
