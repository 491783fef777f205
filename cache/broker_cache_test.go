package cache_test

import (
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// streamReplica rebuilds a resource from a subscription, as a dashboard
// does, and records any message that a gap-free, duplicate-free stream
// could not produce.
type streamReplica struct {
	mu     sync.Mutex
	objs   map[string]string // key → resourceVersion
	rv     string
	synced bool
	ended  string
	err    error
}

func (r *streamReplica) apply(m cache.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := m.Object()
	fail := func(format string, args ...any) {
		if r.err == nil {
			r.err = fmt.Errorf(format, args...)
		}
	}
	switch m.Type {
	case cache.MessageType(cache.Added):
		if _, dup := r.objs[o.Key()]; dup {
			fail("ADDED %s twice", o.Key())
		}
		r.objs[o.Key()] = o.ResourceVersion()
	case cache.MessageType(cache.Modified):
		if _, ok := r.objs[o.Key()]; !ok {
			fail("MODIFIED %s before ADDED", o.Key())
		}
		r.objs[o.Key()] = o.ResourceVersion()
	case cache.MessageType(cache.Deleted):
		if _, ok := r.objs[o.Key()]; !ok {
			fail("DELETED %s before ADDED", o.Key())
		}
		delete(r.objs, o.Key())
	case cache.Synced:
		r.synced = true
	case cache.ResyncRequired:
		r.ended = m.Reason
	}
	if !m.Snapshot() && m.ResourceVersion != "" {
		r.rv = m.ResourceVersion
	}
}

func (r *streamReplica) state() (map[string]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended != "" {
		return nil, fmt.Errorf("told to resync: %s", r.ended)
	}
	return maps.Clone(r.objs), r.err
}

// follow consumes s into a fresh replica until stop is closed.
func follow(t *testing.T, wg *sync.WaitGroup, s cache.Subscription, notify chan struct{}, stop chan struct{}, start map[string]string) *streamReplica {
	r := &streamReplica{objs: maps.Clone(start)}
	if r.objs == nil {
		r.objs = map[string]string{}
	}
	wg.Go(func() {
		defer s.Close()
		for {
			for m, ok := s.Next(); ok; m, ok = s.Next() {
				r.apply(m)
			}
			select {
			case <-notify:
			case <-stop:
				return
			}
		}
	})
	return r
}

func TestWatchRebuildsTheAPIServerStateUnderChurn(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	queries := []cache.WatchQuery{
		{Snapshot: true},
		{Snapshot: true, Namespace: "kube-system"},
		{Snapshot: true, Index: "node", Value: "node-2"},
		{Snapshot: true, LabelSelector: "app"},
		{Snapshot: true, Diff: cache.JSONPatch},
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	type client struct {
		q cache.WatchQuery
		r *streamReplica
	}
	var clients []client
	for i := range 200 {
		f.Sim.Step()
		switch i % 60 {
		case 10:
			if err := f.Sim.Apply("pods", podJSON("extra", fmt.Sprint("p-", i), "node-2", "Running", "10.9.0.1")); err != nil {
				t.Fatal(err)
			}
		case 30:
			f.Sim.DropWatches() // the informers re-watch from their last resourceVersion
		case 50:
			f.Sim.CompactHistory()
			f.Sim.DropWatches() // now they must relist: tombstones, replaced objects
		}
		if i%20 == 0 {
			q := queries[(i/20)%len(queries)]
			notify := make(chan struct{}, 1)
			s, err := f.Cache.Watch("pods", q, notify)
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, client{q, follow(t, &wg, s, notify, stop, nil)})
		}
	}
	want := simState(f, "pods")
	cachetest.Eventually(t, "the cache equals the API server", func() bool {
		return maps.Equal(cachetest.State(t, f.Cache, "pods", cache.ListQuery{}), want)
	})
	for i, c := range clients {
		q := cache.ListQuery{Namespace: c.q.Namespace, LabelSelector: c.q.LabelSelector, Index: c.q.Index, Value: c.q.Value}
		expect := cachetest.State(t, f.Cache, "pods", q)
		if len(expect) == 0 {
			t.Fatalf("client %d (%+v) expects nothing: the test would prove little", i, c.q)
		}
		var got map[string]string
		var err error
		cachetest.Eventually(t, fmt.Sprintf("client %d (%+v) rebuilds the cache", i, c.q), func() bool {
			got, err = c.r.state()
			return err != nil || maps.Equal(got, expect)
		})
		if err != nil {
			t.Fatalf("client %d (%+v): %v", i, c.q, err)
		}
	}
	close(stop)
	wg.Wait()
}

func TestWatchResumesAfterADisconnect(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	notify := make(chan struct{}, 1)
	s, err := f.Cache.Watch("pods", cache.WatchQuery{Snapshot: true}, notify)
	if err != nil {
		t.Fatal(err)
	}
	first := follow(t, &wg, s, notify, stop, nil)
	for range 20 {
		f.Sim.Step()
	}
	want := simState(f, "pods")
	cachetest.Eventually(t, "the first client catches up", func() bool {
		got, _ := first.state()
		return maps.Equal(got, want)
	})
	close(stop) // disconnect
	wg.Wait()
	for range 20 {
		f.Sim.Step()
	}
	first.mu.Lock()
	held, rv := maps.Clone(first.objs), first.rv
	first.mu.Unlock()

	stop = make(chan struct{})
	s, err = f.Cache.Watch("pods", cache.WatchQuery{ResourceVersion: rv}, notify)
	if err != nil {
		t.Fatal(err)
	}
	resumed := follow(t, &wg, s, notify, stop, held)
	want = simState(f, "pods")
	cachetest.Eventually(t, "the resumed client catches up", func() bool {
		got, err := resumed.state()
		if err != nil {
			t.Fatal(err)
		}
		return maps.Equal(got, want)
	})
	close(stop)
	wg.Wait()
}
