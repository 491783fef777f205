package cache

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/btree"

	"github.com/kubeindex/kubeindex/query"
)

// view is one question's matches in order, shared by every window asking
// it: over most of the resource it follows the ordered index of its sort
// (window_follow.go); over a narrow selection it holds its matches, kept
// current by a subscription of the resource's broker (with its
// snapshot: no gap, no overlap). Its goroutine (run) applies the events
// as they come and publishes the result at most rate times a second,
// waking the windows; they read it under the read lock. A view counts
// nothing: counts are the windows' own, shared (window_counts.go).
//
// Invariant: after the events up to a point are applied, rows holds
// exactly the objects the selection and filter match, ordered by
// CompareSorted (held by TestWindowsAgainstAModel).
type view struct {
	c     *Cache
	r     *resourceCache
	key   string
	wq    WatchQuery
	ask   *Ask
	every time.Duration
	size  int    // the rows selected when it was built (the budget's)
	slot  func() // gives back the budget's slot once built
	wake  chan struct{}
	sub   Subscription // the view goroutine's
	cells bool         // reading its keys renders rows
	// indexed, when not nil: the view follows the ordered index of its
	// sort (loadFollowing) rather than holding its matches.
	indexed *viewIndex
	// follow, when not nil, is the index a following view reads instead
	// of holding its rows (window_follow.go); set with ready.
	follow *viewFollow
	// unpin lets the index the view was loaded from be dropped as idle
	// again, once the view ends (orders.pin); nil: none pinned.
	unpin  func()
	failed atomic.Pointer[string]

	mu       sync.RWMutex
	live     viewState
	building *viewState // a snapshot being read (after a resync); nil otherwise
	ready    bool
	pub      uint64 // publishes so far
	// What the last publish made visible: the windows read only this, so
	// every window reads the same rows and total for one publish (and
	// those reading the same page share its rows and its changes).
	pubRows   *btree.BTreeG[*vrow] // a copy-on-write copy of live.rows
	pubFollow *followed            // a following view's, instead of pubRows
	pubTotal  int
	pubCounts map[*counts][]byte // the counts its windows ask, as published then
	// The pages and changes made for the current publish, shared.
	smu     sync.Mutex
	shared  uint64 // the publish they are of
	pages   map[pageKey][]*vrow
	changes map[changesKey][]byte
	known   map[*Object]*vrow // a following view's rows of the last publish's pages
	// pubAt[n%len] is when the first event a publish n carries reached
	// the broker (zero: none timed).
	pubAt   [64]time.Time
	pending time.Time // the first event applied since the last publish
	seen    uint64    // the broker's events read (event.seq+1 of the last); the goroutine's

	// Guarded by the windows' lock.
	windows   int
	members   []*Window
	idleSince time.Time
}

// viewState is the rows a view holds.
type viewState struct {
	rows  *btree.BTreeG[*vrow]
	byKey map[string]*vrow
}

// vrow is one match, immutable: an update is a new vrow.
type vrow struct {
	o    *Object
	key  string
	vs   []query.Value
	proj atomic.Pointer[rowBytes] // the last projection made of it
}

type rowBytes struct {
	fields string
	b      []byte
}

type pageKey struct{ offset, limit int }

// viewsFromIndexes: views over most of a resource are loaded from an
// ordered index. A variable for tests only.
var viewsFromIndexes = true

// countHold, when set, is called before a window's counts are made
// (counts.open). For tests only.
var countHold atomic.Pointer[func()]

// viewIndex is the ordered index a view follows: its filter compiled
// and the keys the index holds (heldKeys).
type viewIndex struct {
	comp *query.Compiled
	held []query.Key
}

// changesKey is a difference every window that last sent the same page
// at the same publish shares (all but its resume token).
type changesKey struct {
	from          uint64 // the publish of the rows last sent
	offset, limit int
	fields, group string
}

