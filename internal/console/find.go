package console

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

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

// maxLookups bounds the reads one spelling of an operation URL may cost.
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

// bare finds the operations a bare id (batch_123: no collection, no kind)
// names, one read per kind (kind, when set, is the only one tried): the
// id as a person copies it from Gemini's answer. Zero, one, or, when two
// kinds share the id, more.
func (c *Console) bare(ctx context.Context, id string, kind opname.Kind) ([]ledger.Operation, error) {
	if strings.Contains(id, "/") {
		return nil, nil
	}
	var out []ledger.Operation
	for _, k := range kinds() {
		if kind != opname.KindUnknown && k != kind {
			continue
		}
		n, err := opname.Normalize(id, k)
		if err != nil {
			return nil, nil // not an id at all
		}
		did, err := opname.DocID(n.Key())
		if err != nil {
			return nil, nil
		}
		op, err := c.cfg.Ledger.GetOperation(ctx, did)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			out = append(out, op)
		}
	}
	return out, nil
}

// exact finds the operation a search for q names exactly: a name in any
// spelling lookup accepts, or a bare id that one operation alone has (of
// kind, when the filter sets it). ErrNotFound when q names none, or a bare
// id more than one kind has (the list shows them all).
func (c *Console) exact(r *http.Request, q string, kind opname.Kind) (ledger.Operation, error) {
	name := searchName(q)
	if n, err := opname.Normalize(name, opname.KindUnknown); err == nil {
		id, err := opname.DocID(n.Key())
		if err != nil {
			return ledger.Operation{}, ledger.ErrNotFound
		}
		return c.cfg.Ledger.GetOperation(r.Context(), id)
	}
	ops, err := c.bare(r.Context(), name, kind)
	switch {
	case err != nil:
		return ledger.Operation{}, err
	case len(ops) == 1:
		return ops[0], nil
	}
	return ledger.Operation{}, ledger.ErrNotFound
}

// maxNearest bounds the nearest matches a miss shows, and nearestTries the
// shorter prefixes it tries: a miss costs a few bounded reads.
const (
	maxNearest   = 10
	nearestTries = 4
)

// nearest are the operations whose names come closest to q, a name that
// matched none: those starting with q (in any spelling the search
// accepts), else with q less its last 1, 2, 4, 8 characters, the first
// of these that matches any. At most maxNearest, in name order.
func (c *Console) nearest(ctx context.Context, q string) ([]ledger.Operation, error) {
	q = searchName(q)
	for i, cut := 0, 0; i <= nearestTries && cut < len(q); i, cut = i+1, max(1, 2*cut) {
		var out []ledger.Operation
		for _, p := range searchPrefixes(q[:len(q)-cut]) {
			found, err := c.cfg.Ledger.SearchOperations(ctx, p, "", maxNearest)
			if errors.Is(err, ledger.ErrBadPrefix) {
				continue // too long to search: a shorter one may do
			}
			if err != nil {
				return nil, err
			}
			for _, op := range found {
				if !slices.ContainsFunc(out, func(o ledger.Operation) bool { return o.ID == op.ID }) {
					out = append(out, op)
				}
			}
		}
		if len(out) > 0 {
			slices.SortFunc(out, func(a, b ledger.Operation) int { return cmp.Compare(a.ID, b.ID) })
			return out[:min(len(out), maxNearest)], nil
		}
	}
	return nil, nil
}

// searchPrefixes are the name prefixes a search for q reads: q as typed
// and, when it normalizes, its canonical name (models/M/operations/ID →
// operations/ID); a q without a collection ("batch_12") is looked for in
// each kind's. The idempotency key and the document id, escaped once or
// twice (gemini:batches%2FID, what the operation page shows), stand for
// their name.
func searchPrefixes(q string) []string {
	q = searchName(q)
	out := []string{q}
	if n, err := opname.Normalize(q, opname.KindUnknown); err == nil && n.Canonical != q {
		out = append(out, n.Canonical)
	}
	if !strings.Contains(q, "/") {
		out = append(out, opname.InEveryKind(q)...)
	}
	return out
}

// searchName is q as a name: without the idempotency key's prefix, and
// unescaped (once or twice) when it is a document id.
func searchName(q string) string {
	q = strings.TrimPrefix(q, opname.KeyPrefix)
	for i := 0; i < 2 && strings.Contains(q, "%"); i++ {
		u, err := url.PathUnescape(q)
		if err != nil {
			break
		}
		q = u
	}
	return q
}

// maxSearchExtraPages bounds the pages of names one search reads beyond
// each prefix's first: a filter that keeps few names reads on for more
// matches, but one request stays a few reads (Firestore bills each name).
const maxSearchExtraPages = 3

// prefixScan is how far a search has read one prefix's names.
type prefixScan struct {
	prefix string
	// last is the id of the last name read; done: the prefix's names ran
	// out; kept counts the matches it gave.
	last string
	done bool
	kept int
}

