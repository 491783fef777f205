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
// the counts made again from its start. Like a view, they publish at
// most rate times a second and linger a while once no window uses them.
//
// Invariant: after the events up to a point are delivered, the counter
// counts exactly the objects the selection and filter match as of that
// point, by the first values of its keys (held by
// TestWindowsAgainstAModel and TestWindowRowsDoNotWaitForCounts).

// counts is one question's counts, shared by its windows.
type counts struct {
	c     *Cache
	r     *resourceCache
	key   string
	wq    WatchQuery
	ask   *Ask
	keys  []query.Key
	every time.Duration
	slot  func() // gives back the budget's slot once counted
	wake  chan struct{}

	// The goroutine's own (run).
	sub     Subscription
	flt     *filter
	counter *query.Counter
	pending time.Time // the first event counted since the last publish
	dirty   bool      // counted since the last publish

	failed atomic.Pointer[string]

	mu  sync.RWMutex
	pub uint64 // publishes so far; 0: not counted yet
	// What the last publish made visible.
	pubBytes []byte
	// pubAt[n%len] is when the first event publish n carries reached
	// the broker (zero: none timed).
	pubAt [64]time.Time

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

// joinCounts adds w to the counts q asks for, begun (within the budget)
// when nobody counts them yet; nil when q asks for none.
func (c *Cache) joinCounts(ctx context.Context, r *resourceCache, q *WindowQuery, w *Window) (*counts, error) {
	if len(q.GroupBy) == 0 {
		return nil, nil
	}
	ws := c.wins
	ws.mu.Lock()
	defer ws.mu.Unlock()
	key := countsKey(r.res.Name, q)
	k := ws.counts[key]
	if k == nil {
		var err error
		if k, err = c.newCounts(r, key, q); err != nil {
			return nil, err
		}
		ws.counts[key] = k
		go k.run(ctx)
	}
	k.windows++
	k.members = append(k.members, w)
	return k, nil
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
	return &counts{c: c, r: r, key: key, ask: q.Ask, keys: q.GroupBy, every: time.Duration(float64(time.Second) / q.Rate),
		slot: slot, wake: make(chan struct{}, 1),
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
// objects the broker holds where the subscription starts.
func (k *counts) open(ctx context.Context) error {
	if k.sub != nil {
		k.sub.Close()
	}
	var objs []*Object
	sub, err := k.c.watch(k.r.res.Name, k.wq, k.wake, func() { objs = k.r.broker.snapshotLocked(k.wq.Namespace) })
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
	k.counter = query.NewCounter(k.keys)
	for i, o := range objs {
		if i%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if k.flt.matches(o, &facts{}) {
			k.add(o, 1)
		}
	}
	k.dirty = true
	k.release()
	return nil
}

// add counts o (by -1: uncounts it) when the filter matches it.
func (k *counts) add(o *Object, by int) {
	if o == nil {
		return
	}
	rec := record(o, k.ask.Schema, k.ask.Now)
	if !k.ask.Filter.Match(rec) {
		return
	}
	if by > 0 {
		k.counter.Add(rec)
	} else {
		k.counter.Remove(rec)
	}
}

// drain counts what the subscription has: an object entering the
// selection is added, one leaving it (its last version as the broker
// held it) removed, one changed moved from its old version's group to
// its new one's. A subscription that overflows is replaced and counted
// again.
func (k *counts) drain(ctx context.Context) error {
	for {
		m, ok := k.sub.Next()
		if !ok {
			return nil
		}
		switch m.Type {
		case MessageType(Added):
			k.add(m.Object(), 1)
		case MessageType(Modified):
			k.add(m.replaced(), -1)
			k.add(m.Object(), 1)
		case MessageType(Deleted):
			k.add(m.replaced(), -1)
		case ResyncRequired:
			if err := k.open(ctx); err != nil {
				return fmt.Errorf("the window's counts can no longer be followed: %w", err)
			}
			continue
		default:
			continue
		}
		k.dirty = true
		if k.pending.IsZero() {
			if at, ok := m.Published(); ok {
				k.pending = at
			}
		}
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
	var lastPub time.Time
	for {
		if err := k.drain(ctx); err != nil {
			k.fail(err.Error())
			return
		}
		now := time.Now()
		next := time.Hour
		if k.dirty {
			if wait := k.every - now.Sub(lastPub); wait > 0 {
				next = wait
			} else {
				k.publish()
				lastPub = now
			}
		}
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

// publish makes the counts visible to the windows and wakes them.
func (k *counts) publish() {
	b := encodeCounts(k.keys, k.counter)
	k.mu.Lock()
	k.pub++
	k.pubBytes = b
	k.pubAt[k.pub%uint64(len(k.pubAt))] = k.pending
	k.mu.Unlock()
	k.pending, k.dirty = time.Time{}, false
	for _, n := range k.c.wins.countsNotifies(k, nil) {
		signal(n)
	}
}

// published is the last publish: its number (0: none yet), its bytes,
// and when the first event of the publish after since reached the
// broker (zero: not timed).
func (k *counts) published(since uint64) (pub uint64, b []byte, at time.Time) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.pub > since && since > 0 && k.pub-since < uint64(len(k.pubAt)) {
		at = k.pubAt[(since+1)%uint64(len(k.pubAt))]
	}
	return k.pub, k.pubBytes, at
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
