package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/btree"

	"github.com/kubeindex/kubeindex/query"
)

// view is one question's matches in order, shared by every window asking
// it, kept current by a subscription of the resource's broker (with its
// snapshot: no gap, no overlap). Its goroutine (run) applies the events
// as they come and publishes the result at most rate times a second,
// waking the windows; they read it under the read lock.
//
// Invariant: after the events up to a point are applied, rows holds
// exactly the objects the selection and filter match, ordered by
// CompareSorted, and each counter counts exactly them (held by
// TestWindowsAgainstAModel).
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
	// indexed, when not nil, is how the view is loaded: from the ordered
	// index of its sort (load), not from a snapshot of every object.
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
	building *viewState             // a snapshot being read (after a resync); nil otherwise
	groups   map[string][]query.Key // the counts asked, by groupText
	// counting are the counts being made off the lock for the live rows
	// as they were when each began (countRun), by groupText.
	counting map[string]*countRun
	counted  bool // a count was finished since the last publish
	ready    bool
	pub      uint64 // publishes so far
	// What the last publish made visible: the windows read only this, so
	// every window reads the same rows, total and counts for one publish
	// (and those reading the same page share its rows and its changes).
	pubRows   *btree.BTreeG[*vrow] // a copy-on-write copy of live.rows
	pubFollow *followed            // a following view's, instead of pubRows
	pubTotal  int
	pubCounts map[string][]byte // by groupText
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

	// Guarded by the windows' lock.
	windows   int
	members   []*Window
	idleSince time.Time
}

// viewState is the rows and their counts.
type viewState struct {
	rows     *btree.BTreeG[*vrow]
	byKey    map[string]*vrow
	counters map[string]*viewCounter // by groupText
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

type viewCounter struct {
	keys []query.Key
	c    *query.Counter
}

type pageKey struct{ offset, limit int }

// viewsFromIndexes: views over most of a resource are loaded from an
// ordered index. A variable for tests only.
var viewsFromIndexes = true

// countHold, when set, is called before a count of a view's rows
// begins. For tests only.
var countHold atomic.Pointer[func()]

// viewIndex is the ordered index a view is loaded from: its filter
// compiled and the keys the index holds (heldKeys).
type viewIndex struct {
	comp *query.Compiled
	held []query.Key
	// follow: the view follows the index (loadFollowing) rather than
	// holding its matches (load).
	follow bool
}

// countRun is a count of the live rows made on a goroutine of its own,
// so that the rows are published without waiting for it: it counts a
// copy of the rows, and the changes the view makes to them meanwhile
// are recorded and applied when it is done.
type countRun struct {
	keys    []query.Key
	changes []rowChange
	done    atomic.Pointer[query.Counter]
}

// rowChange is a live row replaced: old leaves (nil: none), cur enters.
type rowChange struct{ old, cur *Object }

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
	// A question over most of the resource is loaded from the ordered
	// index of its sort, as a question's page is (answerOrdered), and
	// follows it when it counts nothing; a narrow one is read from its
	// own objects.
	if fromIndex && size*narrowShare >= r.size() {
		indexed = &viewIndex{comp: comp, held: held, follow: follows(q)}
		cost = r.orders.cost(r.size(), a.Filter, a.Sort, held, a.Schema)
	}
	slot, err := c.asks.take(cost)
	if err != nil {
		return nil, err
	}
	v := &view{c: c, r: r, key: key, ask: a, every: time.Duration(float64(time.Second) / q.Rate), size: size,
		slot: slot, wake: make(chan struct{}, 1), cells: cells, indexed: indexed, groups: map[string][]query.Key{},
		counting: map[string]*countRun{},
		wq: WatchQuery{Namespace: q.Namespace, Namespaces: q.Namespaces, LabelSelector: q.LabelSelector, Fields: q.Fields,
			Snapshot: true, QueueSize: 1 << 16}}
	v.live = v.newState()
	return v, nil
}

func (v *view) release() {
	if v.slot != nil {
		v.slot()
		v.slot = nil
	}
}

// newState is an empty state counting by every grouping asked; v.mu is
// held (or the view is not shared yet).
func (v *view) newState() viewState {
	less := func(a, b *vrow) bool {
		return query.CompareSorted(v.ask.Sort, a.vs, b.vs, a.o.namespace, a.o.name, b.o.namespace, b.o.name) < 0
	}
	st := viewState{rows: btree.NewBTreeGOptions(less, btree.Options{NoLocks: true}), byKey: map[string]*vrow{},
		counters: map[string]*viewCounter{}}
	for text, keys := range v.groups {
		st.counters[text] = &viewCounter{keys: keys, c: query.NewCounter(keys)}
	}
	return st
}

