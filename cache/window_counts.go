package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubeindex/kubeindex/query"
)

// A window's counts keep no rows: they are numbers per group, shared by
// every window asking the same counts (groupBy) of the same selection
// and filter, under the same caller's namespaces (countsKey), whatever
// their sort and page. The counts open with one pass over the objects
// the broker holds where their subscription starts (taken under the
// broker's lock, atStart: no gap, no overlap), reading each one's kept
// column values; after it, each event moves one object from the group
// of its old version (the broker's event carries the version it
// replaced, the one counted before, whose values are kept on it) to the
// group of its new one. A subscription that overflows is replaced and
// the counts made again from its start. They are not published on their
// own: each change makes the views of their windows due, and a view's
// publish (at most rate times a second) carries them, encoded once per
// change, so every window of a view reads the same rows and counts at
// one publish and shares its changes. A view waits for the counts of
// its windows to have counted the events it has seen (upTo: the
// broker's events counted), so that an event's rows and counts go out
// in one message. Counts linger a while once no window uses them.
//
// Invariant: after the events up to a point are delivered, the counter
// counts exactly the objects the selection and filter match as of that
// point, by the first values of its keys (held by
// TestWindowsAgainstAModel and TestWindowRowsDoNotWaitForCounts).

// counts is one question's counts, shared by its windows.
type counts struct {
	c    *Cache
	r    *resourceCache
	key  string
	wq   WatchQuery
	ask  *Ask
	keys []query.Key
	slot func() // gives back the budget's slot once counted
	// rendered: the counts read Table columns (a filter or key does) of
	// most of the resource, the rows the column warmer renders; costly:
	// their first pass holds one of the budget's slots (until release).
	rendered, costly bool
	wake             chan struct{}

	// The goroutine's own (run).
	sub Subscription
	flt *filter

	failed atomic.Pointer[string]
	// upTo is how many of the broker's events are counted: every event
	// before it (by event.seq) that the selection has.
	upTo atomic.Uint64

	mu      sync.Mutex
	counter *query.Counter // nil until first counted
	version uint64         // changes counted; 0: not counted yet
	encoded uint64         // the version b is of
	b       []byte

	// Guarded by the windows' lock.
	windows   int
	members   []*Window
	idleSince time.Time
}

// countsKey names a question's counts: what selects and filters (the
// caller's namespaces included) and the keys counted by; not its sort,
// page or fields.
func countsKey(resource string, q *WindowQuery) string {
	nss := "*"
	if q.Namespaces != nil {
		nss = strings.Join(slices.Sorted(slices.Values(q.Namespaces)), ",")
	}
	return strings.Join([]string{resource, q.Namespace, nss, q.LabelSelector, q.FieldSelector,
		q.Ask.FilterText, q.Ask.Schema.Fingerprint(), groupText(q.GroupBy)}, "\x00")
}

// joinCounts adds w to the counts q asks for (w.k, set under the
// windows' lock, which its view's publishes read it under), begun
// (within the budget) when nobody counts them yet; none when q asks for
// none.
func (c *Cache) joinCounts(ctx context.Context, r *resourceCache, q *WindowQuery, w *Window) error {
	if len(q.GroupBy) == 0 {
		return nil
	}
	ws := c.wins
	ws.mu.Lock()
	defer ws.mu.Unlock()
	key := countsKey(r.res.Name, q)
	k := ws.counts[key]
	if k == nil {
		var err error
		if k, err = c.newCounts(r, key, q); err != nil {
			return err
		}
		ws.counts[key] = k
		go k.run(ctx)
	}
	k.windows++
	k.members = append(k.members, w)
	w.k = k
	return nil
}

