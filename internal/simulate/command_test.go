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