// open starts following the question: a view loaded from an ordered
// index subscribes on its own goroutine (load), as the index may have to
// be built first; any other subscribes now, with a snapshot.
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

// load fills the view from the ordered index of its sort, in the index's
// order: each entry holds its object's sort values and the filter's, so
// nothing is rendered (unless the index is yet to be built) and nothing
// is sorted. The index's snapshot is taken where the view's subscription
// starts (Cache.watch's atStart): the handler applies an event to the
// indexes before the broker has it, so the snapshot holds every event
// before the subscription's first, and an event also in the snapshot is
// its object's last, which applying again changes nothing. An index
// dropped before the snapshot may lack events: the view then reads a
// snapshot of the objects instead. Its counts are made after it is
// published (startCounts).
func (v *view) load() error {
	a := v.ask
	w, _ := v.r.orders.index(v.r, a.Sort, v.indexed.held, a.Schema)
	ix := w.ix
	wq := v.wq
	wq.Snapshot = false
	var snap *btree.BTreeG[orderEntry]
	held := false
	sub, err := v.c.watch(v.r.res.Name, wq, v.wake, func() {
		snap, held = ix.snapshot(), v.r.orders.holds(ix)
	})
	if err != nil {
		return err
	}
	if !held {
		sub.Close()
		return v.subscribe()
	}
	v.sub = sub
	v.unpin = v.r.orders.pin(ix)
	f, err := v.r.newFilter(wq)
	if err != nil {
		return err
	}
	ask := newAsking(ix, f, a.Filter, v.indexed.comp, a.Now)
	less := func(x, y *vrow) bool {
		return query.CompareSorted(a.Sort, x.vs, y.vs, x.o.namespace, x.o.name, y.o.namespace, y.o.name) < 0
	}
	st := viewState{rows: btree.NewBTreeGOptions(less, btree.Options{NoLocks: true}), byKey: map[string]*vrow{},
		counters: map[string]*viewCounter{}}
	n := len(a.Sort)
	w.scan(snap, nil, func(e orderEntry) bool {
		if ask.match(e) {
			r := &vrow{o: e.o, key: e.o.Key(), vs: e.vs[:n:n]}
			st.rows.Load(r)
			st.byKey[r.key] = r
		}
		return true
	})
	v.mu.Lock()
	v.live, v.ready = st, true
	v.mu.Unlock()
	v.release()
	return nil
}

// count makes sure the view counts by keys (within the budget). The
// count of the rows it holds is made on a goroutine of its own
// (startCounts); windows asking for it wait for it, others do not.
func (v *view) count(keys []query.Key) error {
	if len(keys) == 0 {
		return nil
	}
	text := groupText(keys)
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.groups[text]; ok {
		return nil
	}
	if v.indexed != nil && v.indexed.follow {
		// viewKey tells the questions with counts apart.
		return fmt.Errorf("%w: a view following its index counts nothing", ErrInvalid)
	}
	cells := false
	for _, k := range keys {
		cells = cells || k.NeedsCells()
	}
	rows := v.size // the selection's, until its matches are known
	if v.ready {
		rows = v.live.rows.Len()
	}
	if rows*(len(keys)+renderCost(cells)) > QueryBudget {
		return fmt.Errorf("%w: counting this window's %d rows by %s would read more than the budget of %d values", ErrTooCostly, rows, text, QueryBudget)
	}
	v.groups[text] = keys
	if v.building != nil { // counted as the snapshot is read
		v.building.counters[text] = &viewCounter{keys: keys, c: query.NewCounter(keys)}
		for _, r := range v.building.byKey {
			v.building.counters[text].c.Add(record(r.o, v.ask.Schema, v.ask.Now))
		}
	}
	signal(v.wake)
	return nil
}

// startCounts begins counting the live rows by each grouping asked that
// has no count yet, each on a goroutine of its own over a copy of the
// rows (copy-on-write), so that rows and changes are published
// meanwhile. It runs on the view's goroutine.
func (v *view) startCounts(ctx context.Context) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.ready || v.building != nil {
		return
	}
	for text, keys := range v.groups {
		if v.live.counters[text] != nil || v.counting[text] != nil {
			continue
		}
		run := &countRun{keys: keys}
		v.counting[text] = run
		rows := v.live.rows.Copy()
		go func() {
			if hold := countHold.Load(); hold != nil {
				(*hold)()
			}
			c := query.NewCounter(keys)
			n := 0
			rows.Scan(func(r *vrow) bool {
				c.Add(record(r.o, v.ask.Schema, v.ask.Now))
				n++
				return n%1024 != 0 || ctx.Err() == nil
			})
			run.done.Store(c)
			signal(v.wake)
		}()
	}
}

