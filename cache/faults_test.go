package cache_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
