package fsledger

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lrosink/lrosink/internal/deliverylog"
	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/ledger/claims"
	"github.com/lrosink/lrosink/internal/ledger/claims/claimstest"
	"github.com/lrosink/lrosink/internal/ledger/ledgertest"
	"github.com/lrosink/lrosink/internal/shard"
)

func TestConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledger.Ledger {
		c, _ := emutest.Firestore(t)
		return New(c, nil)
	})
}

// TestProtocol runs the claim protocol's suite on the emulator: an
// integration test of the protocol on the store whose fence is Stamp.
func TestProtocol(t *testing.T) {
	claimstest.Run(t, func(t *testing.T) ledger.Ledger {
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
	if _, _, err := claims.New(s).CommitOperation(ctx, op, claim); err != nil {
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
	if _, _, err := claims.New(s).CommitOperation(ctx, got, nil); err != nil {
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
	if _, _, err := claims.New(s).CommitOperation(ctx, op, claim); err != nil {
		t.Fatal(err)
	}
	// The old shape: no version field, after a second attempt (the
	// protocol creates claims at their first).
	if _, err := s.claim("oldc").Update(ctx, []firestore.Update{{Path: "version", Value: firestore.Delete}, {Path: "attempts", Value: 2}}); err != nil {
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
	lease, err := claims.New(s).SeizeClaim(ctx, read, "h2", now.Add(time.Minute), now.Add(time.Hour), now)
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
	if _, err := claims.New(s).ScheduleCheck(ctx, read, cutoff, "ok", cutoff); err != nil {
		t.Fatal(err)
	}
	got, err := s.StuckOperations(ctx, shard.All(), cutoff, 10)
	if err != nil || len(got) != 1 || got[0].ID != op.ID || !got[0].StuckFrom.Equal(op.SubmittedAt) {
		t.Fatalf("stuck scan after its next check: %v, %v; want it, keyed at its submission", got, err)
	}
}

// TestBackfillBuckets: pending documents written before the bucket field
// are invisible to a pass over a range of buckets until BackfillBuckets
// writes the field (fenced, version bumped); a second run writes nothing,
// and settled documents are not touched.
func TestBackfillBuckets(t *testing.T) {
	c, _ := emutest.Firestore(t)
	s := New(c, nil)
	ctx := t.Context()
	var ids []string
	for i := range 5 {
		op := ledgertest.Op(fmt.Sprintf("before-bucket-%d", i))
		op.NextCheckAt = op.SubmittedAt
		d, err := toOpDoc(op, 1)
		if err != nil {
			t.Fatal(err)
		}
		d.Bucket = nil // the shape written before the field
		if _, err := s.op(op.ID).Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, op.ID)
	}
	settled := ledgertest.Op("settled-before-bucket")
	settled.State, settled.NextCheckAt = "SUCCEEDED", time.Time{}
	d, err := toOpDoc(settled, 1)
	if err != nil {
		t.Fatal(err)
	}
	d.Bucket, d.PendingSince = nil, nil
	if _, err := s.op(settled.ID).Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	due := func() int {
		n := 0
		for _, id := range ids {
			b := shard.Of(id)
			got, err := s.DueOperations(ctx, shard.Range{Lo: b, Hi: b + 1}, time.Now(), ledger.DueCursor{}, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range got {
				if o.ID == id {
					n++
				}
			}
		}
		return n
	}
	if n := due(); n != 0 {
		t.Fatalf("%d documents without a bucket found by a ranged query: the test did not write the old shape", n)
	}
	res, err := s.BackfillBuckets(ctx, 2) // pages of 2: the cursor is exercised
	if err != nil || res.Scanned != 5 || res.Written != 5 {
		t.Fatalf("BackfillBuckets = %+v, %v; want 5 scanned, 5 written", res, err)
	}
	if n := due(); n != 5 {
		t.Fatalf("after the backfill %d of 5 found by their bucket's range", n)
	}
	if op, err := s.GetOperation(ctx, ids[0]); err != nil || op.Rev.Version != 2 {
		t.Fatalf("after the backfill version %d, %v; want 2 (a write like any other)", op.Rev.Version, err)
	}
	if res, err := s.BackfillBuckets(ctx, 2); err != nil || res.Written != 0 || res.Scanned != 5 {
		t.Fatalf("second BackfillBuckets = %+v, %v; want nothing written", res, err)
	}
	if snap, err := s.op(settled.ID).Get(ctx); err != nil {
		t.Fatal(err)
	} else if _, err := snap.DataAt("bucket"); err == nil {
		t.Fatal("the settled document got a bucket: the backfill is for pending ones")
	}
}

// TestRetentionRule: the port's retention rule, on the stored expire_at
// the TTL policy reads (the emulator runs no TTL policy): absent while the
// message is owed, settled_at + retention once DONE.
func TestRetentionRule(t *testing.T) {
	ledgertest.RunRetention(t, func(t *testing.T) ledger.Ledger {
		c, _ := emutest.Firestore(t)
		return New(c, nil).WithRetention(ledgertest.Retention)
	}, func(t *testing.T, s ledger.Ledger, id string, now time.Time) bool {
		t.Helper()
		snap, err := s.(*Store).op(id).Get(t.Context())
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		at, ok := snap.Data()["expire_at"].(time.Time)
		return ok && !at.After(now)
	})
}

// TestRetentionBeyondClaimTTL: with LROSINK_RETENTION=400d a published
// operation's expire_at is its settlement plus 400 days, whatever its
// claim's (30 days). The TTL policies on operations and claims are played
// from the stored expire_at.
func TestRetentionBeyondClaimTTL(t *testing.T) {
	ledgertest.RunRetentionBeyondClaimTTL(t, func(t *testing.T) ledger.Ledger {
		c, _ := emutest.Firestore(t)
		return New(c, nil).WithRetention(ledgertest.LongRetention)
	}, func(t *testing.T, s ledger.Ledger, now time.Time) {
		t.Helper()
		playTTL(t, s.(*Store).client, now, Operations, Claims)
	})
}

// playTTL deletes, in each collection, the documents whose expire_at is
// at or before now: what its TTL policy deletes (some time) after then.
func playTTL(t *testing.T, client *firestore.Client, now time.Time, collections ...string) {
	t.Helper()
	for _, coll := range collections {
		snaps, err := client.Collection(coll).Where("expire_at", "<=", now).Documents(t.Context()).GetAll()
		if err != nil {
			t.Fatalf("expired %s: %v", coll, err)
		}
		for _, snap := range snaps {
			if _, err := snap.Ref.Delete(t.Context()); err != nil {
				t.Fatalf("delete %s: %v", snap.Ref.Path, err)
			}
		}
	}
}

// TestDeliveryExpiryKeepsUp: under sustained appends every log's expire_at
// is its newest entry's time plus the TTL, so the TTL policy on
// deliveries.expire_at (played here: the emulator runs none) deletes every
// log with no entry within the TTL, and a log still written drops its
// older entries at each append (deliverylog.Merge). What the test cannot
// show is the policy itself: that it is enabled (terraform, deploy_test)
// and how soon Firestore deletes after expire_at (typically within a day;
// readers hide expired entries meanwhile, deliverylog.Live).
func TestDeliveryExpiryKeepsUp(t *testing.T) {
	ledgertest.RunDeliveryExpiry(t, func(t *testing.T) ledger.Ledger {
		c, _ := emutest.Firestore(t)
		return New(c, nil)
	}, func(t *testing.T, ds deliverylog.Store, opID string, now time.Time) []deliverylog.Entry {
		t.Helper()
		s := ds.(*Store)
		snap, err := s.client.Collection(Deliveries).Doc(opID).Get(t.Context())
		if status.Code(err) == codes.NotFound {
			return nil
		}
		if err != nil {
			t.Fatalf("get %s's log: %v", opID, err)
		}
		// Without expire_at the policy never deletes it: it is held.
		if at, ok := snap.Data()["expire_at"].(time.Time); ok && !at.After(now) {
			return nil // the TTL policy's to delete
		}
		return ledgertest.Listed(t, s, opID, now)
	})
}

// TestIntentRetention: a bound intent's expire_at is its binding plus the
// retention plus ledger.IntentKeep, and an unbound one has none; the TTL
// policy on intents.expire_at is played from the stored field.
func TestIntentRetention(t *testing.T) {
	ledgertest.RunIntentRetention(t, func(t *testing.T) ledger.Ledger {
		c, _ := emutest.Firestore(t)
		return New(c, nil).WithRetention(ledgertest.LongRetention)
	}, func(t *testing.T, s ledger.Ledger, now time.Time) {
		t.Helper()
		playTTL(t, s.(*Store).client, now, Intents)
	})
}
