package memledger

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lrosink/lrosink/internal/ledger"
)

// storedIntent is an intent as kept: its metadata as JSON text.
type storedIntent struct {
	in   ledger.Intent // Metadata is nil here
	meta []byte
}

func keepIntent(in ledger.Intent, version int64) (storedIntent, error) {
	meta, err := encodeMap("intent metadata", in.Metadata)
	if err != nil {
		return storedIntent{}, err
	}
	in = ledger.StoredIntent(in)
	in.Rev, in.Metadata = ledger.Revision{Version: version}, nil
	return storedIntent{in: in, meta: meta}, nil
}

func (s storedIntent) intent() (ledger.Intent, error) {
	in := s.in
	var err error
	if in.Metadata, err = decodeMap("metadata", s.meta); err != nil {
		return ledger.Intent{}, fmt.Errorf("memledger: intent %s: %w", in.Key, err)
	}
	return in, nil
}

// GetIntent implements ledger.Reads.
func (s *Store) GetIntent(ctx context.Context, key string) (ledger.Intent, error) {
	s.counts.Reads.Add(1)
	if err := s.lock(ctx, "get intent "+key); err != nil {
		return ledger.Intent{}, err
	}
	defer s.mu.Unlock()
	si, ok := s.intents[key]
	if !ok {
		return ledger.Intent{}, fmt.Errorf("memledger: get intent %s: %w", key, ledger.ErrNotFound)
	}
	return si.intent()
}

// unbound lists the unbound intents recorded at or before before, after
// the cursor, in (CreatedAt, Key) order. The caller holds s.mu.
func (s *Store) unbound(before time.Time, after ledger.IntentCursor) []ledger.Intent {
	cursor := ledger.Intent{CreatedAt: after.CreatedAt, Key: after.Key}
	var hits []ledger.Intent
	for _, si := range s.intents {
		if !si.in.Bound() && !si.in.CreatedAt.After(before) && ledger.ByCreated(cursor, si.in) < 0 {
			hits = append(hits, si.in)
		}
	}
	slices.SortFunc(hits, ledger.ByCreated)
	return hits
}

// selectIntents returns copies of up to limit of hits, billed as a query.
func (s *Store) selectIntents(hits []ledger.Intent, limit int) ([]ledger.Intent, error) {
	hits = hits[:min(limit, len(hits))]
	s.counts.Reads.Add(int64(max(1, len(hits))))
	out := make([]ledger.Intent, 0, len(hits))
	for _, h := range hits {
		in, err := s.intents[h.Key].intent()
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

// UnboundIntents implements ledger.Queries.
func (s *Store) UnboundIntents(ctx context.Context, before time.Time, after ledger.IntentCursor, limit int) ([]ledger.Intent, error) {
	if limit <= 0 {
		return nil, nil
	}
	if err := s.lock(ctx, "unbound intents"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return s.selectIntents(s.unbound(before, after), limit)
}

// CountUnboundIntents implements ledger.Queries, billed as a count
// aggregation.
func (s *Store) CountUnboundIntents(ctx context.Context, before time.Time) (int64, error) {
	if err := s.lock(ctx, "count unbound intents"); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	n := int64(len(s.unbound(before, ledger.IntentCursor{})))
	s.counts.Reads.Add(max(1, (n+999)/1000))
	return n, nil
}

// IntentAlertsDue implements ledger.Queries.
func (s *Store) IntentAlertsDue(ctx context.Context, cutoff time.Time, limit int) ([]ledger.Intent, error) {
	if limit <= 0 {
		return nil, nil
	}
	if err := s.lock(ctx, "intent alerts due"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var hits []ledger.Intent
	for _, si := range s.intents {
		if k := si.in.AlertFrom; !k.IsZero() && !k.After(cutoff) {
			hits = append(hits, si.in)
		}
	}
	slices.SortFunc(hits, ledger.ByAlert)
	return s.selectIntents(hits, limit)
}

// pruneIntents deletes up to limit bound intents whose expiry for
// retention (ledger.IntentExpiry) is at or before now. The caller holds
// s.mu.
func (s *Store) pruneIntents(retention time.Duration, now time.Time, limit int) int {
	n := 0
	for key, si := range s.intents {
		if n >= limit {
			break
		}
		if at := ledger.IntentExpiry(si.in, retention); !at.IsZero() && !at.After(now) {
			delete(s.intents, key)
			n++
		}
	}
	return n
}
