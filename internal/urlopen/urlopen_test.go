package urlopen_test

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/results"
	"github.com/lrosink/lrosink/internal/urlopen"
	"github.com/lrosink/lrosink/internal/urlopen/sqliteurl"
)

func message(op string) results.Message {
	return results.Message{Operation: op, Kind: "batch", State: "SUCCEEDED", UpdateTime: time.Unix(1767000000, 0).UTC(),
		SettledBy: "webhook", SettledAt: time.Unix(1767000005, 0).UTC(), IdempotencyKey: "gemini:" + op}
}

// TestEachBinarysSet: the container opens firestore only; cmd/lrosink's set
// adds sqlite. The refusal is one line naming the variable and what this
// binary can open.
func TestEachBinarysSet(t *testing.T) {
	cloud, local := urlopen.Cloud(), urlopen.Cloud(sqliteurl.Scheme(false))
	if got := strings.Join(cloud.Stores.Names(), ","); got != "firestore" {
		t.Errorf("container stores %s, want firestore", got)
	}
	if got := strings.Join(local.Stores.Names(), ","); got != "firestore,sqlite" {
		t.Errorf("lrosink stores %s, want firestore,sqlite", got)
	}
	for _, o := range []urlopen.Openers{cloud, local} {
		if got := strings.Join(o.Results.Names(), ","); got != "file,pubsub,stdout" {
			t.Errorf("results schemes %s, want file,pubsub,stdout", got)
		}
	}
	env := urlopen.Env{Project: "p"}
	err := cloud.Stores.Check("sqlite:/tmp/x.db", env)
	if want := `LROSINK_STORE: scheme "sqlite" is not available in this binary (available: firestore)`; err == nil || err.Error() != want {
		t.Fatalf("container, sqlite: %v, want %q", err, want)
	}
	if err := local.Stores.Check("sqlite:/tmp/x.db", env); err != nil {
		t.Fatalf("lrosink, sqlite: %v", err)
	}
	// With leaves the registry it extends alone.
	if strings.Join(cloud.Stores.Names(), ",") != "firestore" {
		t.Fatal("With changed the registry it copied")
	}
}

// TestMalformed: every bad value fails the check, before any I/O, with one
// line starting with the variable it came from.
func TestMalformed(t *testing.T) {
	o := urlopen.Cloud(sqliteurl.Scheme(false))
	env := urlopen.Env{Project: "p"}
	for _, c := range []struct{ variable, value string }{
		{"LROSINK_STORE", ""},
		{"LROSINK_STORE", "mysql:x"},
		{"LROSINK_STORE", "Firestore"},
		{"LROSINK_STORE", "firestore:extra"},
		{"LROSINK_STORE", "sqlite:"},
		{"LROSINK_STORE", "sqlite"},
		{"LROSINK_STORE", ":x"},
		{"LROSINK_STORE", "/var/lib/x.db"},
		{"LROSINK_RESULTS", ""},
		{"LROSINK_RESULTS", "STDOUT"},
		{"LROSINK_RESULTS", "stdout:"},
		{"LROSINK_RESULTS", "kafka:results"},
		{"LROSINK_RESULTS", "file:"},
		{"LROSINK_RESULTS", "pubsub:"},
		{"LROSINK_RESULTS", "pubsub:results"},
		{"LROSINK_RESULTS", "pubsub:projects/p1/subscriptions/results"},
		{"LROSINK_RESULTS", "pubsub:projects/p1/topics/ab"},
		{"LROSINK_RESULTS", "pubsub:projects/p1/topics/goog-results"},
	} {
		var err error
		if c.variable == "LROSINK_STORE" {
			err = o.Stores.Check(c.value, env)
		} else {
			err = o.Results.Check(c.value, env)
		}
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), c.variable+": ") {
			t.Errorf("%s=%q: %v, want one line naming %s", c.variable, c.value, err, c.variable)
		}
	}
}

