package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestParseInterspersed(t *testing.T) {
	for _, c := range []struct {
		args []string
		pos  []string
		kind string
	}{
		{[]string{"ID", "--kind", "batch"}, []string{"ID"}, "batch"},
		{[]string{"--kind", "video", "A", "B"}, []string{"A", "B"}, "video"},
		{[]string{"A", "--", "--kind", "x"}, []string{"A", "--kind", "x"}, ""},
	} {
		fs := NewFlagSet("t")
		kind := fs.String("kind", "", "")
		pos, err := parse(fs, c.args)
		if err != nil || !slices.Equal(pos, c.pos) || *kind != c.kind {
			t.Errorf("Parse(%q) = %q kind %q, %v; want %q kind %q", c.args, pos, *kind, err, c.pos, c.kind)
		}
	}
	if _, err := parse(NewFlagSet("t"), []string{"x", "-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h after an argument: %v, want flag.ErrHelp", err)
	}
	if _, err := parse(NewFlagSet("t"), []string{"--nope"}); err == nil || errors.Is(err, flag.ErrHelp) {
		t.Errorf("unknown flag: %v", err)
	}
	// "--" ends flag parsing even when flags follow positional arguments.
	fs := NewFlagSet("x")
	kind := fs.String("kind", "", "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parse(fs, []string{"a", "--kind", "batch", "b", "--", "--json", "-c"})
	if err != nil || !slices.Equal(pos, []string{"a", "b", "--json", "-c"}) || *kind != "batch" || *asJSON {
		t.Fatalf("pos %q kind %q json %v, %v", pos, *kind, *asJSON, err)
	}
}

func TestWriteHelpAndListValue(t *testing.T) {
	fs := NewFlagSet("t")
	var l ListValue
	fs.Var(&l, "meta", "`k=v` metadata, repeatable")
	fs.Int("limit", 50, "at most `N` rows")
	var b strings.Builder
	WriteHelp(&b, fs, Doc{Path: "ops list", Args: "[flags]", Summary: "List.", Env: "LROSINK_STORE", Examples: []string{"lrosink ops list"}})
	for _, want := range []string{"Usage: lrosink ops list [flags]", "--meta k=v", "--limit N", "(default 50)", "Environment:\nLROSINK_STORE", "Examples:\n  lrosink ops list"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, b.String())
		}
	}
	_ = l.Set("a=1, b=2")
	_ = l.Set("a=1")
	if !slices.Equal(l, ListValue{"a=1", "b=2"}) {
		t.Errorf("list %q", l)
	}
}

// TestDocParse: a flag error after a positional argument is a usage error,
// -h is help (written to stdout), and the number of positional arguments is
// the one Doc.Arg says.
func TestDocParse(t *testing.T) {
	d := Doc{Path: "x", Summary: "X."}
	fs := NewFlagSet("x")
	fs.Bool("json", false, "")
	var ue *UsageError
	if _, err := d.Parse(io.Discard, fs, []string{"a", "--nope"}); !errors.As(err, &ue) || !strings.Contains(ue.Msg, "nope") {
		t.Errorf("unknown flag after a positional argument: %v, want a usage error naming it", err)
	}
	var out strings.Builder
	if _, err := d.Parse(&out, NewFlagSet("x"), []string{"-h"}); err != ErrHelp || !strings.HasPrefix(out.String(), "Usage: lrosink x\n") {
		t.Errorf("-h: %v, help %q", err, out.String())
	}
	for _, c := range []struct {
		arg  string
		args []string
		want string // in the usage error; "" for none
	}{
		{"", nil, ""},
		{"", []string{"extra"}, `unexpected argument "extra"`},
		{"NAME", []string{"n"}, ""},
		{"NAME", nil, "want exactly one NAME, got 0 arguments"},
		{"NAME", []string{"a", "--json", "b"}, "want exactly one NAME, got 2 arguments"},
	} {
		fs := NewFlagSet("x")
		fs.Bool("json", false, "")
		d.Arg = c.arg
		pos, err := d.Parse(io.Discard, fs, c.args)
		switch {
		case c.want == "" && (err != nil || !slices.Equal(pos, c.args)):
			t.Errorf("Arg %q, %q: %q, %v", c.arg, c.args, pos, err)
		case c.want != "" && (!errors.As(err, &ue) || ue.Msg != c.want):
			t.Errorf("Arg %q, %q: %v, want the usage error %q", c.arg, c.args, err, c.want)
		}
	}
}

// TestGroupExitStatus: one mapping of a command's error to the exit status
// and its lines on stderr, every line through Redact.
func TestGroupExitStatus(t *testing.T) {
	for _, c := range []struct {
		err    error
		code   int
		stderr string
	}{
		{nil, ExitOK, ""},
		{ErrHelp, ExitOK, ""},
		{ExitStatus(ExitError), ExitError, ""},
		{fmt.Errorf("wrapped: %w", Status(7)), 7, ""},
		{Usagef("--limit %d: want 1 to 9", 0), ExitUsage, "lrosink g c: --limit 0: want 1 to 9\nRun 'lrosink g c --help' for usage.\n"},
		{&ConfigError{Err: errors.New("A: bad\nB: worse")}, ExitUsage, "lrosink g c: A: bad\nlrosink g c: B: worse\n"},
		{errors.New("the store said SECRET"), ExitError, "lrosink g c: the store said [REDACTED]\n"},
	} {
		var out, errb strings.Builder
		g := &Group{Doc: Doc{Path: "g"}, Stdout: &out, Stderr: &errb,
			Commands: map[string]Command{"c": {Run: func(context.Context, []string) error { return c.err }}},
			Redact:   func(s string) string { return strings.ReplaceAll(s, "SECRET", "[REDACTED]") }}
		if code := g.Run(t.Context(), []string{"c"}); code != c.code || errb.String() != c.stderr || out.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q; want %d, %q", c.err, code, errb.String(), c.code, c.stderr)
		}
	}
}

// TestGroupAliasesAndHelp: an alias flag runs its command; the help lists
// the commands and the alias as a flag, in WriteHelp's layout.
func TestGroupAliasesAndHelp(t *testing.T) {
	ran := ""
	var out, errb strings.Builder
	g := &Group{Doc: Doc{Summary: "Top.", Examples: []string{"lrosink v"}}, Stdout: &out, Stderr: &errb,
		Aliases: map[string]string{"version": "v"},
		Commands: map[string]Command{"v": {Summary: "print the version", Run: func(_ context.Context, args []string) error {
			ran = fmt.Sprint(args)
			return nil
		}}}}
	for _, a := range []string{"--version", "-version"} {
		ran = ""
		if code := g.Run(t.Context(), []string{a}); code != ExitOK || ran != "[]" {
			t.Errorf("%s: exit %d, ran %q", a, code, ran)
		}
	}
	if code := g.Run(t.Context(), []string{"--help"}); code != ExitOK {
		t.Fatalf("--help: exit %d", code)
	}
	want := "Usage: lrosink COMMAND [ARGS] [FLAGS]\n\nTop.\n\nCommands:\n  v   print the version\n\nFlags:\n" +
		"  --version    same as 'lrosink v'\n  -h, --help   show this help\n\nExamples:\n  lrosink v\n\nRun 'lrosink COMMAND --help' for usage.\n"
	if out.String() != want {
		t.Errorf("help:\n%s\nwant:\n%s", out.String(), want)
	}
}