// newCounts prepares the counts of q, taking the budget's slot their
// first pass needs.
func (c *Cache) newCounts(r *resourceCache, key string, q *WindowQuery) (*counts, error) {
	_, _, sel, _, err := c.prepare(r.res.Name, ListQuery{Namespace: q.Namespace, Namespaces: q.Namespaces,
		LabelSelector: q.LabelSelector, Fields: q.Fields})
	if err != nil {
		return nil, err
	}
	size := r.size()
	if r.narrows(sel) {
		size = len(r.gather(sel))
	}
	cells := q.Ask.Filter.NeedsCells() || slices.ContainsFunc(q.GroupBy, query.Key.NeedsCells)
	cost := size * (q.Ask.Filter.Terms() + len(q.GroupBy) + renderCost(cells))
	if cost > QueryBudget {
		return nil, fmt.Errorf("%w: counting this window's %d objects by %s would read more than the budget of %d values", ErrTooCostly, size, groupText(q.GroupBy), QueryBudget)
	}
	slot, err := c.asks.take(cost)
	if err != nil {
		return nil, err
	}
	return &counts{c: c, r: r, key: key, ask: q.Ask, keys: q.GroupBy,
		slot: slot, rendered: cells && size*narrowShare >= r.size(), costly: cost > costlyQuery, wake: make(chan struct{}, 1),
		wq: WatchQuery{Namespace: q.Namespace, Namespaces: q.Namespaces, LabelSelector: q.LabelSelector, Fields: q.Fields,
			QueueSize: 1 << 16}}, nil
}

func (k *counts) release() {
	if k.slot != nil {
		k.slot()
		k.slot = nil
	}
}

// open (again) subscribes to the resource's events and counts the
// objects the broker holds where the subscription starts. Counts by a
// column of most of the resource first join the column warmer's pass
// under way, if any (a dashboard opened right after the start): they
// render their share of its rows, then read the values kept, rather
// than render every row beside it.
func (k *counts) open(ctx context.Context) error {
	if k.sub != nil {
		k.sub.Close()
	}
	leave := func() {}
	if k.rendered {
		leave = k.r.orders.helpWarm(k.ask.Schema, k.costly && k.slot != nil)
		defer leave()
	}
	var objs []*Object
	var upTo uint64
	sub, err := k.c.watch(k.r.res.Name, k.wq, k.wake, func() {
		objs, upTo = k.r.broker.snapshotLocked(k.wq.Namespace), k.r.broker.seq
	})
	if err != nil {
		return err
	}
	k.sub = sub
	if k.flt, err = k.r.newFilter(k.wq); err != nil {
		return err
	}
	if hold := countHold.Load(); hold != nil {
		(*hold)()
	}
	counter := query.NewCounter(k.keys)
	for i, o := range objs {
		if i%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if k.flt.matches(o, &facts{}) {
			k.add(counter, o, 1)
		}
	}
	k.mu.Lock()
	k.counter = counter
	k.version++
	k.mu.Unlock()
	k.upTo.Store(upTo)
	leave() // before the slot goes: the warmer never counts it as helping without it
	k.release()
	k.changed(time.Time{})
	return nil
}

// add counts o in c (by -1: uncounts it) when the filter matches it.
func (k *counts) add(c *query.Counter, o *Object, by int) {
	if o == nil {
		return
	}
	rec := record(o, k.ask.Schema, k.ask.Now)
	if !k.ask.Filter.Match(rec) {
		return
	}
	if by > 0 {
		c.Add(rec)
	} else {
		c.Remove(rec)
	}
}

// drain counts what the subscription has: an object entering the
// selection is added, one leaving it (its last version as the broker
// held it) removed, one changed moved from its old version's group to
// its new one's. A subscription that overflows is replaced and counted
// again.
func (k *counts) drain(ctx context.Context) error {
	for {
		var first time.Time
		n := 0
		k.mu.Lock()
		for n < drainBatch {
			m, ok := k.sub.Next()
			if !ok {
				break
			}
			if m.Type == ResyncRequired {
				k.mu.Unlock()
				if err := k.open(ctx); err != nil {
					return fmt.Errorf("the window's counts can no longer be followed: %w", err)
				}
				k.mu.Lock()
				continue
			}
			switch m.Type {
			case MessageType(Added):
				k.add(k.counter, m.Object(), 1)
			case MessageType(Modified):
				k.add(k.counter, m.replaced(), -1)
				k.add(k.counter, m.Object(), 1)
			case MessageType(Deleted):
				k.add(k.counter, m.replaced(), -1)
			}
			if m.ev != nil {
				k.upTo.Store(m.ev.seq + 1)
			}
			if at, ok := m.Published(); ok && first.IsZero() {
				first = at
			}
			n++
		}
		if n > 0 {
			k.version++
		}
		k.mu.Unlock()
		if n == 0 {
			return nil
		}
		k.changed(first)
	}
}

