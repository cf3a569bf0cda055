package opname

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzNormalize(f *testing.F) {
	for _, tc := range normalizeCases() {
		f.Add(tc.raw, string(tc.hint))
	}
	re := segmentRE()
	f.Fuzz(func(t *testing.T, raw, hint string) {
		// As in FuzzDocID: bound inputs so minimization stays fast; the raw
		// limit is 1,024 bytes and valid hints are short.
		if len(raw) > 1100 || len(hint) > 64 {
			return
		}
		n, err := Normalize(raw, Kind(hint))
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("error %v does not wrap ErrInvalidName", err)
			}
			if n != (Name{}) {
				t.Fatalf("got %+v with an error", n)
			}
			return
		}
		if len(raw) > 1024 || !utf8.ValidString(raw) {
			t.Fatalf("accepted raw input of %d bytes, valid UTF-8 %v", len(raw), utf8.ValidString(raw))
		}
		if hint != "" && Kind(hint) != n.Kind {
			t.Fatalf("hint %q but kind %q", hint, n.Kind)
		}
		if !strings.Contains(raw, n.ID) {
			t.Fatalf("id %q does not come from the input %q", n.ID, raw)
		}
		coll, id, ok := strings.Cut(n.Canonical, "/")
		if !ok || id != n.ID || !re.MatchString(id) {
			t.Fatalf("canonical %q: want collection/ID with ID %q matching the id rule", n.Canonical, n.ID)
		}
		wantKind := map[string]Kind{
			"batches": KindBatch, "batchPredictionJobs": KindBatch,
			"operations": KindVideo, "interactions": KindInteraction,
		}[coll]
		if wantKind == KindUnknown || wantKind != n.Kind {
			t.Fatalf("canonical %q has kind %q", n.Canonical, n.Kind)
		}
		if n.APIName != n.Canonical {
			segs := strings.Split(n.APIName, "/")
			if n.Kind != KindVideo || len(segs) != 4 || segs[0] != "models" || !re.MatchString(segs[1]) ||
				segs[2] != "operations" || segs[3] != n.ID {
				t.Fatalf("APIName %q is neither the canonical name nor models/M/operations/%s", n.APIName, n.ID)
			}
		}
		checkStable(t, n)

		key := n.Key()
		if key != "gemini:"+n.Canonical {
			t.Fatalf("Key() = %q", key)
		}
		docID, err := DocID(key)
		if err != nil {
			t.Fatalf("DocID(%q): %v", key, err)
		}
		if err := validDocID(docID); err != nil {
			t.Fatalf("DocID(%q) = %q: %v", key, docID, err)
		}
		if back, err := KeyFromDocID(docID); err != nil || back != key {
			t.Fatalf("KeyFromDocID(%q) = %q, %v; want %q", docID, back, err, key)
		}
	})
}

func FuzzDocID(f *testing.F) {
	for _, tc := range docIDCases() {
		f.Add(tc.key, tc.want)
	}
	for _, tc := range normalizeCases() {
		f.Add(tc.raw, "gemini:"+tc.want.Canonical)
	}
	// Fixed keys every fuzzed key is compared against, chosen near the
	// special cases where a collision would most likely hide.
	fixed := []string{"gemini:batches/abc", "gemini:batches%2Fabc", ".", "..", "__x__", "%5F_x__", "%2E"}
	fixedIDs := make([]string, len(fixed))
	for i, k := range fixed {
		id, err := DocID(k)
		if err != nil {
			f.Fatalf("DocID(%q): %v", k, err)
		}
		fixedIDs[i] = id
	}

	f.Fuzz(func(t *testing.T, a, b string) {
		// Go minimizes each new interesting input in time quadratic in its
		// size, which stalls the run on multi-kilobyte inputs. Keys just past
		// Firestore's 1,500-byte limit already reach every branch.
		if len(a) > 1600 || len(b) > 1600 {
			return
		}
		check := func(key string) (string, bool) {
			id, err := DocID(key)
			if err != nil {
				if !errors.Is(err, ErrInvalidKey) {
					t.Fatalf("DocID(%q) error %v does not wrap ErrInvalidKey", key, err)
				}
				// Each byte encodes to at most 3, so short valid keys must pass.
				if key != "" && utf8.ValidString(key) && len(key) <= 500 {
					t.Fatalf("DocID(%q) rejected a valid key: %v", key, err)
				}
				return "", false
			}
			if err := validDocID(id); err != nil {
				t.Fatalf("DocID(%q) = %q: %v", key, id, err)
			}
			if back, err := KeyFromDocID(id); err != nil || back != key {
				t.Fatalf("KeyFromDocID(DocID(%q)) = %q, %v", key, back, err)
			}
			for i, fk := range fixed {
				if key != fk && id == fixedIDs[i] {
					t.Fatalf("keys %q and %q share document id %q", key, fk, id)
				}
			}
			return id, true
		}
		idA, okA := check(a)
		idB, okB := check(b)
		if okA && okB && a != b && idA == idB {
			t.Fatalf("keys %q and %q share document id %q", a, b, idA)
		}

		// The other direction: any id that decodes is one DocID produces.
		for _, s := range []string{a, b} {
			key, err := KeyFromDocID(s)
			if err != nil {
				if !errors.Is(err, ErrInvalidKey) {
					t.Fatalf("KeyFromDocID(%q) error %v does not wrap ErrInvalidKey", s, err)
				}
				continue
			}
			if again, err := DocID(key); err != nil || again != s {
				t.Fatalf("DocID(KeyFromDocID(%q)) = %q, %v", s, again, err)
			}
			if err := validDocID(s); err != nil {
				t.Fatalf("KeyFromDocID accepted invalid document id %q: %v", s, err)
			}
		}
	})
}