func (c *Cache) newView(r *resourceCache, key string, q *WindowQuery) (*view, error) {
	_, _, sel, _, err := c.prepare(r.res.Name, ListQuery{Namespace: q.Namespace, Namespaces: q.Namespaces,
		LabelSelector: q.LabelSelector, Fields: q.Fields})
	if err != nil {
		return nil, err
	}
	a := q.Ask
	comp := a.Filter.Compile()
	held := heldKeys(comp, nil)
	fromIndex := viewsFromIndexes && indexable(a.Sort, a.Schema) && holdable(held, a.Schema)
	// The selected objects are gathered when the selection narrows (a
	// namespace, an index value), or when the view is read from them;
	// otherwise it selects most of the resource, as many as it holds.
	size, items := r.size(), []*Object(nil)
	if !fromIndex || r.narrows(sel) {
		items = r.gather(sel)
		size = len(items)
	}
	cells := a.Filter.NeedsCells() || query.NeedsCells(a.Sort)
	cost := size * (a.Filter.Terms() + len(a.Sort) + renderCost(cells))
	var indexed *viewIndex
	// A question over most of the resource follows the ordered index of
	// its sort, as a question's page walks it (answerOrdered); a narrow
	// one is read from its own objects.
	if fromIndex && size*narrowShare >= r.size() {
		indexed = &viewIndex{comp: comp, held: held}
		cost = r.orders.cost(r.size(), a.Filter, a.Sort, held, a.Schema)
	}
	slot, err := c.asks.take(cost)
	if err != nil {
		return nil, err
	}
	v := &view{c: c, r: r, key: key, ask: a, every: time.Duration(float64(time.Second) / q.Rate), size: size,
		slot: slot, wake: make(chan struct{}, 1), cells: cells, indexed: indexed,
		wq: WatchQuery{Namespace: q.Namespace, Namespaces: q.Namespaces, LabelSelector: q.LabelSelector, Fields: q.Fields,
			Snapshot: true, QueueSize: 1 << 16}}
	v.live = v.newState()
	return v, nil
}

// holds is the rows v holds, as MaxViewRows counts them: none when it
// follows an index.
func (v *view) holds() int {
	if v.indexed != nil {
		return 0
	}
	return v.size
}

func (v *view) release() {
	if v.slot != nil {
		v.slot()
		v.slot = nil
	}
}

// newState is an empty state.
func (v *view) newState() viewState {
	less := func(a, b *vrow) bool {
		return query.CompareSorted(v.ask.Sort, a.vs, b.vs, a.o.namespace, a.o.name, b.o.namespace, b.o.name) < 0
	}
	return viewState{rows: btree.NewBTreeGOptions(less, btree.Options{NoLocks: true}), byKey: map[string]*vrow{}}
}

// open starts following the question: a view following an ordered index
// subscribes on its own goroutine (loadFollowing), as the index may have
// to be built first; any other subscribes now, with a snapshot.
func (v *view) open() error {
	if v.indexed != nil {
		return nil
	}
	return v.subscribe()
}

// subscribe (re)subscribes to the resource's events with a snapshot,
// which is read into a new state while the windows read the last one.
func (v *view) subscribe() error {
	if v.sub != nil {
		v.sub.Close()
	}
	sub, err := v.c.Watch(v.r.res.Name, v.wq, v.wake)
	if err != nil {
		return err
	}
	v.sub = sub
	v.mu.Lock()
	st := v.newState()
	v.building = &st
	v.mu.Unlock()
	return nil
}

