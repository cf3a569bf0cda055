package console

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lrosink/lrosink/internal/humantime"
	"github.com/lrosink/lrosink/internal/ledger"
	"github.com/lrosink/lrosink/internal/opname"
)

// opURL is an operation's one page: its canonical name as the path
// (/ui/operations/batches/batch_123), each segment escaped. An operation
// whose document id is not the name's (none the door writes) keeps the
// id form, so its link still resolves.
func opURL(name, id string) string {
	if did, err := opname.DocID(opname.KeyPrefix + name); err == nil && did == id {
		segs := strings.Split(name, "/")
		for i, s := range segs {
			segs[i] = url.PathEscape(s)
		}
		return Prefix + "operations/" + strings.Join(segs, "/")
	}
	return Prefix + "operations/" + url.PathEscape(id)
}

// maxLookups bounds the reads one operation URL may cost.
const maxLookups = 4

// lookup finds the operation an operation URL names, whatever the
// spelling: any form opname.Normalize accepts (batches/ID,
// models/M/operations/ID, a bare ID with ?kind=), the idempotency key
// (gemini:batches/ID), or the document id, escaped once or twice
// (gemini:batches%2FID, gemini:batches%252FID). ErrNotFound if none is
// in the ledger.
func (c *Console) lookup(r *http.Request, raw string) (ledger.Operation, error) {
	kind, _ := opname.ParseKind(r.URL.Query().Get("kind"))
	var ids []string
	add := func(id string) {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for s, i := raw, 0; i < 2; i++ {
		u, err := url.PathUnescape(s)
		if err != nil {
			break
		}
		if n, err := opname.Normalize(strings.TrimPrefix(u, opname.KeyPrefix), kind); err == nil {
			if id, err := opname.DocID(n.Key()); err == nil {
				add(id)
			}
		}
		add(u)
		if u == s {
			break
		}
		s = u
	}
	for _, id := range ids[:min(len(ids), maxLookups)] {
		op, err := c.cfg.Ledger.GetOperation(r.Context(), id)
		if errors.Is(err, ledger.ErrNotFound) {
			continue
		}
		return op, err
	}
	return ledger.Operation{}, ledger.ErrNotFound
}

// searchPrefixes are the name prefixes a search for q reads: q as typed
// and, when it normalizes, its canonical name (models/M/operations/ID →
// operations/ID); a q without a collection ("batch_12") is looked for in
// each kind's.
func searchPrefixes(q string) []string {
	q = strings.TrimPrefix(q, opname.KeyPrefix)
	out := []string{q}
	if n, err := opname.Normalize(q, opname.KindUnknown); err == nil && n.Canonical != q {
		out = append(out, n.Canonical)
	}
	if !strings.Contains(q, "/") {
		for _, k := range kinds() {
			if n, err := opname.Normalize("x", k); err == nil {
				out = append(out, strings.TrimSuffix(n.Canonical, "x")+q)
			}
		}
	}
	return out
}

// search answers a list page with a name search: the operations whose
// canonical name starts with one of q's prefixes (an exact name is its own
// prefix), exact matches first, then in name order, one page at most,
// kept only if they pass the other filters.
func (c *Console) search(w http.ResponseWriter, r *http.Request, f listForm) {
	exact := ""
	if n, err := opname.Normalize(strings.TrimPrefix(f.Q, opname.KeyPrefix), opname.KindUnknown); err == nil {
		exact = n.Canonical
	}
	seen := map[string]bool{}
	var ops []ledger.Operation
	lf := c.filter(f)
	for _, p := range searchPrefixes(f.Q) {
		found, err := c.cfg.Ledger.SearchOperations(r.Context(), p, "", c.cfg.PageSize)
		if errors.Is(err, ledger.ErrBadPrefix) {
			// What was typed, not the store: say so, as for a bad filter.
			c.fail(w, r, http.StatusBadRequest, "Bad search: the name is too long to search", nil)
			return
		}
		if err != nil {
			c.unavailable(w, r, err)
			return
		}
		for _, op := range found {
			if !seen[op.ID] && keep(lf, op) {
				seen[op.ID] = true
				ops = append(ops, op)
			}
		}
	}
	slices.SortFunc(ops, func(a, b ledger.Operation) int {
		ea, eb := a.Name == exact, b.Name == exact
		if ea != eb {
			if ea {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Name, b.Name)
	})
	ops = ops[:min(len(ops), c.cfg.PageSize)]
	c.render(w, r, http.StatusOK, "operations", "Search", listData{Form: f, States: statesOf(), Kinds: kinds(),
		Rows: c.rows(ops), Total: int64(len(ops)), First: 1, Last: len(ops), StuckAfter: c.cfg.StuckAfter, Searched: true})
}

// keep reports whether op passes f (the list filters applied to search
// matches).
func keep(f ledger.Filter, op ledger.Operation) bool {
	switch {
	case f.State != "" && op.State != f.State, f.Kind != "" && op.Kind != f.Kind:
		return false
	case !f.StuckAt.IsZero():
		return !op.State.Terminal() && !op.SubmittedAt.After(f.StuckAt)
	}
	return true
}

// never reports whether t was never observed: absent, or the epoch an
// event without a server time is stored at (it loses every tie).
func never(t time.Time) bool { return t.IsZero() || t.Equal(time.Unix(0, 0)) }

// rel says how far t is from now in words that cannot be misread: "in 5m"
// ahead, "5m overdue" behind; "" when never observed.
func rel(now, t time.Time) string {
	if never(t) {
		return ""
	}
	if d := t.Sub(now); d >= 0 {
		return "in " + humantime.Age(d)
	}
	return humantime.Age(now.Sub(t)) + " overdue"
}

// lastAt is when lrosink last recorded an event of op (applied or
// conflicting): the list's "Last event" column.
func lastAt(op ledger.Operation) time.Time {
	var t time.Time
	for _, h := range op.History {
		t = later(t, h.At)
	}
	for _, h := range op.Conflicts {
		t = later(t, h.At)
	}
	return t
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
