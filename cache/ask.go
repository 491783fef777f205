package cache

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kubeindex/kubeindex/query"
)

// Ask is the question part of a list (package query): a filter over any
// key, a sort, an offset. Its keys are read from each object the list's
// selection (namespace, labels, fields, index value) leaves, so those
// narrow a question cheaply and its own terms cost a read per object.
type Ask struct {
	Schema *query.Schema
	Filter query.Filter
	Sort   []query.SortKey
	// SortText is the sort parameter as written: a continue token keeps it
	// and is refused under another sort.
	SortText string
	// FilterText is the filter parameters as written, joined: a kept walk
	// is continued only for the same filter.
	FilterText string
	// Offset skips that many matches, on the first page only.
	Offset int
	// Now is the moment ages are measured to (Schema.Record).
	Now time.Time
}

// CountResult is the number of objects a selection and a filter match,
// and their groups by up to two keys.
type CountResult struct {
	Resource  Resource
	Total     int
	Groups    []query.Group
	Freshness Freshness
}

// QueryBudget bounds the values one question may read: objects examined
// times the keys read from each (filter terms, sort and group keys, and
// renderCost when a column is read). A
// question over more is refused (ErrTooCostly) rather than allowed to
// hold a core for long; namespace, labelSelector, fieldSelector and index
// narrow the objects examined before any key is read.
const QueryBudget = 5_000_000

// renderCost is what reading a column costs per object in the budget's
// unit (a key read): the object's Table row is rendered (once per object
// version, then kept: ask_columns.go); counted as if never kept.
func renderCost(columns bool) int {
	if columns {
		return 20
	}
	return 0
}

// costlyQuery is the number of values read above which a question takes
// one of the cache's slots for costly questions (as many as cores); when
// none is free it is refused with ErrBusy, to be retried.
const costlyQuery = 20_000

var (
	// ErrTooCostly: the question reads more than QueryBudget values (429,
	// not worth retrying as it is: narrow it).
	ErrTooCostly = errors.New("query too costly")
	// ErrBusy: every slot for costly questions is taken (429, retry).
	ErrBusy = errors.New("too many costly queries at once")
)

// askSlots are the cache's slots for costly questions (held), and what
// the column warmer, stepping aside while a question holds one
// (stepAside), waits on: eased is rung as a slot is released.
type askSlots struct {
	held  chan struct{}
	eased *nudge
}

func newAskSlots() askSlots {
	return askSlots{held: make(chan struct{}, runtime.GOMAXPROCS(0)), eased: &nudge{}}
}

// inUse is the number of slots held.
func (s askSlots) inUse() int { return len(s.held) }

// take reserves what a question of cost values needs; release gives it
// back.
func (s askSlots) take(cost int) (release func(), err error) {
	if cost > QueryBudget {
		return nil, fmt.Errorf("%w: this query would read about %d values (objects examined × keys read), more than the budget of %d: narrow it with namespace, labelSelector, fieldSelector or index, or use fewer keys",
			ErrTooCostly, cost, QueryBudget)
	}
	if cost <= costlyQuery {
		return func() {}, nil
	}
	select {
	case s.held <- struct{}{}:
		return func() {
			<-s.held
			s.eased.ring()
		}, nil
	default:
		return nil, fmt.Errorf("%w: retry in a moment", ErrBusy)
	}
}

// row is a match and its sort values.
type row struct {
	o  *Object
	vs []query.Value
}

func compareRows(keys []query.SortKey) func(a, b row) int {
	return func(a, b row) int {
		return query.CompareSorted(keys, a.vs, b.vs, a.o.Namespace(), a.o.Name(), b.o.Namespace(), b.o.Name())
	}
}

// answer filters, sorts and pages the selection's items by q.Ask.
func (c *Cache) answer(res ListResult, items []*Object, q ListQuery, tok continueToken) (ListResult, error) {
	a := q.Ask
	release, err := c.asks.take(len(items) * (a.Filter.Terms() + len(a.Sort) + renderCost(a.Filter.NeedsCells() || query.NeedsCells(a.Sort))))
	if err != nil {
		return res, err
	}
	defer release()
	rows := make([]row, 0, len(items))
	for _, o := range items {
		rec := record(o, a.Schema, a.Now)
		if a.Filter.Match(rec) {
			rows = append(rows, row{o, query.SortValues(a.Sort, rec)})
		}
	}
	slices.SortFunc(rows, compareRows(a.Sort))
	res.Total = len(rows)
	start := 0
	if tok.After != "" {
		ns, name, ok := strings.Cut(tok.After, "/")
		if !ok {
			ns, name = "", tok.After
		}
		start = sort.Search(len(rows), func(i int) bool {
			return query.CompareSorted(a.Sort, rows[i].vs, tok.Values, rows[i].o.Namespace(), rows[i].o.Name(), ns, name) > 0
		})
	}
	start = min(start+a.Offset, len(rows))
	walk := ""
	if q.Limit > 0 && len(rows)-start > q.Limit {
		walk = c.walks.keep(res.Resource.Name, a.SortText, askedBy(q), rows)
	}
	return page(res, rows, start, q.Limit, a.SortText, walk), nil
}

