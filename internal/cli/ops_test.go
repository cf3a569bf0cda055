package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lrosink/lrosink/internal/cli/command"
	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/sqliteledger"
	"github.com/lrosink/lrosink/internal/lifecycle"
)

// TestLedgerCommands: register, ops list, ops show and replay on one
// SQLite ledger, as an operator would use them.
func TestLedgerCommands(t *testing.T) {
	env := storeEnv(t)

	for _, c := range []struct{ args, want []string }{
		{[]string{"register", "batches/done-one", "--meta", "job=nightly", "--meta", "owner=data"}, []string{"created batches/done-one"}},
		{[]string{"register", "pending-long-name-here", "--kind", "batch"}, []string{"created batches/pending-long-name-here"}},
		{[]string{"register", "models/veo-3.0-generate-001/operations/v9"}, []string{"created models/veo-3.0-generate-001/operations/v9"}},
		{[]string{"register", " batches/done-one/ "}, []string{"already known batches/done-one", "PENDING"}},
	} {
		r := run(t, env, c.args...)
		if r.code != command.ExitOK {
			t.Fatalf("%v: exit %d, stderr %q", c.args, r.code, r.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stdout, w) {
				t.Fatalf("%v: stdout %q lacks %q", c.args, r.stdout, w)
			}
		}
	}
	pub := &recorder{}
	settle(t, env["LROSINK_STORE"], "batches/done-one", lifecycle.Succeeded, pub)
	if r := run(t, env, "register", "batches/done-one"); r.code != command.ExitOK || !strings.Contains(r.stdout, "already known batches/done-one (SUCCEEDED") {
		t.Fatalf("register after settling: %d %q", r.code, r.stdout)
	}

	// The table: a header and one row per operation, columns aligned.
	r := run(t, env, "ops", "list")
	if r.code != command.ExitOK {
		t.Fatalf("ops list: %d %q", r.code, r.stderr)
	}
	rows := checkTable(t, r.stdout, []string{"NAME", "KIND", "STATE", "VERSION", "SUBMITTED", "AGE", "SETTLED_BY", "LAST_CHECK"})
	// A Veo operation is listed by its model path, as it was registered.
	if names := column(rows, 0); !sameSet(names, []string{"batches/done-one", "batches/pending-long-name-here", "models/veo-3.0-generate-001/operations/v9"}) {
		t.Fatalf("ops list names %v", names)
	}
	for _, row := range rows {
		if row[0] == "batches/done-one" && (row[2] != "SUCCEEDED" || row[6] != "webhook" || row[1] != "batch") {
			t.Fatalf("settled row %q", row)
		}
	}

	r = run(t, env, "ops", "list", "--state", "SUCCEEDED")
	if rows := checkTable(t, r.stdout, nil); r.code != command.ExitOK || !slices.Equal(column(rows, 0), []string{"batches/done-one"}) {
		t.Fatalf("--state SUCCEEDED: %d %q", r.code, r.stdout)
	}
	r = run(t, env, "ops", "list", "--state", "pending", "--limit", "1")
	table, rest, _ := strings.Cut(r.stdout, "…")
	if rows := checkTable(t, table, nil); r.code != command.ExitOK || len(rows) != 1 || rows[0][2] != "PENDING" || rest != " and 1 more; use --page 2\n" {
		t.Fatalf("--state pending --limit 1: %d %q", r.code, r.stdout)
	}
	// Nothing is pending for six hours yet; with a 1ns threshold both are.
	// An intent bound to no operation past LROSINK_INTENT_GRACE (1h) is
	// listed after the operations, as an intent; one recorded a minute ago
	// is not.
	recordIntent(t, env["LROSINK_STORE"], "orphan-video", time.Now().Add(-90*time.Minute))
	recordIntent(t, env["LROSINK_STORE"], "in-flight", time.Now().Add(-time.Minute))
	r = run(t, env, "ops", "list", "--stuck")
	opsTable, intentsPart, ok := strings.Cut(r.stdout, "\nUnbound intents (")
	if r.code != command.ExitOK || !ok || opsTable != "no operations match\n" {
		t.Fatalf("--stuck: %d %q", r.code, r.stdout)
	}
	_, intentsTable, _ := strings.Cut(intentsPart, "\n")
	irows := checkTable(t, intentsTable, []string{"KEY", "KIND", "MODEL", "DISPLAY_NAME", "RECORDED", "AGE"})
	if len(irows) != 1 || irows[0][0] != "orphan-video" || irows[0][1] != "video" || irows[0][2] != "models/veo-3.0-generate-001" || irows[0][5] != "1h30m" {
		t.Fatalf("--stuck: unbound intents %q", irows)
	}
	r = run(t, env, "ops", "list", "--stuck", "--stuck-after", "1ns", "--json")
	var stuck []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &stuck); err != nil || r.code != command.ExitOK || len(stuck) != 3 {
		t.Fatalf("--stuck --stuck-after 1ns --json: %d %v %q", r.code, err, r.stdout)
	}
	for _, row := range stuck[:2] {
		if row["state"] != "PENDING" || row["name"] == nil {
			t.Fatalf("stuck operation %+v is not pending", row)
		}
	}
	if in := stuck[2]; in["intent"] != "orphan-video" || in["kind"] != "video" || in["state"] != "unbound" || in["name"] != nil ||
		in["display_name"] != "" || in["age_seconds"].(float64) < 90*60 || in["metadata"] != nil {
		t.Fatalf("--stuck --json: the intent %+v", in)
	}
	r = run(t, env, "ops", "list", "--json")
	var all []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil || len(all) != 3 {
		t.Fatalf("ops list --json: %v %q", err, r.stdout)
	}

	// show: text and JSON.
	r = run(t, env, "ops", "show", "batches/done-one")
	if r.code != command.ExitOK {
		t.Fatalf("ops show: %d %q", r.code, r.stderr)
	}
	for _, w := range []string{"State:", "SUCCEEDED", "Settled by:", "webhook", "Claim:", "DONE", "attempts 1",
		"first-sighting", "msg_batches/done-one", "gemini:batches/done-one", `"job": "nightly"`, "gs://b/batches/done-one"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("ops show lacks %q:\n%s", w, r.stdout)
		}
	}
	var v opView
	r = run(t, env, "ops", "show", "done-one", "--kind", "batch", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Claim == nil {
		t.Fatalf("ops show --json: %v %q", err, r.stdout)
	}
	if v.State != "SUCCEEDED" || v.Claim.Status != "DONE" || len(v.Claim.Holder) != 8 || len(v.History) != 2 ||
		v.History[1].Source != "webhook" || v.UserMetadata["owner"] != "data" || v.Version < 2 || v.SettledAt.IsZero() {
		t.Fatalf("ops show --json: %+v", v)
	}
	r = run(t, env, "ops", "show", "batches/never-seen")
	if r.code != command.ExitError || !strings.Contains(r.stderr, "batches/never-seen is not in the ledger") || !strings.HasPrefix(r.stderr, "lrosink ops show:") {
		t.Fatalf("ops show unknown: %d %q", r.code, r.stderr)
	}

	// replay: an unsettled operation has nothing to replay. stdout is the
	// results sink, named (replay refuses without one).
	env["LROSINK_RESULTS"] = "stdout"
	r = run(t, env, "replay", "batches/pending-long-name-here")
	if r.code != command.ExitError || !strings.Contains(r.stderr, "has not settled") || r.stdout != "" {
		t.Fatalf("replay pending: %d %q %q", r.code, r.stdout, r.stderr)
	}
	// A settled one: its message again on stdout (the default results),
	// carrying the replay_id that is printed last.
	r = run(t, env, "replay", "batches/done-one")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != command.ExitOK || len(lines) != 2 || !strings.HasPrefix(lines[1], "replay-") {
		t.Fatalf("replay: %d %q %q", r.code, r.stdout, r.stderr)
	}
	msgs := resultLines(t, lines[0])
	original := pub.All()[0]
	if m := msgs[0]; m.Attributes["replay_id"] != lines[1] || m.IdempotencyKey != original.IdempotencyKey ||
		m.Operation != "batches/done-one" || m.State != "SUCCEEDED" || m.Attributes["idempotency_key"] != original.IdempotencyKey {
		t.Fatalf("replayed line %+v, replay id %q", m, lines[1])
	}
	r = run(t, env, "ops", "show", "batches/done-one", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || len(v.Replays) != 1 || v.Replays[0].ID != lines[1] || v.State != "SUCCEEDED" {
		t.Fatalf("replay not recorded: %v %+v", err, v.Replays)
	}
	if r = run(t, env, "ops", "show", "batches/done-one"); !strings.Contains(r.stdout, lines[1]) {
		t.Fatalf("ops show does not list the replay:\n%s", r.stdout)
	}
}

// checkTable parses a tabwriter table, checks the header (if want is set)
// and that every column starts at the same offset in every line, and
// returns the rows' fields.
func checkTable(t *testing.T, out string, want []string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := strings.Fields(lines[0])
	if want != nil && !slices.Equal(header, want) {
		t.Fatalf("header %q, want %q", header, want)
	}
	var starts []int
	for i := 0; i < len(lines[0]); i++ {
		if lines[0][i] != ' ' && (i == 0 || lines[0][i-1] == ' ') {
			starts = append(starts, i)
		}
	}
	var rows [][]string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != len(header) {
			t.Fatalf("row %q has %d fields, header %d", l, len(f), len(header))
		}
		for c, s := range starts {
			if len(l) <= s || l[s] == ' ' || (s > 0 && l[s-1] != ' ') {
				t.Fatalf("column %s not aligned in row %q:\n%s", header[c], l, out)
			}
		}
		rows = append(rows, f)
	}
	return rows
}

