package cache

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/btree"

	"github.com/kubeindex/kubeindex/query"
)

// narrowShare: a question whose selection (namespace, index value, field
// selector, the caller's namespaces) leaves fewer than one object in
// narrowShare is answered from the selected objects, sorted, rather than
// by walking the whole ordered index. A variable for tests only.
var narrowShare = 4

// size is the number of objects the resource holds, from the handlers'
// counts.
func (r *resourceCache) size() int {
	n := int64(0)
	for _, sh := range r.shards {
		n += sh.added.Load() - sh.deleted.Load()
	}
	return int(n)
}

// narrows reports whether f selects through an index or a namespace
// rather than by testing each object.
func (r *resourceCache) narrows(f *filter) bool {
	if f.fn != nil || f.namespace != "" || f.namespaces != nil {
		return true
	}
	if f.fields == nil {
		return false
	}
	_, _, hinted := r.indexHint(f.fields)
	return hinted
}

// asking is one question's test of an entry of an ordered index: its
// selection, then its filter on the values the entry holds (or, for an
// entry that holds none, on the values kept on its object). It reuses
// one record and one row: one goroutine uses it.
type asking struct {
	f     *filter
	sel   bool // f selects by more than the resource
	flt   query.Filter
	comp  *query.Compiled
	at    []int // where comp's keys are among an entry's values
	width int   // values of an entry that holds its keys
	row   []query.Value
	sc    *query.Schema
	now   time.Time
	rec   query.Record
	kept  kept
}

func newAsking(ix *order, f *filter, flt query.Filter, comp *query.Compiled, now time.Time) *asking {
	a := &asking{f: f, flt: flt, comp: comp, sc: ix.schema, now: now, width: ix.width(),
		sel: f.namespace != "" || f.scope != nil || f.selector != nil || f.fields != nil || f.fn != nil}
	if comp != nil {
		a.at = heldPlaces(ix, comp.Keys())
		a.row = make([]query.Value, len(a.at))
	}
	return a
}

// again is a test of the same question for another goroutine.
func (a *asking) again() *asking {
	b := &asking{f: a.f, sel: a.sel, flt: a.flt, comp: a.comp, at: a.at, width: a.width, sc: a.sc, now: a.now}
	if a.row != nil {
		b.row = make([]query.Value, len(a.row))
	}
	return b
}

func (a *asking) match(e orderEntry) bool {
	o := e.o
	if a.sel && (!a.f.selects(o) || !a.f.hasIndexValue(o)) {
		return false
	}
	if len(a.flt) == 0 {
		return true
	}
	if len(e.vals()) == a.width {
		for i, at := range a.at {
			a.row[i] = e.vals()[at]
		}
		return a.comp.MatchRow(a.row)
	}
	a.kept = kept{o: o, sc: a.sc, now: a.now}
	a.sc.Fill(&a.rec, o.namespace, o.name, o.recordRaw(), a.now, &a.kept)
	return a.flt.Match(&a.rec)
}

// answerOrdered answers a first page, or a page after another process's
// token, by walking the ordered index of q's sort: no sort, and a page
// costs the same whatever its offset. ok is false when the question is
// better answered from its selection, whose objects are then returned
// (nil: not gathered yet).
func (c *Cache) answerOrdered(r *resourceCache, res ListResult, f *filter, q ListQuery, tok continueToken) (_ ListResult, items []*Object, ok bool, _ error) {
	a := q.Ask
	comp := a.Filter.Compile()
	held := heldKeys(comp, nil)
	if !indexable(a.Sort, a.Schema) || !holdable(held, a.Schema) {
		return res, nil, false, nil
	}
	total := r.size()
	if r.narrows(f) {
		items = r.gather(f)
		if len(items)*narrowShare < total {
			return res, items, false, nil
		}
	}
	release, err := c.asks.take(r.orders.cost(total, a.Filter, a.Sort, held, a.Schema))
	if err != nil {
		return res, nil, true, err
	}
	defer release()
	w, _ := r.orders.index(r, a.Sort, held, a.Schema)
	ix := w.ix
	ask := newAsking(ix, f, a.Filter, comp, a.Now)
	if tok.After == "" {
		p := w.passOver(passKey(q), ask, a.Offset)
		page := p.page(ask, a.Offset, q.Limit)
		res.Total = p.total
		pos := min(a.Offset, p.total) + len(page)
		more, walk := p.total-pos, ""
		if more > 0 {
			walk = c.walks.keepOrdered(res.Resource.Name, a.SortText, askedBy(q), &orderedWalk{snap: p.snap, ord: w, f: f, flt: a.Filter, comp: comp, now: a.Now, total: p.total})
		}
		return orderedPage(res, page, len(a.Sort), more, pos, a.SortText, walk), nil, true, nil
	}
	// A token of another process (or of a walk forgotten): a pass
	// counting the matches before its place.
	snap := ix.snapshot()
	pivot := pivotEntry(tok)
	var page []orderEntry
	before, skipped, more, matches := 0, 0, 0, 0
	w.scan(snap, nil, func(e orderEntry) bool {
		if !ask.match(e) {
			return true
		}
		matches++
		switch {
		case !w.less(pivot, e):
			before++
		case skipped < a.Offset:
			skipped++
		case q.Limit == 0 || len(page) < q.Limit:
			page = append(page, e)
		default:
			more++
		}
		return true
	})
	res.Total = matches
	pos := before + skipped + len(page)
	walk := ""
	if more > 0 {
		walk = c.walks.keepOrdered(res.Resource.Name, a.SortText, askedBy(q), &orderedWalk{snap: snap, ord: w, f: f, flt: a.Filter, comp: comp, now: a.Now, total: matches})
	}
	return orderedPage(res, page, len(a.Sort), more, pos, a.SortText, walk), nil, true, nil
}

