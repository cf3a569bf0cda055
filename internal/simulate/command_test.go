package simulate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lrosink/lrosink/internal/simulate"
)

func TestCommand(t *testing.T) {
	t.Parallel()
	getenv := func(string) string { return "" }
	var out, errb bytes.Buffer
	if code := simulate.Command(context.Background(), []string{"--ops", "60", "--seed", "5", "--quiet"}, &out, &errb, getenv); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "PASS: every invariant held") || !strings.Contains(out.String(), "60 operations, seed 5") {
		t.Fatalf("report:\n%s", out.String())
	}
	out.Reset()
	if code := simulate.Command(context.Background(), []string{"--ops", "40", "--json"}, &out, &errb, getenv); code != 0 {
		t.Fatalf("--json exit %d: %s", code, errb.String())
	}
	var rep simulate.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Ops != 40 || !rep.OK() {
		t.Fatalf("--json report %+v %v", rep, err)
	}
	if !strings.Contains(out.String(), `"WebhookOutage": "1h0m0s"`) {
		t.Errorf("the JSON report does not show the webhook outage option:\n%s", out.String())
	}
	out.Reset()
	if code := simulate.Command(context.Background(), []string{"--ops", "30", "--quiet", "--incomplete", "0.5", "--partial-batches", "1",
		"--error-objects", "0", "--webhook-outage", "2h"}, &out, &errb, getenv); code != 0 {
		t.Fatalf("new flags: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "incomplete 0.50  partial-batches 1.00  error-objects 0.00  webhook-outage 2h0m0s") {
		t.Errorf("the text report does not show the new options:\n%s", out.String())
	}
	for _, args := range [][]string{{"--ops", "0"}, {"--nope"}, {"extra"}, {"--incomplete", "1.5"}, {"--partial-batches", "-0.1"},
		{"--error-objects", "NaN"}, {"--webhook-outage", "-1h"}, {"--webhook-outage", "5h"}, {"--drop", "2"}} {
		if code := simulate.Command(context.Background(), args, &out, &errb, getenv); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code := simulate.Command(context.Background(), []string{"--store", "mysql"}, &out, &errb, getenv); code != 1 {
		t.Errorf("bad store: exit %d, want 1", code)
	}
}

// Out-of-range flags are refused before anything runs: exit 2 and one line
// naming the flag. `--dup 5` used to loop (each extra copy has chance 5)
// until the machine ran out of memory.
func TestCommandValidatesFlags(t *testing.T) {
	t.Parallel()
	getenv := func(string) string { return "" }
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
		{[]string{"--ops", "0"}, "--ops"},
		{[]string{"--ops", "-3"}, "--ops"},
		{[]string{"--horizon", "0s"}, "--horizon"},
		{[]string{"--horizon", "-1h"}, "--horizon"},
	} {
		var out, errb bytes.Buffer
		code := simulate.Command(context.Background(), append(tc.args, "--quiet"), &out, &errb, getenv)
		msg := strings.TrimSpace(errb.String())
		if code != 2 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, tc.flag) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line naming %s", tc.args, code, msg, tc.flag)
		}
		if out.Len() != 0 {
			t.Errorf("%v: ran anyway: %s", tc.args, out.String())
		}
	}
}
