package cache_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// TestHungWatchIsReplaced: the API server (a stuck proxy, in real life)
// accepts watches and then sends nothing, without closing. The cache must
// notice within its idle timeout and open a new watch.
func TestHungWatchIsReplaced(t *testing.T) {
	for _, headers := range []bool{true, false} {
		t.Run(map[bool]string{true: "hangs after the headers", false: "never answers"}[headers], func(t *testing.T) {
			testHungWatch(t, headers)
		})
	}
}

func testHungWatch(t *testing.T, sendHeaders bool) {
	var hang atomic.Bool
	hangWatches := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hang.Load() && r.URL.Query().Get("watch") == "true" {
				if sendHeaders {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusOK)
					w.(http.Flusher).Flush()
				}
				<-r.Context().Done() // never a byte more
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	f := cachetest.StartWith(t, cachetest.Config{
		Wrap:    hangWatches,
		Options: cache.Options{WatchIdleTimeout: 300 * time.Millisecond},
	}, cache.Spec{Resource: "nodes"})

	hang.Store(true)
	f.Sim.DropWatches() // the current watch ends; the next ones hang
	before, _ := f.Cache.ResourceStatus("nodes")
	cachetest.Eventually(t, "hung watches are abandoned and retried", func() bool {
		st, _ := f.Cache.ResourceStatus("nodes")
		if sendHeaders { // each hung stream was opened, then closed as idle
			return st.WatchRestarts >= before.WatchRestarts+2
		}
		// a request never answered is abandoned, and the cache says stale
		return strings.Contains(st.LastError, "no answer for") && st.Stale
	})

	hang.Store(false)
	f.Sim.Apply("nodes", []byte(`{"metadata":{"name":"node-new"}}`))
	cachetest.Eventually(t, "events flow again once the connection recovers", func() bool {
		_, _, err := f.Cache.Get("nodes", "", "node-new")
		return err == nil
	})
}

// TestHungConnectionIsStaleByDefault: with the default options, a watch
// whose bytes stop while its socket stays open is reported stale within
// 90s of (fake) time, while a quiet cluster, where nothing changes for 30
// minutes but the API server's bookmarks keep coming, never is.
func TestHungConnectionIsStaleByDefault(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	var hang atomic.Bool
	var frames, blocked atomic.Int64
	f := cachetest.StartWith(t, cachetest.Config{
		Wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("watch") == "true" {
					w = &stallingWriter{ResponseWriter: w, ctx: r.Context(), hang: &hang, frames: &frames, blocked: &blocked}
				}
				next.ServeHTTP(w, r)
			})
		},
		Options: cache.Options{Now: clock.Now}, // every other option at its default
	}, cache.Spec{Resource: "nodes"})
	stale := func() cache.Freshness {
		st, err := f.Cache.ResourceStatus("nodes")
		if err != nil {
			t.Fatal(err)
		}
		return st.Freshness
	}

	// 30 minutes of no change in steps of 40s, each after at least one
	// bookmark went out: a step's bookmark may be read only after the next
	// step began, so the silence seen is at most two steps, 80s.
	for step := 0; step < 45; step++ {
		n := frames.Load()
		cachetest.Eventually(t, "a bookmark to be sent", func() bool { return frames.Load() > n })
		clock.Step(40 * time.Second)
		if fr := stale(); fr.Stale {
			t.Fatalf("quiet cluster, %v in: stale (%+v)", time.Duration(step+1)*40*time.Second, fr)
		}
	}

	// The clock stands still now: whatever is read until the hang is read
	// at the time the hang begins.
	n := frames.Load()
	cachetest.Eventually(t, "a bookmark to be sent", func() bool { return frames.Load() > n })
	hang.Store(true)
	cachetest.Eventually(t, "the next bookmark to be held", func() bool { return blocked.Load() > 0 })
	clock.Step(79 * time.Second)
	if fr := stale(); fr.Stale {
		t.Fatalf("stale after 79s of silence, before the 80s default: %+v", fr)
	}
	clock.Step(2 * time.Second)
	fr := stale()
	if !fr.Stale || !strings.Contains(fr.LastError, "presumed hung") {
		t.Fatalf("81s after the connection hung: %+v, want stale with the reason", fr)
	}
	if !fr.WatchConnected {
		t.Fatalf("the socket is open; want watchConnected true while it hangs: %+v", fr)
	}
}

// stallingWriter counts the watch frames a handler writes; while hang is
// set it holds every write, the socket staying open, as a stuck proxy does.
type stallingWriter struct {
	http.ResponseWriter
	ctx             context.Context
	hang            *atomic.Bool
	frames, blocked *atomic.Int64
}

func (w *stallingWriter) Write(p []byte) (int, error) {
	if w.hang.Load() {
		w.blocked.Add(1)
		<-w.ctx.Done()
		return 0, w.ctx.Err()
	}
	w.frames.Add(1)
	return w.ResponseWriter.Write(p)
}

func (w *stallingWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// TestReconnectsSoonAfterAnOutage: the API server drops every connection
// for eight attempts in a row, then comes back. The cache must be back
// within a couple of seconds of the last failure; client-go's reflector
// alone would by then wait tens of seconds between attempts.
func TestReconnectsSoonAfterAnOutage(t *testing.T) {
	var failing atomic.Int64
	f := cachetest.StartWith(t, cachetest.Config{
		Wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n := failing.Load(); n > 0 && failing.CompareAndSwap(n, n-1) {
					conn, _, err := w.(http.Hijacker).Hijack()
					if err == nil {
						conn.Close() // no answer at all, as a cut network
					}
					return
				}
				next.ServeHTTP(w, r)
			})
		},
	}, cache.Spec{Resource: "nodes"})

	// The outage begins once the cache's watch is established: a change
	// made now reaches the cache through it (the sync ends with the list,
	// before the watch request may have reached the server).
	f.Sim.Apply("nodes", []byte(`{"metadata":{"name":"node-before-outage"}}`))
	cachetest.Eventually(t, "the cache to watch", func() bool {
		_, _, err := f.Cache.Get("nodes", "", "node-before-outage")
		return err == nil
	})
	failing.Store(8)
	f.Sim.DropWatches()
	f.Sim.Apply("nodes", []byte(`{"metadata":{"name":"node-after-outage"}}`))
	cachetest.Eventually(t, "the cache to catch up after the outage", func() bool {
		_, _, err := f.Cache.Get("nodes", "", "node-after-outage")
		return err == nil
	})
	if n := failing.Load(); n > 0 {
		t.Fatalf("caught up with %d failures still to come: the outage was not exercised", n)
	}
}