func column(rows [][]string, c int) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r[c])
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestLedgerCommandsOnFirestore: the same commands against LROSINK_STORE=
// firestore (the emulator), where ops reads through its own client.
func TestLedgerCommandsOnFirestore(t *testing.T) {
	emutest.FirestoreHost(t)
	env := map[string]string{"LROSINK_STORE": "firestore", "GOOGLE_CLOUD_PROJECT": emutest.ProjectID(t), "LROSINK_RESULTS": "stdout"}
	if r := run(t, env, "register", "batches/fs1", "--meta", "k=v"); r.code != command.ExitOK || !strings.Contains(r.stdout, "created batches/fs1") {
		t.Fatalf("register: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r := run(t, env, "ops", "list", "--state", "PENDING")
	if rows := checkTable(t, r.stdout, nil); r.code != command.ExitOK || !slices.Equal(column(rows, 0), []string{"batches/fs1"}) {
		t.Fatalf("ops list: %d %q %q", r.code, r.stdout, r.stderr)
	}
	var v opView
	r = run(t, env, "ops", "show", "batches/fs1", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.State != "PENDING" || v.Claim != nil || v.UserMetadata["k"] != "v" {
		t.Fatalf("ops show: %v %q %q", err, r.stdout, r.stderr)
	}
	if r = run(t, env, "replay", "batches/fs1"); r.code != command.ExitError || !strings.Contains(r.stderr, "has not settled (state PENDING)") {
		t.Fatalf("replay: %d %q", r.code, r.stderr)
	}
	// Written by this version, fs1 has its bucket: read, not written.
	if r = run(t, env, "ops", "backfill-shards"); r.code != command.ExitOK || strings.TrimSpace(r.stdout) != `{"scanned":1,"written":0,"changed":0}` {
		t.Fatalf("ops backfill-shards: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestBackfillShardsOnSQLite: SQLite fills the bucket column when it
// migrates, so the backfill has nothing to do and says why.
func TestBackfillShardsOnSQLite(t *testing.T) {
	env := storeEnv(t)
	if r := run(t, env, "register", "batches/b1"); r.code != command.ExitOK {
		t.Fatalf("register: %d %q", r.code, r.stderr)
	}
	r := run(t, env, "ops", "backfill-shards")
	if r.code != command.ExitOK || !strings.Contains(r.stdout, `"written":0`) || !strings.Contains(r.stdout, "keeps every operation's bucket already") {
		t.Fatalf("ops backfill-shards: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestOpsListPages: ops list shows --limit rows a page, says how many rows
// later pages hold, and --page walks to them; together the pages list
// every operation once.
func TestOpsListPages(t *testing.T) {
	env := storeEnv(t)
	for i := range 5 {
		if r := run(t, env, "register", fmt.Sprintf("batches/page-%d", i)); r.code != command.ExitOK {
			t.Fatalf("register: %d %q", r.code, r.stderr)
		}
	}
	var seen []string
	for page, want := range []struct {
		rows int
		rest string
	}{{2, "… and 3 more; use --page 2"}, {2, "… and 1 more; use --page 3"}, {1, ""}} {
		r := run(t, env, "ops", "list", "--limit", "2", "--page", fmt.Sprint(page+1))
		if r.code != command.ExitOK {
			t.Fatalf("page %d: %d %q", page+1, r.code, r.stderr)
		}
		table, rest, _ := strings.Cut(r.stdout, "…")
		if want.rest == "" && rest != "" || want.rest != "" && "…"+strings.TrimRight(rest, "\n") != want.rest {
			t.Errorf("page %d: trailer %q, want %q", page+1, rest, want.rest)
		}
		rows := checkTable(t, table, []string{"NAME", "KIND", "STATE", "VERSION", "SUBMITTED", "AGE", "SETTLED_BY", "LAST_CHECK"})
		if len(rows) != want.rows {
			t.Errorf("page %d: %d rows, want %d", page+1, len(rows), want.rows)
		}
		seen = append(seen, column(rows, 0)...)
	}
	if !sameSet(seen, []string{"batches/page-0", "batches/page-1", "batches/page-2", "batches/page-3", "batches/page-4"}) {
		t.Errorf("the pages listed %v", seen)
	}
	if r := run(t, env, "ops", "list", "--page", "0"); r.code != command.ExitUsage || !strings.Contains(r.stderr, "--page") {
		t.Errorf("--page 0: %d %q", r.code, r.stderr)
	}
}

// recordIntent records an unbound video intent at at in the SQLite ledger
// at store, as a submission would before its create.
func recordIntent(t *testing.T, store, key string, at time.Time) {
	t.Helper()
	s, err := sqliteledger.Open(t.Context(), strings.TrimPrefix(store, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in := ledger.Intent{Key: key, Kind: "video", Model: "models/veo-3.0-generate-001", Metadata: map[string]any{"secret": "x"}, CreatedAt: at}
	if _, err := s.Apply(t.Context(), ledger.PutIntent(in)); err != nil {
		t.Fatal(err)
	}
}

// TestOpsListKindNameAndEmpty: --kind and --name PREFIX narrow the list
// (a prefix without "/" is looked for in every kind's names), with --state
// too; nothing matching says "no operations match" (JSON: []), never a
// header alone; ops show puts how long ago beside each past time.
func TestOpsListKindNameAndEmpty(t *testing.T) {
	env := storeEnv(t)
	if r := run(t, env, "ops", "list"); r.code != command.ExitOK || r.stdout != "no operations match\n" {
		t.Fatalf("empty ledger: exit %d, stdout %q", r.code, r.stdout)
	}
	if r := run(t, env, "ops", "list", "--json"); r.code != command.ExitOK || strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("empty ledger --json: exit %d, stdout %q", r.code, r.stdout)
	}
	for _, name := range []string{"batches/nightly-2", "batches/nightly-1", "batches/other", "models/veo-3.0-generate-001/operations/nightly-v", "interactions/nightly-i"} {
		if r := run(t, env, "register", name); r.code != command.ExitOK {
			t.Fatalf("register %s: %d %s", name, r.code, r.stderr)
		}
	}
	settle(t, env["LROSINK_STORE"], "batches/nightly-1", lifecycle.Succeeded, &recorder{})
	names := func(args ...string) []string {
		t.Helper()
		r := run(t, env, append([]string{"ops", "list"}, args...)...)
		if r.code != command.ExitOK {
			t.Fatalf("ops list %v: exit %d, %q", args, r.code, r.stderr)
		}
		if r.stdout == "no operations match\n" {
			return nil
		}
		table, _, _ := strings.Cut(r.stdout, "…")
		return column(checkTable(t, table, nil), 0)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--kind", "video"}, []string{"models/veo-3.0-generate-001/operations/nightly-v"}}, // listed as submitted
		{[]string{"--kind", "Interaction"}, []string{"interactions/nightly-i"}},
		{[]string{"--name", "batches/nightly-"}, []string{"batches/nightly-1", "batches/nightly-2"}},
		{[]string{"--name", "nightly-"}, []string{"batches/nightly-1", "batches/nightly-2", "interactions/nightly-i", "models/veo-3.0-generate-001/operations/nightly-v"}},
		{[]string{"--name", "batches/nightly-", "--state", "SUCCEEDED"}, []string{"batches/nightly-1"}},
		{[]string{"--name", "nightly-", "--kind", "batch", "--state", "PENDING"}, []string{"batches/nightly-2"}},
		{[]string{"--name", "batches/nope"}, nil},
		{[]string{"--kind", "video", "--state", "SUCCEEDED"}, nil},
	} {
		if got := names(c.args...); !slices.Equal(got, c.want) {
			t.Errorf("ops list %v: %q, want %q", c.args, got, c.want)
		}
	}
	// A Veo operation is found by the name it is shown as,
	// models/M/operations/ID, though stored as operations/ID; in the order
	// of the names shown.
	for _, name := range []string{"models/veo-3.0-generate-001/operations/a-veo", "models/veo-2/operations/z-veo"} {
		if r := run(t, env, "register", name); r.code != command.ExitOK {
			t.Fatalf("register %s: %d %s", name, r.code, r.stderr)
		}
	}
	veo3 := []string{"models/veo-3.0-generate-001/operations/a-veo", "models/veo-3.0-generate-001/operations/nightly-v"}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--name", "models/veo-3.0-generate-001/operations/"}, veo3},
		{[]string{"--name", "models/veo-3.0-generate-001/operations/nightly-v"}, veo3[1:]},
		{[]string{"--name", "models/veo-3.0-generate-001/op"}, veo3},
		{[]string{"--name", "models/veo"}, append([]string{"models/veo-2/operations/z-veo"}, veo3...)},
		{[]string{"--name", "models/veo-2/"}, []string{"models/veo-2/operations/z-veo"}},
		{[]string{"--name", "models/veo-3.0-generate-001/operations/z-veo"}, nil}, // operations/z-veo is models/veo-2's
		{[]string{"--name", "models/veo", "--state", "SUCCEEDED"}, nil},
		{[]string{"--name", "models/gemini"}, nil},
		{[]string{"--name", "operations/"}, []string{"models/veo-2/operations/z-veo", "models/veo-3.0-generate-001/operations/a-veo", "models/veo-3.0-generate-001/operations/nightly-v"}},
	} {
		if got := names(c.args...); !slices.Equal(got, c.want) {
			t.Errorf("ops list %v: %q, want %q", c.args, got, c.want)
		}
	}
	r := run(t, env, "ops", "list", "--name", "nightly-", "--limit", "2")
	if !strings.Contains(r.stdout, "… more may match; narrow --name nightly- or raise --limit") {
		t.Errorf("--name --limit 2: %q", r.stdout)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--kind", "bogus"}, "want batch, video or interaction"},
		{[]string{"--kind", "vidoe"}, "(did you mean video?)"},
		{[]string{"--state", "SUCEEDED"}, "(did you mean SUCCEEDED?)"},
		{[]string{"--name", "x", "--page", "2"}, "--name"},
	} {
		if r := run(t, env, append([]string{"ops", "list"}, c.args...)...); r.code != command.ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("ops list %v: exit %d, stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
	r = run(t, env, "ops", "show", "batches/nightly-1")
	if !regexp.MustCompile(`Submitted:\s+20\S+Z \(\d+s ago\)`).MatchString(r.stdout) ||
		!regexp.MustCompile(`Settled:\s+20\S+Z \(\d+s ago\)`).MatchString(r.stdout) {
		t.Errorf("ops show: no relative times beside the absolute ones:\n%s", r.stdout)
	}
	// replay --json: one line naming the operation and the replay id.
	env["LROSINK_RESULTS"] = "file:" + filepath.Join(t.TempDir(), "r.jsonl")
	r = run(t, env, "replay", "nightly-1", "--kind", "batch", "--json")
	var out map[string]string
	if r.code != command.ExitOK || strings.Count(r.stdout, "\n") != 1 || json.Unmarshal([]byte(r.stdout), &out) != nil ||
		out["operation"] != "batches/nightly-1" || !strings.HasPrefix(out["replay_id"], "replay-") {
		t.Errorf("replay --json: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