// page is the result of rows[start:] limited to limit, with a continue
// token into walk when more follow.
func page(res ListResult, rows []row, start, limit int, sort, walk string) ListResult {
	rows = rows[start:]
	if limit > 0 && len(rows) > limit {
		res.Remaining = len(rows) - limit
		rows = rows[:limit]
		last := rows[len(rows)-1]
		res.Continue = encodeToken(continueToken{Resource: res.Resource.Name, After: last.o.Key(), Asked: true, Sort: sort,
			Values: last.vs, Walk: walk, Pos: start + limit})
	}
	res.Items, res.Values = make([]*Object, len(rows)), make([][]query.Value, len(rows))
	for i, r := range rows {
		res.Items[i], res.Values[i] = r.o, r.vs
	}
	res.walk, res.pos = walk, start+len(rows)
	return res
}

// continueWalk answers the next page of a kept walk; done is false when
// the walk is another process's, to be resumed from the live cache.
func (c *Cache) continueWalk(res ListResult, q ListQuery, tok continueToken) (ListResult, bool, error) {
	wk, ours, err := c.walks.find(tok.Walk)
	if !ours || err != nil {
		return res, ours, err
	}
	if wk.resource != res.Resource.Name || wk.sort != q.Ask.SortText || tok.Pos < 0 || tok.Pos > wk.length() {
		return res, true, fmt.Errorf("%w: continue token is malformed; start the list again without it", ErrInvalid)
	}
	if wk.asked != askedBy(q) {
		return res, true, fmt.Errorf("%w: continue token belongs to another question (its selection, filter, or the namespaces its caller may read); start the list again without it", ErrInvalid)
	}
	if wk.ordered != nil {
		res, err := wk.ordered.page(res, tok, q.Limit, wk.sort, tok.Walk)
		return res, true, err
	}
	res.Total = len(wk.rows)
	return page(res, wk.rows, tok.Pos, q.Limit, wk.sort, tok.Walk), true, nil
}

// checkAsked refuses a continue token made for another order.
func checkAsked(tok continueToken, a *Ask) error {
	if tok.After == "" && !tok.atStart() {
		return nil
	}
	switch {
	case tok.Asked != (a != nil):
		return fmt.Errorf("%w: continue token belongs to a list with another filter, sort or offset; start the list again without it", ErrInvalid)
	case a != nil && tok.Sort != a.SortText:
		return fmt.Errorf("%w: continue token belongs to a list sorted by %q, not %q; start the list again without it", ErrInvalid, tok.Sort, a.SortText)
	case a != nil && !tok.atStart() && len(tok.Values) != len(a.Sort):
		return fmt.Errorf("%w: continue token is malformed; start the list again without it", ErrInvalid)
	case a != nil && a.Offset > 0:
		return fmt.Errorf("%w: offset applies to the first page; a continue token resumes where the last page ended", ErrInvalid)
	}
	return nil
}

// Count counts the objects q selects (its Ask's filter applied; sort,
// offset and paging ignored), grouped by the first values of groupBy.
func (c *Cache) Count(resource string, q ListQuery, groupBy []query.Key) (CountResult, error) {
	q.Limit, q.Continue = 0, ""
	r, res, f, _, err := c.prepare(resource, q)
	out := CountResult{Resource: res.Resource, Freshness: res.Freshness}
	if err != nil {
		return out, err
	}
	var flt query.Filter
	var schema *query.Schema
	now := time.Now()
	if q.Ask != nil {
		flt, schema, now = q.Ask.Filter, q.Ask.Schema, q.Ask.Now
	}
	if schema == nil && len(groupBy) > 0 {
		return out, fmt.Errorf("%w: counts by group need a schema", ErrInvalid)
	}
	var items []*Object
	if schema != nil && (len(flt) > 0 || len(groupBy) > 0) {
		total, groups, narrowed, ok, err := c.countOrdered(r, f, q, flt, schema, now, groupBy)
		if ok {
			out.Total, out.Groups = total, groups
			return out, err
		}
		items = narrowed
	}
	if items == nil {
		items = r.gather(f)
	}
	cells := flt.NeedsCells()
	for _, k := range groupBy {
		cells = cells || k.NeedsCells()
	}
	release, err := c.asks.take(len(items) * (flt.Terms() + len(groupBy) + renderCost(cells)))
	if err != nil {
		return out, err
	}
	defer release()
	counter := query.NewCounter(groupBy)
	for _, o := range items {
		if schema == nil {
			counter.Add(nil)
			continue
		}
		rec := record(o, schema, now)
		if flt.Match(rec) {
			counter.Add(rec)
		}
	}
	out.Total, out.Groups = counter.Total(), counter.Groups()
	return out, nil
}
