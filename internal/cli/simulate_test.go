package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/simulate"
)

// simulateCmd runs `lrosink simulate args...` in-process.
func simulateCmd(t *testing.T, args ...string) runResult {
	t.Helper()
	return run(t, nil, append([]string{"simulate"}, args...)...)
}

func TestSimulateCommand(t *testing.T) {
	t.Parallel()
	r := simulateCmd(t, "--ops", "60", "--seed", "5", "--quiet")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "PASS: every invariant held") || !strings.Contains(r.stdout, "60 operations, seed 5") {
		t.Fatalf("report:\n%s", r.stdout)
	}
	if r = simulateCmd(t, "--ops", "40", "--json"); r.code != 0 {
		t.Fatalf("--json exit %d: %s", r.code, r.stderr)
	}
	var rep simulate.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Ops != 40 || !rep.OK() {
		t.Fatalf("--json report %+v %v", rep, err)
	}
	if !strings.Contains(r.stdout, `"WebhookOutage": "1h0m0s"`) {
		t.Errorf("the JSON report does not show the webhook outage option:\n%s", r.stdout)
	}
	r = simulateCmd(t, "--ops", "30", "--quiet", "--incomplete", "0.5", "--partial-batches", "1",
		"--error-objects", "0", "--webhook-outage", "2h")
	if r.code != 0 {
		t.Fatalf("new flags: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "incomplete 0.50  partial-batches 1.00  error-objects 0.00  webhook-outage 2h0m0s") {
		t.Errorf("the text report does not show the new options:\n%s", r.stdout)
	}
	// The submission faults (issue #48): the report says what was
	// submitted, killed between create and bind and submitted twice.
	r = simulateCmd(t, "--ops", "40", "--seed", "48", "--quiet", "--submit", "1", "--crash-before-bind", "0.5", "--duplicate-submit", "0.5",
		"--intent-grace", "30m")
	if r.code != 0 {
		t.Fatalf("submission flags: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "through package submit (share 1.00; crash-before-bind 0.50, duplicate-submit 0.50, intent grace 30m0s)") {
		t.Errorf("the text report does not show the submission options:\n%s", r.stdout)
	}
	for _, args := range [][]string{{"--ops", "0"}, {"--nope"}, {"extra"}, {"--incomplete", "1.5"}, {"--partial-batches", "-0.1"},
		{"--error-objects", "NaN"}, {"--webhook-outage", "-1h"}, {"--webhook-outage", "5h"}, {"--drop", "2"}} {
		if r := simulateCmd(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2", args, r.code)
		}
	}
	// A store no scheme takes is a configuration error (CONTRACT §1).
	if r := simulateCmd(t, "--store", "mysql"); r.code != 2 {
		t.Errorf("bad store: exit %d, want 2", r.code)
	}
}

// Out-of-range flags are refused before anything runs: exit 2 and one line
// naming the flag. `--dup 5` used to loop (each extra copy has chance 5)
// until the machine ran out of memory.
func TestSimulateValidatesFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--dup", "5"}, "--dup"},
		{[]string{"--dup", "1"}, "--dup"},
		{[]string{"--dup", "NaN"}, "--dup"},
		{[]string{"--reorder", "-0.1"}, "--reorder"},
		{[]string{"--drop", "1.5"}, "--drop"},
		{[]string{"--crash", "2"}, "--crash"},
		{[]string{"--ledger-errors", "1"}, "--ledger-errors"},
		{[]string{"--publish-errors", "7"}, "--publish-errors"},
		{[]string{"--slow-effects", "-1"}, "--slow-effects"},
		{[]string{"--unstorable-metadata", "3"}, "--unstorable-metadata"},
		{[]string{"--poison", "1"}, "--poison"},
		{[]string{"--submit", "1.1"}, "--submit"},
		{[]string{"--crash-before-bind", "1"}, "--crash-before-bind"},
		{[]string{"--duplicate-submit", "-0.5"}, "--duplicate-submit"},
		{[]string{"--intent-grace", "0s"}, "--intent-grace"},
		{[]string{"--intent-grace", "5h"}, "--intent-grace"},
		{[]string{"--ops", "0"}, "--ops"},
		{[]string{"--ops", "-3"}, "--ops"},
		{[]string{"--horizon", "0s"}, "--horizon"},
		{[]string{"--horizon", "-1h"}, "--horizon"},
		// A scheme no opener takes (exit 1 before).
		{[]string{"--store", "bogus:x"}, "--store"},
		{[]string{"--results", "bogus:x"}, "--results"},
	} {
		r := simulateCmd(t, append(slices.Clone(tc.args), "--quiet")...)
		msg := strings.TrimSpace(r.stderr)
		if r.code != 2 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, tc.flag) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line naming %s", tc.args, r.code, msg, tc.flag)
		}
		if r.stdout != "" {
			t.Errorf("%v: ran anyway: %s", tc.args, r.stdout)
		}
	}
}
