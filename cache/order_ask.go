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
	_, _, hinted := r.indexHint(f.fields)
	return f.fields != nil && hinted
}

// asking is one question's test of an object, evaluated on the values
// kept on it. It reuses one record: one goroutine uses it.
type asking struct {
	f    *filter
	flt  query.Filter
	sc   *query.Schema
	now  time.Time
	rec  query.Record
	kept kept
}

func (a *asking) match(o *Object) bool {
	if !a.f.selects(o) || a.f.fn != nil && !slices.Contains(a.f.fn(o.raw), a.f.value) {
		return false
	}
	if len(a.flt) == 0 {
		return true
	}
	a.kept = kept{o: o, sc: a.sc, now: a.now}
	a.sc.Fill(&a.rec, o.namespace, o.name, o.raw, a.now, &a.kept)
	return a.flt.Match(&a.rec)
}

// answerOrdered answers a first page, or a page after another process's
// token, by walking the ordered index of q's sort: no sort, and a page
// costs the same whatever its offset. ok is false when the question is
// better answered from its selection, whose objects are then returned
// (nil: not gathered yet).
func (c *Cache) answerOrdered(r *resourceCache, res ListResult, f *filter, q ListQuery, tok continueToken) (_ ListResult, items []*Object, ok bool, _ error) {
	a := q.Ask
	if !indexable(a.Sort, a.Schema) {
		return res, nil, false, nil
	}
	total := r.size()
	if r.narrows(f) {
		items = r.gather(f)
		if len(items)*narrowShare < total {
			return res, items, false, nil
		}
	}
	release, err := c.asks.take(total * (a.Filter.Terms() + renderCost(a.Filter.NeedsCells())))
	if err != nil {
		return res, nil, true, err
	}
	defer release()
	ix, _ := r.orders.index(r, a.Sort, a.SortText, a.Schema)
	snap := ix.snapshot()
	ask := &asking{f: f, flt: a.Filter, sc: a.Schema, now: a.Now}
	var pivot orderEntry
	if tok.After != "" {
		pivot = pivotEntry(tok)
	}
	var page []orderEntry
	before, skipped, more, matches := 0, 0, 0, 0
	snap.Scan(func(e orderEntry) bool {
		if !ask.match(e.o) {
			return true
		}
		matches++
		switch {
		case tok.After != "" && !ix.less(pivot, e):
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
		walk = c.walks.keepOrdered(res.Resource.Name, a.SortText, askedBy(q), &orderedWalk{snap: snap, less: ix.less, f: f, flt: a.Filter, sc: a.Schema, now: a.Now, total: matches})
	}
	return orderedPage(res, page, more, pos, a.SortText, walk), nil, true, nil
}

// pivotEntry is the place a continue token resumes after.
func pivotEntry(tok continueToken) orderEntry {
	ns, name, ok := strings.Cut(tok.After, "/")
	if !ok {
		ns, name = "", tok.After
	}
	return orderEntry{o: &Object{namespace: ns, name: name}, vs: tok.Values}
}

// orderedPage is a page of entries, more matches following it, with a
// continue token into walk when there are; pos is the position after it
// among the matches.
func orderedPage(res ListResult, page []orderEntry, more, pos int, sort, walk string) ListResult {
	res.Items = make([]*Object, len(page))
	for i, e := range page {
		res.Items[i] = e.o
	}
	if more > 0 && len(page) > 0 {
		last := page[len(page)-1]
		res.Remaining = more
		res.Continue = encodeToken(continueToken{Resource: res.Resource.Name, After: last.o.Key(), Asked: true, Sort: sort,
			Values: last.vs, Walk: walk, Pos: pos})
	}
	return res
}

// orderedWalk is a question's answer kept as the snapshot of its ordered
// index at the first page, and the test of its matches, as they were
// then (the first page's filter and moment): its pages are the snapshot's
// matches after the token's place.
type orderedWalk struct {
	snap  *btree.BTreeG[orderEntry]
	less  func(a, b orderEntry) bool
	f     *filter
	flt   query.Filter
	sc    *query.Schema
	now   time.Time
	total int
}

// page is the walk's next page after tok's place.
func (w *orderedWalk) page(res ListResult, tok continueToken, limit int, sort, ref string) (ListResult, error) {
	if tok.Pos < 0 || tok.Pos > w.total {
		return res, fmt.Errorf("%w: continue token is malformed; start the list again without it", ErrInvalid)
	}
	ask := &asking{f: w.f, flt: w.flt, sc: w.sc, now: w.now}
	pivot := pivotEntry(tok)
	var page []orderEntry
	w.snap.Ascend(pivot, func(e orderEntry) bool {
		if !w.less(pivot, e) || !ask.match(e.o) {
			return true
		}
		page = append(page, e)
		return limit == 0 || len(page) < limit
	})
	res.Total = w.total
	more := max(0, w.total-tok.Pos-len(page))
	return orderedPage(res, page, more, tok.Pos+len(page), sort, ref), nil
}
