package command

import (
	"errors"
	"flag"
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
		pos, err := Parse(fs, c.args)
		if err != nil || !slices.Equal(pos, c.pos) || *kind != c.kind {
			t.Errorf("Parse(%q) = %q kind %q, %v; want %q kind %q", c.args, pos, *kind, err, c.pos, c.kind)
		}
	}
	if _, err := Parse(NewFlagSet("t"), []string{"x", "-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h after an argument: %v, want flag.ErrHelp", err)
	}
	if _, err := Parse(NewFlagSet("t"), []string{"--nope"}); err == nil || errors.Is(err, flag.ErrHelp) {
		t.Errorf("unknown flag: %v", err)
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