// pivotEntry is the place a continue token resumes after.
func pivotEntry(tok continueToken) orderEntry {
	ns, name, ok := strings.Cut(tok.After, "/")
	if !ok {
		ns, name = "", tok.After
	}
	return entryOf(&Object{namespace: ns, name: name}, tok.Values)
}

// orderedPage is a page of entries, more matches following it, with a
// continue token into walk when there are; pos is the position after it
// among the matches.
func orderedPage(res ListResult, page []orderEntry, nsort, more, pos int, sort, walk string) ListResult {
	res.Items, res.Values = make([]*Object, len(page)), make([][]query.Value, len(page))
	for i, e := range page {
		res.Items[i], res.Values[i] = e.o, e.vals()[:nsort:nsort]
	}
	if more > 0 && len(page) > 0 {
		last := page[len(page)-1]
		res.Remaining = more
		res.Continue = encodeToken(continueToken{Resource: res.Resource.Name, After: last.o.Key(), Asked: true, Sort: sort,
			Values: last.vals()[:nsort], Walk: walk, Pos: pos})
	}
	res.walk, res.pos = walk, pos
	return res
}

// orderedWalk is a question's answer kept as the snapshot of its ordered
// index at the first page, and the test of its matches, as they were
// then (the first page's filter and moment): its pages are the snapshot's
// matches after the token's place.
type orderedWalk struct {
	snap  *btree.BTreeG[orderEntry]
	ord   ordering // its order and held keys; its live tree is not read
	f     *filter
	flt   query.Filter
	comp  *query.Compiled
	now   time.Time
	total int
}

// page is the walk's next page after tok's place.
func (w *orderedWalk) page(res ListResult, tok continueToken, limit int, sort, ref string) (ListResult, error) {
	if tok.Pos < 0 || tok.Pos > w.total {
		return res, fmt.Errorf("%w: continue token is malformed; start the list again without it", ErrInvalid)
	}
	ask := newAsking(w.ord.ix, w.f, w.flt, w.comp, w.now)
	var from *orderEntry // nil: before the walk's first match
	if !tok.atStart() {
		pivot := pivotEntry(tok)
		from = &pivot
	}
	var page []orderEntry
	w.ord.scan(w.snap, from, func(e orderEntry) bool {
		if from != nil && !w.ord.less(*from, e) || !ask.match(e) {
			return true
		}
		page = append(page, e)
		return limit == 0 || len(page) < limit
	})
	res.Total = w.total
	more := max(0, w.total-tok.Pos-len(page))
	return orderedPage(res, page, len(w.ord.keys), more, tok.Pos+len(page), sort, ref), nil
}

// countOrdered counts what a question selects by walking the ordered
// index sorted by its group keys that holds its filter's keys: equal
// groups come in runs, counted without a lookup per object. ok is false
// when the selection is better counted from its objects, then returned
// (nil: not gathered yet).
func (c *Cache) countOrdered(r *resourceCache, f *filter, q ListQuery, flt query.Filter, sc *query.Schema, now time.Time, groupBy []query.Key) (total int, groups []query.Group, items []*Object, ok bool, _ error) {
	comp := flt.Compile()
	held := heldKeys(comp, nil)
	keys := make([]query.SortKey, len(groupBy))
	names := make([]string, len(groupBy))
	for i, k := range groupBy {
		keys[i], names[i] = query.SortKey{Key: k}, k.String()
	}
	text := strings.Join(names, ",")
	if !indexable(keys, sc) || !holdable(held, sc) {
		return 0, nil, nil, false, nil
	}
	size := r.size()
	if r.narrows(f) {
		items = r.gather(f)
		if len(items)*narrowShare < size {
			return 0, nil, items, false, nil
		}
	}
	release, err := c.asks.take(r.orders.cost(size, flt, keys, held, sc))
	if err != nil {
		return 0, nil, nil, true, err
	}
	defer release()
	w, _ := r.orders.index(r, keys, held, sc)
	total, groups = w.ix.countPass(passKey(q)+"\x00groupBy\x00"+text, newAsking(w.ix, f, flt, comp, now), groupBy)
	return total, groups, nil, true, nil
}

// cost is what a question walking an ordered index reads, in the
// budget's unit: a value per filter term per object, the values being
// held by the index; and, when the index is yet to be built, its keys
// read from every object (a column rendered, renderCost, unless kept).
func (os *orders) cost(objects int, flt query.Filter, keys []query.SortKey, held []query.Key, sc *query.Schema) int {
	cost := objects * max(1, flt.Terms())
	if _, text, _ := canonicalSort(keys); !os.has(text, held, sc) {
		cells := query.NeedsCells(keys) || slices.ContainsFunc(held, query.Key.NeedsCells)
		cost += objects * (len(keys) + len(held) + renderCost(cells))
	}
	return cost
}
