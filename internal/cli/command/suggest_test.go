package command

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"send", "send", 0}, {"sned", "send", 1}, {"", "abc", 3}, {"abc", "", 3},
		{"serv", "serve", 1}, {"batch.succeded", "batch.succeeded", 1}, {"kitten", "sitting", 3},
		{"replya", "replay", 1}, {"ca", "abc", 3},
	} {
		if got := EditDistance(c.a, c.b); got != c.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	cmds := []string{"serve", "send", "replay", "register", "reconcile", "bench", "ops", "submit", "simulate", "version", "webhooks"}
	for typed, want := range map[string]string{
		"sned": "send", "serv": "serve", "replya": "replay", "regster": "register", "benchh": "bench",
		"SEND": "send", "webhook": "webhooks", "frobnicate": "", "": "", "xyz": "",
		// "se" starts serve and send: a tie, no suggestion.
		"se": "",
		// submt is one from submit; simulate is far.
		"submt": "submit",
	} {
		if got := Suggest(typed, cmds); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", typed, got, want)
		}
	}
	types := []string{"batch.succeeded", "batch.failed", "batch.cancelled", "batch.expired", "video.generated"}
	if got := Suggest("batch.succeded", types); got != "batch.succeeded" {
		t.Errorf("Suggest(batch.succeded) = %q", got)
	}
	if got := Suggest("batch.zzz", types); got != "" {
		t.Errorf("Suggest(batch.zzz) = %q, want none (nothing is a typo of it)", got)
	}
}

// TestGroupSuggestsACommand: an unknown command close to a known one exits
// 2 with "did you mean" and a pointer to --help (not the whole listing);
// one close to none gets the listing.
func TestGroupSuggestsACommand(t *testing.T) {
	var out, errb strings.Builder
	g := &Group{Doc: Doc{Summary: "x"}, Stdout: &out, Stderr: &errb, Commands: map[string]Command{
		"send":  {Summary: "send one", Run: func(context.Context, []string) error { return nil }},
		"serve": {Summary: "serve all", Run: func(context.Context, []string) error { return nil }},
	}}
	if code := g.Run(t.Context(), []string{"sned"}); code != ExitUsage {
		t.Fatalf("sned: exit %d", code)
	}
	if want := `lrosink: unknown command "sned"; did you mean "send"?` + "\nRun 'lrosink --help' for usage.\n"; errb.String() != want {
		t.Errorf("sned: stderr %q, want %q", errb.String(), want)
	}
	errb.Reset()
	if code := g.Run(t.Context(), []string{"frobnicate"}); code != ExitUsage || strings.Contains(errb.String(), "did you mean") ||
		!strings.Contains(errb.String(), "Commands:") {
		t.Errorf("frobnicate: exit %d, stderr %q", code, errb.String())
	}
}

// TestParseSuggestsAFlag: an unknown flag close to one the command has is
// a usage error that names it.
func TestParseSuggestsAFlag(t *testing.T) {
	fs := NewFlagSet("t")
	fs.String("store", "", "")
	fs.Bool("json", false, "")
	_, err := Doc{}.Parse(io.Discard, fs, []string{"--stroe", "x"})
	if err == nil || err.Error() != "unknown flag --stroe; did you mean --store?" {
		t.Errorf("--stroe: %v", err)
	}
	fs = NewFlagSet("t")
	fs.Bool("json", false, "")
	if _, err := (Doc{}).Parse(io.Discard, fs, []string{"--frobnicate"}); err == nil || err.Error() != "unknown flag --frobnicate" {
		t.Errorf("--frobnicate: %v", err)
	}
}

// TestHelpHasNoGoTypeNames: a flag whose usage names no `VALUE` is shown
// with an upper-case placeholder, as the others, never "--crash float".
func TestHelpHasNoGoTypeNames(t *testing.T) {
	fs := NewFlagSet("t")
	fs.Float64("crash", 0.1, "chance of a crash")
	fs.Int("page", 500, "rows per query")
	fs.Duration("horizon", time.Hour, "simulated time")
	fs.String("spec", "", "a spec")
	var b strings.Builder
	WriteHelp(&b, fs, Doc{Summary: "x"})
	for _, want := range []string{"--crash F ", "--page N ", "--horizon D ", "--spec S "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, b.String())
		}
	}
	for _, bad := range []string{" float", " int ", " duration", " string"} {
		if strings.Contains(b.String(), bad) {
			t.Errorf("help shows the Go type %q:\n%s", bad, b.String())
		}
	}
}
