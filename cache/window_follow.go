package cache

import (
	"fmt"
	"slices"
	"time"

	"github.com/tidwall/btree"
)

// A view over most of a resource follows the ordered index of its sort
// instead of holding its matches (its windows' counts are kept apart,
// window_counts.go): the index is kept by
// the resource's one handler, and each publish takes its copy-on-write
// snapshot (BTreeG.Copy, O(1)) with the question's remembered pass over
// it (order_memo.go: its total and marks, kept current by the handler as
// a list's are), under the index's one lock. A window's page is walked
// from the mark before its offset in that snapshot. So a view opens in
// the time of one pass over the index's entries (or none, when the
// question was asked before) instead of copying every match into a tree
// and a map of its own, and it holds no rows: what a click on a column
// header asks costs the rows shown, not the resource.
//
// Invariant (as for a view holding its rows): a publish shows the index
// as it was when the snapshot was taken, which holds every event the
// view's subscription has delivered (the handler applies an event to the
// indexes before the broker has it), and the total and marks of the pass
// as of that snapshot. Held by TestWindowsAgainstAModel and the passes'
// own checks (order.check).

// viewFollow is how a following view reads its index.
type viewFollow struct {
	w   ordering
	key string  // the view's pass over the index
	ask *asking // makes the pass; the view's goroutine only
	// pageAsk tests entries for the windows' pages, under view.smu.
	pageAsk *asking
}

// followed is an index as one publish made it visible: its snapshot, the
// pass's total and marks as of it.
type followed struct {
	w     ordering
	snap  *btree.BTreeG[orderEntry]
	total int
	marks []mark
}

// now is the index and the view's pass as they are: the pass remembered,
// or one made over a snapshot and remembered (kept current after). An
// index no longer kept by the handler can no longer be followed.
func (f *viewFollow) now(r *resourceCache) (followed, error) {
	ix := f.w.ix
	ix.mu.Lock()
	snap := ix.tree.Copy()
	if p := ix.passes.find(f.key); p != nil {
		fz := followed{w: f.w, snap: snap, total: p.total, marks: slices.Clone(p.marks)}
		ix.mu.Unlock()
		return fz, f.held(r)
	}
	p := &pass{key: f.key, ask: f.ask.again(), compare: f.w.compare, held: true}
	ix.passes.begin(p)
	ix.mu.Unlock()
	f.w.makePass(snap, p, f.ask)
	fz := followed{w: f.w, snap: snap, total: p.total, marks: slices.Clone(p.marks)}
	ix.mu.Lock()
	ix.passes.finish(p)
	ix.mu.Unlock()
	return fz, f.held(r)
}

// forget drops the view's pass, once the view ends.
func (f *viewFollow) forget() {
	f.w.ix.mu.Lock()
	defer f.w.ix.mu.Unlock()
	f.w.ix.passes.forget(f.key)
}

// held: the index is still kept, so a snapshot taken before this call
// has every event delivered before it (a dropped index is never kept
// again).
func (f *viewFollow) held(r *resourceCache) error {
	if !r.orders.holds(f.w.ix) {
		return fmt.Errorf("the ordered index of its sort was dropped: ask again")
	}
	return nil
}

// page is at most limit matches after the first offset.
func (fz *followed) page(ask *asking, offset, limit int) []orderEntry {
	p := pass{total: fz.total, marks: fz.marks}
	return p.view(fz.w, fz.snap, offset).page(ask, offset, limit)
}

// followedPage is page as rows: the rows of the last publish's pages are
// the same rows again (their projections made once, and equal rows equal
// pointers for the windows' differences); v.smu is held.
func (v *view) followedPage(fz *followed, offset, limit int) []*vrow {
	entries := fz.page(v.follow.pageAsk, offset, limit)
	if len(entries) == 0 {
		return nil
	}
	n := len(v.ask.Sort)
	out := make([]*vrow, len(entries))
	for i, e := range entries {
		r := v.known[e.o]
		if r == nil {
			r = &vrow{o: e.o, key: e.o.Key(), vs: e.vals()[:n:n]}
		}
		out[i] = r
	}
	return out
}

// loadFollowing opens a following view on its goroutine: the index of
// its sort (built when there is none), a subscription of its events from
// now on (they say when to publish; the index has them), and its pass
// over the index, made now within the budget's slot. An index dropped
// before the subscription started may lack events: the view then holds
// its matches, read from a snapshot of the objects (subscribe).
func (v *view) loadFollowing() error {
	a := v.ask
	w, _ := v.r.orders.index(v.r, a.Sort, v.indexed.held, a.Schema)
	wq := v.wq
	wq.Snapshot = false
	held := false
	sub, err := v.c.watch(v.r.res.Name, wq, v.wake, func() { held = v.r.orders.holds(w.ix) })
	if err != nil {
		return err
	}
	if !held {
		sub.Close()
		return v.subscribe()
	}
	v.sub = sub
	v.unpin = v.r.orders.pin(w.ix)
	flt, err := v.r.newFilter(wq)
	if err != nil {
		return err
	}
	ask := newAsking(w.ix, flt, a.Filter, v.indexed.comp, a.Now)
	f := &viewFollow{w: w, key: fmt.Sprintf("window %p\x00%s", v, v.key), ask: ask, pageAsk: ask.again()}
	if _, err := f.now(v.r); err != nil {
		return err
	}
	v.mu.Lock()
	v.follow, v.ready = f, true
	v.mu.Unlock()
	v.release()
	return nil
}

// note takes a batch of a following view's events: they are in the
// index already, and make the next publish due; true when the
// subscription ended and must be replaced.
func (v *view) note(batch []change) (resync bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, ch := range batch {
		switch ch.typ {
		case MessageType(Added), MessageType(Modified), MessageType(Deleted):
			if v.pending.IsZero() {
				v.pending = ch.at
				if v.pending.IsZero() {
					v.pending = time.Now()
				}
			}
		case ResyncRequired:
			return true
		}
	}
	return false
}

// resubscribe replaces a following view's subscription that overflowed:
// the events it lost are in the index, and the next publish shows them.
func (v *view) resubscribe() error {
	v.sub.Close()
	wq := v.wq
	wq.Snapshot = false
	sub, err := v.c.Watch(v.r.res.Name, wq, v.wake)
	if err != nil {
		return err
	}
	v.sub = sub
	v.mu.Lock()
	v.pending = time.Now()
	v.mu.Unlock()
	return nil
}