// search answers a list page with a name search: the operations whose
// canonical name starts with one of q's prefixes and pass the other
// filters (an exact name that passes them was redirected to its page
// before: Console.operations), exact match first, then in name
// (document id) order, one page at a time. The filters are applied to the
// names read, so a prefix is read on, page by page, until it gives more
// than a page of matches or its names run out, within maxSearchExtraPages.
// What was not read is never counted: a page shows only the matches below
// the point every prefix still open was read to, and says when more may
// exist; "next »" reads on from there (after=<document id>).
func (c *Console) search(w http.ResponseWriter, r *http.Request, f listForm) {
	exact := ""
	if n, err := opname.Normalize(searchName(f.Q), opname.KindUnknown); err == nil {
		exact = n.Canonical
	}
	lf := c.filter(f)
	var scans []*prefixScan
	for _, p := range searchPrefixes(f.Q) {
		if !slices.ContainsFunc(scans, func(s *prefixScan) bool { return s.prefix == p }) {
			scans = append(scans, &prefixScan{prefix: p, last: f.SearchAfter})
		}
	}
	seen := map[string]bool{}
	var ops []ledger.Operation
	var exactOp *ledger.Operation
	scanned := 0
	read := func(s *prefixScan) error {
		found, err := c.cfg.Ledger.SearchOperations(r.Context(), s.prefix, s.last, c.cfg.PageSize)
		if err != nil {
			return err
		}
		scanned += len(found)
		for _, op := range found {
			if seen[op.ID] {
				continue
			}
			seen[op.ID] = true
			switch {
			case !keep(lf, op):
			case op.Name == exact:
				// First on the first page; a later page has shown it.
				if f.SearchAfter == "" {
					exactOp = &op
				}
			default:
				ops = append(ops, op)
				s.kept++
			}
		}
		if len(found) < c.cfg.PageSize {
			s.done = true
		} else {
			s.last = found[len(found)-1].ID
		}
		return nil
	}
	// Each prefix's first page, then further pages while a prefix is open
	// and has not yet given more than a page.
	var err error
	for _, s := range scans {
		if err = read(s); err != nil {
			break
		}
	}
	for extra := 0; err == nil && extra < maxSearchExtraPages; {
		progressed := false
		for _, s := range scans {
			if s.done || s.kept > c.cfg.PageSize || extra == maxSearchExtraPages {
				continue
			}
			if err = read(s); err != nil {
				break
			}
			extra++
			progressed = true
		}
		if !progressed {
			break
		}
	}
	if errors.Is(err, ledger.ErrBadPrefix) {
		// What was typed, not the store: say so, as for a bad filter.
		c.fail(w, r, http.StatusBadRequest, "Bad search: the name is too long to search", nil)
		return
	}
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	// frontier: every prefix still open was read up to it; past it a
	// match may lie unread, so nothing past it is shown yet.
	frontier := ""
	for _, s := range scans {
		if !s.done && (frontier == "" || s.last < frontier) {
			frontier = s.last
		}
	}
	slices.SortFunc(ops, func(a, b ledger.Operation) int { return cmp.Compare(a.ID, b.ID) })
	if frontier != "" {
		ops = slices.DeleteFunc(ops, func(op ledger.Operation) bool { return op.ID > frontier })
	}
	var shown []ledger.Operation
	if exactOp != nil {
		shown = append(shown, *exactOp)
	}
	room := max(c.cfg.PageSize-len(shown), 1) // a page of 1 still moves on
	d := listData{Form: f, States: statesOf(), Kinds: kinds(), StuckAfter: c.cfg.StuckAfter, Searched: true}
	switch {
	case len(ops) > room:
		d.Next = f.query("after", ops[room-1].ID)
	case frontier != "":
		d.Next = f.query("after", frontier)
	}
	shown = append(shown, ops[:min(len(ops), room)]...)
	if f.SearchAfter != "" {
		d.Reset = f.query()
	}
	matched := len(ops) + len(shown) - min(len(ops), room) // the exact match too
	d.Rows, d.First, d.Last = c.rows(shown), 1, len(shown)
	d.Count = searchCount(f, len(shown), matched, frontier == "", scanned)
	c.render(w, r, http.StatusOK, "operations", "Search", d)
}

// searchCount is a search page's count line, saying only what was
// established: when every prefix's names ran out (complete), matched is
// every match from this page on; otherwise more may exist.
func searchCount(f listForm, shown, matched int, complete bool, scanned int) string {
	q := "“" + f.Q + "”"
	names := func(n int) string {
		if n == 1 {
			return "1 name"
		}
		return thousands(n) + " names"
	}
	more := func(n int) string { return strings.Replace(names(n), " name", " more name", 1) }
	switch {
	case shown == 0 && complete && f.SearchAfter == "":
		return "No name matching " + q
	case shown == 0 && complete:
		return "No more names matching " + q
	case shown == 0:
		return "No match among the " + names(scanned) + " read so far starting with " + q + "; there may be more (next »)"
	case complete && f.SearchAfter == "" && matched == shown:
		return names(shown) + " matching " + q
	case complete && f.SearchAfter == "":
		return "The first " + thousands(shown) + " of " + names(matched) + " matching " + q
	case complete && matched == shown:
		return more(shown) + " matching " + q + ", the last"
	case complete:
		return more(shown) + " matching " + q + ", of " + thousands(matched) + " from here on"
	case f.SearchAfter == "":
		return "The first " + names(shown) + " matching " + q + "; there may be more (next »)"
	default:
		return more(shown) + " matching " + q + "; there may be more (next »)"
	}
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
