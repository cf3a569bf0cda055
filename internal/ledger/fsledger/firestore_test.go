package fsledger

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
	"github.com/lrosink/lrosink/internal/shard"
)

func TestConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledger.Ledger {
		c, _ := emutest.Firestore(t)
		return New(c, nil)
	})
}

// stringSize and valueSize follow Firestore's storage size rules
// (https://cloud.google.com/firestore/docs/storage-size), which the 1 MiB
// document limit is measured in.
func stringSize(s string) int { return len(s) + 1 }

func valueSize(t *testing.T, v any) int {
	switch v := v.(type) {
	case nil, bool:
		return 1
	case int64, float64, time.Time:
		return 8
	case string:
		return stringSize(v)
	case []byte:
		return len(v)
	case []any:
		n := 0
		for _, e := range v {
			n += valueSize(t, e)
		}
		return n
	case map[string]any:
		n := 0
		for k, e := range v {
			n += stringSize(k) + valueSize(t, e)
		}
		return n
	default:
		t.Fatalf("no size rule for %T", v)
		return 0
	}
}

func docSize(t *testing.T, snap *firestore.DocumentSnapshot) int {
	name := 16 + stringSize(snap.Ref.Parent.ID) + stringSize(snap.Ref.ID)
	return name + valueSize(t, snap.Data()) + 32
}

// TestMaximalDocumentsFitWithRoom measures, by Firestore's own size rules,
// the stored operation and claim of ledgertest.MaximalOperation (every bound
// the door keeps at its maximum): each must stay under half of the 1 MiB
// limit, so the bounds can never make a commit fail.
func TestMaximalDocumentsFitWithRoom(t *testing.T) {
	c, _ := emutest.Firestore(t)
	s := New(c, nil)
	ctx := t.Context()
	op, claim := ledgertest.MaximalOperation("h1", time.Now().Add(time.Minute))
	if _, _, err := s.CommitOperation(ctx, op, claim); err != nil {
		t.Fatalf("commit: %v", err)
	}
	for _, ref := range []*firestore.DocumentRef{s.op(op.ID), s.claim(op.ID)} {
		snap, err := ref.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		size := docSize(t, snap)
		t.Logf("%s document: %d bytes (%.0f%% of 1 MiB)", ref.Parent.ID, size, float64(size)*100/(1<<20))
		if size > 1<<19 {
			t.Errorf("%s document is %d bytes: over half of Firestore's 1 MiB limit", ref.Parent.ID, size)
		}
	}
}

// TestReadsDocumentsWrittenBefore: operations written while user metadata
// and output were Firestore maps read back as the same values a JSON string
// gives, and are rewritten as JSON strings.
func TestReadsDocumentsWrittenBefore(t *testing.T) {
	c, _ := emutest.Firestore(t)
	s := New(c, nil)
	ctx := t.Context()
	op := ledgertest.Op("old")
	op.UserMetadata = map[string]any{"job": "j1", "n": 3, "tags": []any{"a", "b"}, "inner": map[string]any{"x": 1.5}}
	op.Output = map[string]any{"video_uris": []string{"gs://v/1"}, "count": 2}
	d, err := toOpDoc(op, 1)
	if err != nil {
		t.Fatal(err)
	}
	d.UserMetadata, d.Output = op.UserMetadata, op.Output // the old shape: Firestore maps
	if _, err := s.op("old").Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	if snap, _ := s.op("old").Get(ctx); fmt.Sprintf("%T", snap.Data()["user_metadata"]) != "map[string]interface {}" {
		t.Fatalf("the test did not write the old shape: %T", snap.Data()["user_metadata"])
	}
	got, err := s.GetOperation(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.UserMetadata, ledgertest.Normalized(op.UserMetadata)) || !reflect.DeepEqual(got.Output, ledgertest.Normalized(op.Output)) {
		t.Fatalf("old document read as metadata %#v output %#v", got.UserMetadata, got.Output)
	}
	got.Checks++
	if _, _, err := s.CommitOperation(ctx, got, nil); err != nil {
		t.Fatal(err)
	}
	snap, err := s.op("old").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := snap.Data()["user_metadata"].(string); !ok || !strings.Contains(m, `"job":"j1"`) {
		t.Fatalf("rewritten user_metadata = %#v, want a JSON string", snap.Data()["user_metadata"])
	}
	again, err := s.GetOperation(ctx, "old")
	if err != nil || !reflect.DeepEqual(again.UserMetadata, got.UserMetadata) || !reflect.DeepEqual(again.Output, got.Output) {
		t.Fatalf("after the rewrite: %#v %#v %v", again.UserMetadata, again.Output, err)
	}
}

// TestReadsClaimsWrittenBefore: a claim written before claims kept a
// version reads its attempts as its version (what it reported then), and
// its next write counts on from there, as ledger.Revision says.
func TestReadsClaimsWrittenBefore(t *testing.T) {
	c, _ := emutest.Firestore(t)
	s := New(c, nil)
	ctx := t.Context()
	op := ledgertest.Op("oldc")
	op.State, op.NextCheckAt = "SUCCEEDED", time.Time{}
	claim := ledgertest.Claim("oldc", "h1", time.Unix(0, 0))
	claim.Attempts = 2
	if _, _, err := s.CommitOperation(ctx, op, claim); err != nil {
		t.Fatal(err)
	}
	// The old shape: no version field.
	if _, err := s.claim("oldc").Update(ctx, []firestore.Update{{Path: "version", Value: firestore.Delete}}); err != nil {
		t.Fatal(err)
	}
	read, err := s.GetClaim(ctx, "oldc")
	if err != nil {
		t.Fatal(err)
	}
	if read.Rev.Version != 2 {
		t.Fatalf("old claim read at version %d, want its attempts (2)", read.Rev.Version)
	}
	now := time.Now()
	lease, err := s.SeizeClaim(ctx, read, "h2", now.Add(time.Minute), now.Add(time.Hour), now)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetClaim(ctx, "oldc"); err != nil || got.Rev.Version != 3 || lease.Rev.Version != 3 || got.Attempts != 3 {
		t.Fatalf("after a seize: claim %+v (%v), lease %+v; want version 3", got.Rev, err, lease.Rev)
	}
}

// TestStuckScanAdoptsDocumentsWrittenBefore: an operation written before
// stuck_from existed is not in the stuck scan (a range on that field) until
// its next write; its next check is one (ScheduleCheck writes the key), and
// every pending operation is checked at least hourly.
func TestStuckScanAdoptsDocumentsWrittenBefore(t *testing.T) {
	c, _ := emutest.Firestore(t)
	s := New(c, nil)
	ctx := t.Context()
	op := ledgertest.Op("before-stuck-key")
	d, err := toOpDoc(op, 1)
	if err != nil {
		t.Fatal(err)
	}
	d.StuckFrom = nil // the shape written before the field
	if _, err := s.op(op.ID).Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	cutoff := op.SubmittedAt.Add(time.Hour)
	if got, err := s.StuckOperations(ctx, shard.All(), cutoff, 10); err != nil || len(got) != 0 {
		t.Fatalf("stuck scan before any write: %v, %v; the test did not write the old shape", got, err)
	}
	read, err := s.GetOperation(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ScheduleCheck(ctx, read, cutoff, "ok", cutoff); err != nil {
		t.Fatal(err)
	}
	got, err := s.StuckOperations(ctx, shard.All(), cutoff, 10)
	if err != nil || len(got) != 1 || got[0].ID != op.ID || !got[0].StuckFrom.Equal(op.SubmittedAt) {
		t.Fatalf("stuck scan after its next check: %v, %v; want it, keyed at its submission", got, err)
	}
}
