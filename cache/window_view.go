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
	c      *Cache
	r      *resourceCache
	key    string
	wq     WatchQuery
	ask    *Ask
	every  time.Duration
	size   int    // the rows selected when it was built (the budget's)
	slot   func() // gives back the budget's slot once built
	wake   chan struct{}
	sub    Subscription // the view goroutine's
	cells  bool         // reading its keys renders rows
	failed atomic.Pointer[string]

	mu       sync.RWMutex
	live     viewState
	building *viewState // a snapshot being read (after a resync); nil otherwise
	groups   map[string][]query.Key
	ready    bool
	pub      uint64 // publishes so far
	applied  uint64 // changes applied so far
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
	mu    sync.Mutex // guards enc and encAt, made under the view's read lock
	keys  []query.Key
	c     *query.Counter
	enc   []byte // encoded at applied == encAt
	encAt uint64
}

func (c *Cache) newView(r *resourceCache, key string, q *WindowQuery) (*view, error) {
	_, items, err := c.selection(r.res.Name, ListQuery{Namespace: q.Namespace, Namespaces: q.Namespaces,
		LabelSelector: q.LabelSelector, Fields: q.Fields})
	if err != nil {
		return nil, err
	}
	a := q.Ask
	cells := a.Filter.NeedsCells() || query.NeedsCells(a.Sort)
	slot, err := c.asks.take(len(items) * (a.Filter.Terms() + len(a.Sort) + renderCost(cells)))
	if err != nil {
		return nil, err
	}
	v := &view{c: c, r: r, key: key, ask: a, every: time.Duration(float64(time.Second) / q.Rate), size: len(items),
		slot: slot, wake: make(chan struct{}, 1), cells: cells, groups: map[string][]query.Key{},
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
	st := v.newState()
	v.mu.Lock()
	v.building = &st
	v.mu.Unlock()
	return nil
}

// count makes sure the view counts by keys, counting its rows now when it
// did not (within the budget).
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
	cells := false
	for _, k := range keys {
		cells = cells || k.NeedsCells()
	}
	if v.live.rows.Len()*(len(keys)+renderCost(cells)) > QueryBudget {
		return fmt.Errorf("%w: counting this window's %d rows by %s would read more than the budget of %d values", ErrTooCostly, v.live.rows.Len(), text, QueryBudget)
	}
	v.groups[text] = keys
	for _, st := range []*viewState{&v.live, v.building} {
		if st == nil {
			continue
		}
		vc := &viewCounter{keys: keys, c: query.NewCounter(keys)}
		st.rows.Scan(func(r *vrow) bool {
			vc.c.Add(record(r.o, v.ask.Schema, v.ask.Now))
			return true
		})
		st.counters[text] = vc
	}
	return nil
}

// run is the view's goroutine: it applies the events, publishes, and
// ends when no window has used the view for viewLinger, or at shutdown.
func (v *view) run(ctx context.Context) {
	defer func() {
		if v.sub != nil {
			v.sub.Close()
		}
		v.release()
	}()
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
		now := time.Now()
		var next time.Duration = time.Hour
		if v.due() {
			if wait := v.every - now.Sub(lastPub); wait > 0 {
				next = wait
			} else {
				v.publish()
				lastPub = now
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
	return v.ready && !v.pending.IsZero() || v.ready && v.pub == 0
}

// publish makes what was applied visible to the windows and wakes them.
func (v *view) publish() {
	v.mu.Lock()
	v.pub++
	v.pubAt[v.pub%uint64(len(v.pubAt))] = v.pending
	v.pending = time.Time{}
	v.mu.Unlock()
	for _, n := range v.c.wins.notifies(v, nil) {
		signal(n)
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
				v.applied++
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
				v.applied++
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

// page returns the rows offset … offset+limit-1, under the read lock.
func (v *view) page(offset, limit int) []*vrow {
	rows := v.live.rows
	first, ok := rows.GetAt(offset)
	if !ok {
		return nil
	}
	out := make([]*vrow, 0, min(limit, rows.Len()-offset))
	rows.Ascend(first, func(r *vrow) bool {
		out = append(out, r)
		return len(out) < limit
	})
	return out
}

// countsJSON is the counts by group as a window sends them, encoded once
// per change, under the view's read lock (the counter guards its
// encoding).
func (v *view) countsJSON(group string) []byte {
	vc := v.live.counters[group]
	if vc == nil {
		return nil
	}
	return vc.encoded(v.applied)
}

func (vc *viewCounter) encoded(applied uint64) []byte {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if vc.enc != nil && vc.encAt == applied {
		return vc.enc
	}
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
	vc.enc, _ = json.Marshal(body)
	vc.encAt = applied
	return vc.enc
}