// changed makes the views of k's windows due, at the time of the first
// event counted (zero: not timed).
func (k *counts) changed(at time.Time) {
	for _, v := range k.c.wins.countsViews(k) {
		v.countsChanged(at)
	}
}

// run is the counts' goroutine: it counts, publishes, and ends when no
// window has used them for viewLinger, or at shutdown.
func (k *counts) run(ctx context.Context) {
	defer func() {
		if k.sub != nil {
			k.sub.Close()
		}
		k.release()
	}()
	if err := k.open(ctx); err != nil {
		k.fail(fmt.Sprintf("the window's counts can no longer be followed: %v", err))
		return
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if err := k.drain(ctx); err != nil {
			k.fail(err.Error())
			return
		}
		now := time.Now()
		next := time.Hour
		if idle, since := k.idle(); idle {
			left := viewLinger - now.Sub(since)
			if left <= 0 && k.c.wins.dropCounts(k) {
				return
			}
			next = min(next, max(left, time.Millisecond))
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			k.fail("the server is shutting down")
			return
		case <-k.wake:
		case <-timer.C:
		}
	}
}

func (k *counts) idle() (bool, time.Time) {
	k.c.wins.mu.Lock()
	defer k.c.wins.mu.Unlock()
	return k.windows == 0, k.idleSince
}

// fail ends the counts: their windows end with RESYNC_REQUIRED and why.
func (k *counts) fail(why string) {
	k.failed.Store(&why)
	k.c.wins.dropCounts(k)
	for _, n := range k.c.wins.countsNotifies(k, nil) {
		signal(n)
	}
}

// bytes is the counts as a window sends them, encoded once per change;
// nil before they are first counted.
func (k *counts) bytes() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.version == 0 {
		return nil
	}
	if k.encoded != k.version {
		k.b, k.encoded = encodeCounts(k.keys, k.counter), k.version
	}
	return k.b
}

// dropCounts removes k from the registry if no window uses it, or if it
// failed; false if one joined meanwhile.
func (ws *windows) dropCounts(k *counts) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if k.windows > 0 && k.failed.Load() == nil {
		return false
	}
	if ws.counts[k.key] == k {
		delete(ws.counts, k.key)
	}
	return true
}

// countsViews returns the views of k's windows.
func (ws *windows) countsViews(k *counts) []*view {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var out []*view
	for _, w := range k.members {
		if !slices.Contains(out, w.v) {
			out = append(out, w.v)
		}
	}
	return out
}

// viewCounts returns the counts v's windows ask for.
func (ws *windows) viewCounts(v *view) []*counts {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var out []*counts
	for _, w := range v.members {
		if w.k != nil && !slices.Contains(out, w.k) {
			out = append(out, w.k)
		}
	}
	return out
}

// countsNotifies returns the wake-ups of k's windows.
func (ws *windows) countsNotifies(k *counts, dst []chan<- struct{}) []chan<- struct{} {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, w := range k.members {
		dst = append(dst, w.notify)
	}
	return dst
}

// encodeCounts is the counts as a window sends them.
func encodeCounts(keys []query.Key, c *query.Counter) []byte {
	type group struct {
		Values []query.Value `json:"values"`
		Count  int           `json:"count"`
	}
	body := struct {
		GroupBy []string `json:"groupBy"`
		Groups  []group  `json:"groups"`
	}{GroupBy: make([]string, len(keys)), Groups: []group{}}
	for i, k := range keys {
		body.GroupBy[i] = k.String()
	}
	for _, g := range c.Groups() {
		body.Groups = append(body.Groups, group{g.Values, g.Count})
	}
	b, _ := json.Marshal(body)
	return b
}

// replaced is the version an event's object replaced, as the broker
// held it (for DELETED, the last version delivered); nil for an ADDED
// event or a message of no event.
func (m *Message) replaced() *Object {
	if m.ev != nil {
		return m.ev.old
	}
	return nil
}