// TestFirestoreProject is the one fallback order: GOOGLE_CLOUD_PROJECT,
// then the emulator's fixed project, else an error naming the variable.
func TestFirestoreProject(t *testing.T) {
	for _, c := range []struct {
		env  urlopen.Env
		want string
	}{
		{urlopen.Env{Project: "p1", FirestoreEmulatorHost: "localhost:1"}, "p1"},
		{urlopen.Env{Project: "p1"}, "p1"},
		{urlopen.Env{FirestoreEmulatorHost: "localhost:1"}, urlopen.EmulatorProject},
	} {
		if got, err := urlopen.FirestoreProject(c.env); err != nil || got != c.want {
			t.Errorf("%+v: %q %v, want %q", c.env, got, err, c.want)
		}
	}
	err := urlopen.Cloud().Stores.Check("firestore", urlopen.Env{})
	if err == nil || !strings.HasPrefix(err.Error(), "GOOGLE_CLOUD_PROJECT: ") {
		t.Fatalf("firestore without a project or emulator: %v", err)
	}
}

// TestOpenStores opens each ledger scheme for real and writes through it.
func TestOpenStores(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	if _, _, err := urlopen.Cloud(sqliteurl.Scheme(true)).Stores.Open(ctx, "sqlite:"+missing, urlopen.Env{}); err == nil ||
		!strings.HasPrefix(err.Error(), "LROSINK_STORE: ") || !strings.Contains(err.Error(), "no ledger at "+missing+": start `lrosink serve` there or set LROSINK_STORE") ||
		!errors.Is(err, sqliteurl.ErrNoLedger) {
		t.Fatalf("read-only open of a missing database: %v", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("a read-only open created the database")
	}
	stores := map[string]urlopen.Env{"sqlite:" + filepath.Join(dir, "l.db"): {}}
	if host := os.Getenv("FIRESTORE_EMULATOR_HOST"); host != "" {
		stores["firestore"] = urlopen.Env{Project: emutest.ProjectID(t), FirestoreEmulatorHost: host}
	}
	o := urlopen.Cloud(sqliteurl.Scheme(false))
	for value, env := range stores {
		t.Run(value, func(t *testing.T) {
			l, closeFn, err := o.Stores.Open(ctx, value, env)
			if err != nil {
				t.Fatal(err)
			}
			defer closeFn()
			if _, err := l.GetOperation(ctx, "none"); !errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("read through the opened ledger: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestOpenResults opens each results scheme and publishes one message.
func TestOpenResults(t *testing.T) {
	ctx := t.Context()
	c, project := emutest.PubSub(t)
	topic := "projects/" + project + "/topics/opened"
	if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "r.jsonl")
	o := urlopen.Cloud()
	for _, value := range []string{"stdout", "file:" + file, "pubsub:" + topic} {
		t.Run(value, func(t *testing.T) {
			var stdout bytes.Buffer
			s, closeFn, err := o.Results.Open(ctx, value, urlopen.Env{Stdout: &stdout, Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Publish(ctx, message("batches/opened")); err != nil {
				t.Fatalf("publish: %v", err)
			}
			if err := closeFn(); err != nil {
				t.Fatalf("close: %v", err)
			}
			switch {
			case value == "stdout" && strings.Count(stdout.String(), "\n") != 1:
				t.Fatalf("stdout %q, want one line", stdout.String())
			case strings.HasPrefix(value, "file:"):
				b, err := os.ReadFile(file)
				if err != nil || strings.Count(string(b), "\n") != 1 || stdout.Len() != 0 {
					t.Fatalf("file %q %v (stdout %q), want one line in the file only", b, err, stdout.String())
				}
			}
		})
	}
	if _, _, err := o.Results.Open(ctx, "stdout", urlopen.Env{}); err == nil || !strings.HasPrefix(err.Error(), "LROSINK_RESULTS: ") {
		t.Fatalf("stdout without a writer: %v", err)
	}
	if _, _, err := o.Results.Open(ctx, "file:"+filepath.Join(t.TempDir(), "no", "r.jsonl"), urlopen.Env{}); err == nil ||
		!strings.HasPrefix(err.Error(), "LROSINK_RESULTS: ") {
		t.Fatalf("file in a missing directory: %v", err)
	}
}

// TestRegistryRefusesDuplicates: two openers for one scheme is a
// programming error, caught when the set is built.
func TestRegistryRefusesDuplicates(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a scheme registered twice did not panic")
		}
	}()
	urlopen.Cloud(urlopen.Firestore())
}