// run is the view's goroutine: it applies the events, publishes, and
// ends when no window has used the view for viewLinger, or at shutdown.
func (v *view) run(ctx context.Context) {
	defer func() {
		if v.sub != nil {
			v.sub.Close()
		}
		if v.unpin != nil {
			v.unpin()
		}
		if v.follow != nil {
			v.follow.forget()
		}
		v.release()
	}()
	if v.indexed != nil {
		if err := v.loadFollowing(); err != nil {
			v.fail(fmt.Sprintf("the window's question can no longer be followed: %v", err))
			v.c.wins.drop(v)
			return
		}
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var lastPub, waiting time.Time // waiting: since when a publish waits for counts
	for {
		select {
		case <-ctx.Done():
			v.fail("the server is shutting down")
			v.c.wins.drop(v)
			return
		case <-v.wake:
		case <-timer.C:
		}
		if err := v.drain(); err != nil {
			v.fail(err.Error())
			v.c.wins.drop(v)
			return
		}
		now := time.Now()
		var next time.Duration = time.Hour
		if v.due() {
			if wait := v.every - now.Sub(lastPub); wait > 0 {
				next = wait
			} else {
				if waiting.IsZero() {
					waiting = now
				}
				done, err := v.publish(now.Sub(waiting))
				if err != nil {
					v.fail(fmt.Sprintf("the window's question can no longer be followed: %v", err))
					v.c.wins.drop(v)
					return
				}
				if done {
					lastPub, waiting = now, time.Time{}
				} else {
					next = max(v.every-now.Sub(waiting), time.Millisecond) // the counts' change wakes it first
				}
			}
		}
		if idle, since := v.idle(); idle {
			left := viewLinger - now.Sub(since)
			if left <= 0 && v.c.wins.drop(v) {
				return
			}
			next = min(next, max(left, time.Millisecond))
		}
		timer.Reset(next)
	}
}

func (v *view) idle() (bool, time.Time) {
	v.c.wins.mu.Lock()
	defer v.c.wins.mu.Unlock()
	return v.windows == 0, v.idleSince
}

// fail ends the view: its windows end with RESYNC_REQUIRED and why.
func (v *view) fail(why string) {
	v.failed.Store(&why)
	for _, n := range v.c.wins.notifies(v, nil) {
		signal(n)
	}
}

// due reports whether something was applied since the last publish.
func (v *view) due() bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.ready && (!v.pending.IsZero() || v.pub == 0)
}

// publish makes what was applied visible to the windows, with the
// counts they ask as they are, and wakes them. A following view takes
// its index's snapshot and pass first, off its lock. It waits (false)
// while counts its windows ask have yet to count events the view has
// read, unless it has waited a whole period for them (their change
// makes it due again); never for counts still being first made.
func (v *view) publish(waited time.Duration) (bool, error) {
	ks := v.c.wins.viewCounts(v)
	if waited < v.every {
		for _, k := range ks {
			if u := k.upTo.Load(); u > 0 && u < v.seen && k.failed.Load() == nil { // 0: not counted yet, not waited for
				return false, nil
			}
		}
	}
	var fz *followed
	if v.follow != nil {
		f, err := v.follow.now(v.r)
		if err != nil {
			return false, err
		}
		fz = &f
	}
	counts := make(map[*counts][]byte, len(ks))
	for _, k := range ks {
		if b := k.bytes(); b != nil {
			counts[k] = b
		}
	}
	v.mu.Lock()
	v.publishLocked(fz)
	v.pubCounts = counts
	v.mu.Unlock()
	for _, n := range v.c.wins.notifies(v, nil) {
		signal(n)
	}
	return true, nil
}

func (v *view) publishLocked(fz *followed) {
	v.pub++
	v.pubAt[v.pub%uint64(len(v.pubAt))] = v.pending
	v.pending = time.Time{}
	if fz != nil {
		v.pubFollow, v.pubTotal = fz, fz.total
		return
	}
	v.pubRows = v.live.rows.Copy()
	v.pubTotal = v.pubRows.Len()
}

// countsChanged makes the next publish due: counts its windows ask
// changed (or a window asking for counts joined), at the time of their
// first event (zero: not timed).
func (v *view) countsChanged(at time.Time) {
	v.mu.Lock()
	if v.pending.IsZero() || !at.IsZero() && at.Before(v.pending) {
		v.pending = at
		if at.IsZero() {
			v.pending = time.Now()
		}
	}
	v.mu.Unlock()
	signal(v.wake)
}

// drainBatch bounds the events applied under one hold of the lock.
const drainBatch = 256

// change is one event read for the view, off its lock.
type change struct {
	typ   MessageType
	key   string
	row   *vrow // nil: it does not match (or is gone)
	at    time.Time
	ended string
}

// drain applies what the subscription has. A subscription that overflows
// is replaced by a new one and its snapshot.
func (v *view) drain() error {
	for {
		batch := make([]change, 0, 16)
		for len(batch) < drainBatch {
			m, ok := v.sub.Next()
			if !ok {
				break
			}
			if m.ev != nil {
				v.seen = max(v.seen, m.ev.seq+1)
			}
			batch = append(batch, v.read(&m))
		}
		if len(batch) == 0 {
			return nil
		}
		if v.follow != nil {
			if v.note(batch) {
				if err := v.resubscribe(); err != nil {
					return fmt.Errorf("the window's question can no longer be followed: %w", err)
				}
			}
			continue
		}
		resync := v.apply(batch)
		if resync {
			if err := v.subscribe(); err != nil {
				return fmt.Errorf("the window's question can no longer be followed: %w", err)
			}
		}
	}
}

