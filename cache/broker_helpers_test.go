package cache

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
)

// testBroker is a broker wired to a resourceCache the way New does it, with
// a fake informer behind: the tests feed the handler directly.
type testBroker struct {
	t     testing.TB
	b     *broker
	r     *resourceCache
	feed  toolscache.ResourceEventHandlerFuncs
	clock *fakeClock
	rv    uint64
	// listRV is what the informers would report as listed when the first
	// subscription arrives; 0 unless a test sets it.
	listRV uint64
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestBroker(t testing.TB, opts StreamOptions) *testBroker {
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	b := newBroker(clock.Now, opts)
	r := &resourceCache{res: Resource{Name: "pods", Kind: "Pod", Version: "v1", Namespaced: true}, broker: b}
	// The fan-out runs on the broker's goroutine; here, at once after each
	// event, so that the tests see what a subscriber was offered.
	h := b.handler()
	feed := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { h.OnAdd(o, false); b.fanout() },
		UpdateFunc: func(old, cur any) { h.OnUpdate(old, cur); b.fanout() },
		DeleteFunc: func(o any) { h.OnDelete(o); b.fanout() },
	}
	return &testBroker{t: t, b: b, r: r, feed: feed, clock: clock}
}

func testPod(t testing.TB, ns, name, rv string, lbls map[string]string) *Object {
	t.Helper()
	m := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"namespace": ns, "name": name, "resourceVersion": rv, "labels": lbls},
		"spec":     map[string]any{"nodeName": "node-1"}}
	raw, _ := json.Marshal(m)
	o, err := NewObject(raw, "v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// apply makes a change as a watch would deliver it, with the next RV.
func (tb *testBroker) apply(ns, name string, lbls map[string]string) *Object {
	tb.rv++
	o := testPod(tb.t, ns, name, strconv.FormatUint(tb.rv, 10), lbls)
	if old := tb.current(o.Key()); old != nil {
		tb.feed.OnUpdate(old, o)
	} else {
		tb.feed.OnAdd(o, false)
	}
	return o
}

func (tb *testBroker) delete(ns, name string) {
	tb.rv++
	key := ns + "/" + name
	old := tb.current(key)
	if old == nil {
		tb.t.Fatalf("delete of absent %s", key)
	}
	gone := testPod(tb.t, ns, name, strconv.FormatUint(tb.rv, 10), nil)
	tb.feed.OnDelete(gone)
}

func (tb *testBroker) current(key string) *Object {
	tb.b.mu.Lock()
	defer tb.b.mu.Unlock()
	for _, objs := range tb.b.objects {
		for _, o := range objs {
			if o.Key() == key {
				return o
			}
		}
	}
	return nil
}

// state is the broker's view as key → resourceVersion, filtered.
func (tb *testBroker) state(f *filter) map[string]string {
	tb.b.mu.Lock()
	defer tb.b.mu.Unlock()
	out := map[string]string{}
	for _, objs := range tb.b.objects {
		for _, o := range objs {
			if f == nil || f.matches(o, &facts{}) {
				out[o.Key()] = o.resourceVersion
			}
		}
	}
	return out
}

func (tb *testBroker) subscribe(q WatchQuery) (*eventSub, chan struct{}) {
	tb.t.Helper()
	f, err := tb.r.newFilter(q)
	if err != nil {
		tb.t.Fatal(err)
	}
	notify := make(chan struct{}, 1)
	if q.QueueSize == 0 {
		q.QueueSize = DefaultQueueSize
	}
	s := &eventSub{b: tb.b, filter: f, diff: q.Diff}
	s.box.Init(q.QueueSize, notify)
	var from uint64
	if q.ResourceVersion != "" {
		from, _ = strconv.ParseUint(q.ResourceVersion, 10, 64)
	}
	tb.b.subscribe(s, tb.listRV, q.ResourceVersion != "", from, q.Snapshot)
	s.snapshot = filterSnapshot(s.snapshot, f)
	return s, notify
}

func filterSnapshot(objs []*Object, f *filter) []*Object {
	var out []*Object
	for _, o := range objs {
		if f.matches(o, &facts{}) {
			out = append(out, o)
		}
	}
	return out
}

// replica is what a client rebuilds from a stream. It fails on anything a
// gap-free, duplicate-free stream cannot produce.
type replica struct {
	objs   map[string]string
	synced bool
	rv     string
	types  []string // every message, for exact comparisons
	ended  string
}

func newReplica() *replica { return &replica{objs: map[string]string{}} }

func (r *replica) apply(m Message) error {
	o := m.Object()
	switch m.Type {
	case MessageType(Added):
		if _, dup := r.objs[o.Key()]; dup {
			return fmt.Errorf("ADDED %s twice", o.Key())
		}
		r.objs[o.Key()] = o.resourceVersion
	case MessageType(Modified):
		if _, ok := r.objs[o.Key()]; !ok {
			return fmt.Errorf("MODIFIED %s never added", o.Key())
		}
		r.objs[o.Key()] = o.resourceVersion
	case MessageType(Deleted):
		if _, ok := r.objs[o.Key()]; !ok {
			return fmt.Errorf("DELETED %s never added", o.Key())
		}
		delete(r.objs, o.Key())
	case Synced:
		if r.synced {
			return fmt.Errorf("SYNCED twice")
		}
		r.synced = true
	case ResyncRequired:
		r.ended = m.Reason
	}
	if !m.Snapshot() && m.ResourceVersion != "" {
		r.rv = m.ResourceVersion
	}
	desc := string(m.Type) + " " + m.ResourceVersion
	if o != nil {
		desc += " " + o.Key()
	}
	r.types = append(r.types, desc)
	return nil
}

// drain applies everything available now.
func (r *replica) drain(t testing.TB, s Subscription) {
	t.Helper()
	for {
		m, ok := s.Next()
		if !ok {
			return
		}
		if err := r.apply(m); err != nil {
			t.Fatal(err)
		}
	}
}

// Queued returns how many events wait in the queue, and its bound
// (WatchQuery.QueueSize).
func (s *eventSub) Queued() (n, capacity int) { return s.box.Queued() }