// finishCounts makes the counts done since the last call live, with the
// changes made to the rows while they were being made. It runs on the
// view's goroutine.
func (v *view) finishCounts() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for text, run := range v.counting {
		c := run.done.Load()
		if c == nil {
			continue
		}
		for _, ch := range run.changes {
			if ch.old != nil {
				c.Remove(record(ch.old, v.ask.Schema, v.ask.Now))
			}
			if ch.cur != nil {
				c.Add(record(ch.cur, v.ask.Schema, v.ask.Now))
			}
		}
		v.live.counters[text] = &viewCounter{keys: run.keys, c: c}
		delete(v.counting, text)
		v.counted = true
	}
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
		load := v.load
		if v.indexed.follow {
			load = v.loadFollowing
		}
		if err := load(); err != nil {
			v.fail(fmt.Sprintf("the window's question can no longer be followed: %v", err))
			v.c.wins.drop(v)
			return
		}
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var lastPub time.Time
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
		v.finishCounts()
		now := time.Now()
		var next time.Duration = time.Hour
		if v.due() {
			if wait := v.every - now.Sub(lastPub); wait > 0 {
				next = wait
			} else {
				if err := v.publish(); err != nil {
					v.fail(fmt.Sprintf("the window's question can no longer be followed: %v", err))
					v.c.wins.drop(v)
					return
				}
				lastPub = now
			}
		}
		v.startCounts(ctx) // after the rows' first publish
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
	return v.ready && (!v.pending.IsZero() || v.pub == 0 || v.counted)
}

// publish makes what was applied visible to the windows and wakes them.
// A following view takes its index's snapshot and pass first, off its
// lock.
func (v *view) publish() error {
	var fz *followed
	if v.follow != nil {
		f, err := v.follow.now(v.r)
		if err != nil {
			return err
		}
		fz = &f
	}
	v.mu.Lock()
	v.publishLocked(fz)
	v.mu.Unlock()
	for _, n := range v.c.wins.notifies(v, nil) {
		signal(n)
	}
	return nil
}

func (v *view) publishLocked(fz *followed) {
	v.pub++
	v.pubAt[v.pub%uint64(len(v.pubAt))] = v.pending
	v.pending, v.counted = time.Time{}, false
	if fz != nil {
		v.pubFollow, v.pubTotal = fz, fz.total
		return
	}
	v.pubRows = v.live.rows.Copy()
	v.pubTotal = v.pubRows.Len()
	v.pubCounts = make(map[string][]byte, len(v.live.counters))
	for text, vc := range v.live.counters {
		v.pubCounts[text] = vc.encode()
	}
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
				clear(v.counting) // of the rows replaced; the new ones counted every grouping
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
	if st == &v.live {
		for _, run := range v.counting {
			ch := rowChange{}
			if old != nil {
				ch.old = old.o
			}
			if row != nil {
				ch.cur = row.o
			}
			run.changes = append(run.changes, ch)
		}
	}
	if old != nil {
		st.rows.Delete(old)
		delete(st.byKey, key)
		rec := record(old.o, v.ask.Schema, v.ask.Now)
		for _, vc := range st.counters {
			vc.c.Remove(rec)
		}
	}
	if row != nil {
		st.rows.Set(row)
		st.byKey[key] = row
		rec := record(row.o, v.ask.Schema, v.ask.Now)
		for _, vc := range st.counters {
			vc.c.Add(rec)
		}
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

// encode is the counts as a window sends them.
func (vc *viewCounter) encode() []byte {
	type group struct {
		Values []query.Value `json:"values"`
		Count  int           `json:"count"`
	}
	body := struct {
		GroupBy []string `json:"groupBy"`
		Groups  []group  `json:"groups"`
	}{GroupBy: make([]string, len(vc.keys)), Groups: []group{}}
	for i, k := range vc.keys {
		body.GroupBy[i] = k.String()
	}
	for _, g := range vc.c.Groups() {
		body.Groups = append(body.Groups, group{g.Values, g.Count})
	}
	b, _ := json.Marshal(body)
	return b
}