// read evaluates one message's object: whether it matches, its sort values.
func (v *view) read(m *Message) change {
	ch := change{typ: m.Type}
	if at, ok := m.Published(); ok {
		ch.at = at
	}
	if v.follow != nil && m.Type != ResyncRequired {
		return ch // the index has it
	}
	switch m.Type {
	case MessageType(Added), MessageType(Modified):
		o := m.Object()
		ch.key = o.Key()
		rec := record(o, v.ask.Schema, v.ask.Now)
		if v.ask.Filter.Match(rec) {
			ch.row = &vrow{o: o, key: ch.key, vs: query.SortValues(v.ask.Sort, rec)}
		}
	case MessageType(Deleted):
		ch.key = m.Object().Key()
	case ResyncRequired:
		ch.ended = m.Reason
	}
	return ch
}

// apply applies a batch under the lock; true when the subscription ended
// and must be replaced.
func (v *view) apply(batch []change) (resync bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, ch := range batch {
		st := &v.live
		if v.building != nil {
			st = v.building
		}
		switch ch.typ {
		case MessageType(Added), MessageType(Modified), MessageType(Deleted):
			if v.put(st, ch.key, ch.row) && v.building == nil {
				if v.pending.IsZero() {
					v.pending = ch.at
					if v.pending.IsZero() {
						v.pending = time.Now()
					}
				}
			}
		case Synced:
			if v.building != nil {
				v.live, v.building = *v.building, nil
				v.pending = time.Now()
				if !v.ready {
					v.ready = true
					v.release()
				}
			}
		case ResyncRequired:
			return true
		}
	}
	return false
}

// put replaces the row of key in st by row (nil: removes it); false when
// nothing changed.
func (v *view) put(st *viewState, key string, row *vrow) bool {
	old := st.byKey[key]
	if old == nil && row == nil {
		return false
	}
	if old != nil {
		st.rows.Delete(old)
		delete(st.byKey, key)
	}
	if row != nil {
		st.rows.Set(row)
		st.byKey[key] = row
	}
	return true
}

// page returns the rows offset … offset+limit-1 of what publish pub
// made visible (rows, or a following view's fz), made once per publish
// and page.
func (v *view) page(pub uint64, rows *btree.BTreeG[*vrow], fz *followed, offset, limit int) []*vrow {
	v.smu.Lock()
	defer v.smu.Unlock()
	v.sharedLocked(pub)
	k := pageKey{offset, limit}
	if p, ok := v.pages[k]; ok {
		return p
	}
	if fz != nil {
		out := v.followedPage(fz, offset, limit)
		v.pages[k] = out
		return out
	}
	var out []*vrow
	if first, ok := rows.GetAt(offset); ok {
		out = make([]*vrow, 0, min(limit, rows.Len()-offset))
		rows.Ascend(first, func(r *vrow) bool {
			out = append(out, r)
			return len(out) < limit
		})
	}
	v.pages[k] = out
	return out
}

// changed returns the changes of k at publish pub, made by make once and
// shared.
func (v *view) changed(pub uint64, k changesKey, make func() []byte) []byte {
	v.smu.Lock()
	defer v.smu.Unlock()
	v.sharedLocked(pub)
	if b, ok := v.changes[k]; ok {
		return b
	}
	b := make()
	v.changes[k] = b
	return b
}

// sharedLocked forgets what was shared of an earlier publish.
func (v *view) sharedLocked(pub uint64) {
	if v.shared != pub || v.pages == nil {
		known := map[*Object]*vrow{}
		for _, p := range v.pages {
			for _, r := range p {
				known[r.o] = r
			}
		}
		v.shared, v.pages, v.changes, v.known = pub, map[pageKey][]*vrow{}, map[changesKey][]byte{}, known
	}
}
