package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/demo"
	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/server"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// connectTo is the command's Connect in small: discovery, the pods
// resource, a cache and its server.
func connectTo(host, name string, shared *server.Shared) func(context.Context) (Parts, error) {
	return func(context.Context) (Parts, error) {
		cfg := &rest.Config{Host: host, Timeout: 2 * time.Second}
		found, err := cache.Discover(discovery.NewDiscoveryClientForConfigOrDie(cfg))
		if err != nil {
			return Parts{}, err
		}
		res, err := found.Resolve("pods")
		if err != nil {
			return Parts{}, err
		}
		cache.NameResources([]cache.Resource{res})
		cfg.Timeout = 0
		c, err := cache.New(cfg, []cache.Configured{{Resource: res, Spec: cache.Spec{Resource: "pods", Indexes: indexers.Defaults("", "pods")}}},
			cache.Options{StaleAfter: 200 * time.Millisecond, WatchIdleTimeout: time.Second, Logger: quiet()})
		if err != nil {
			return Parts{}, err
		}
		return Parts{Cache: c, Server: server.New(c, server.Options{ClusterName: name, Shared: shared, Logger: quiet()})}, nil
	}
}

// simulated serves a demo cluster; its handler can be swapped for one
// that refuses (the API server gone) and back.
type simulated struct {
	sim  *demo.TestCluster
	srv  *httptest.Server
	down atomic.Bool
}

func newSimulated(t *testing.T, seed int64) *simulated {
	t.Helper()
	sim, err := demo.NewTest(demo.Options{Seed: seed, BookmarkInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := &simulated{sim: sim}
	h := sim.Handler()
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// unreachable is an address where nothing listens.
func unreachable(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", path, nil)
	req.Host = "127.0.0.1:8080"
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stateOf(f *Fleet, name string) server.ClusterState {
	for _, st := range f.States() {
		if st.Name == name {
			return st
		}
	}
	return server.ClusterState{}
}

// TestAClusterFailsAlone: a cluster that cannot be reached is failed with
// its reason while another serves; when it can be reached, it syncs and
// serves too; when its API server then goes away, it is stale with the
// reason and keeps answering from memory, and the other is untouched.
func TestAClusterFailsAlone(t *testing.T) {
	east, west := newSimulated(t, 1), newSimulated(t, 2)
	// west is first asked at an address where nothing listens, then at
	// its API server's.
	var westTarget atomic.Value
	westTarget.Store(unreachable(t))
	shared := server.NewShared(server.LimitOptions{}, server.StreamOptions{})
	f, err := New([]Cluster{
		{Name: "east", Connect: connectTo(east.srv.URL, "east", shared)},
		{Name: "west", Connect: func(ctx context.Context) (Parts, error) {
			return connectTo(westTarget.Load().(string), "west", shared)(ctx)
		}},
	}, Options{Logger: quiet(), RetryInitial: 50 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	front := server.New(noReader(t), server.Options{Clusters: f, Shared: shared, Logger: quiet()}).Handler()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	eventually(t, "east synced", func() bool { return stateOf(f, "east").State == server.ClusterSynced })
	if st := stateOf(f, "west"); st.State != server.ClusterFailed || !strings.Contains(st.Reason, "connection refused") {
		t.Errorf("west, unreachable: %+v; expect failed, saying connection refused", st)
	}
	if code, body := get(t, front, "/clusters/east/api/v1/pods?limit=1"); code != 200 || !strings.Contains(body, `"kind":"PodList"`) {
		t.Errorf("east while west is failed: %d %.200s", code, body)
	}
	if code, body := get(t, front, "/clusters/west/api/v1/pods"); code != 503 || !strings.Contains(body, "connection refused") {
		t.Errorf("west while failed: %d %.200s; expect 503 with the reason", code, body)
	}
	if code, _ := get(t, front, "/readyz"); code != 503 {
		t.Errorf("/readyz with a failed cluster: %d; expect 503 (every cluster must be ready)", code)
	}

	westTarget.Store(west.srv.URL)
	eventually(t, "west synced", func() bool { return stateOf(f, "west").State == server.ClusterSynced })
	if code, _ := get(t, front, "/readyz"); code != 200 {
		t.Errorf("/readyz with both synced: %d", code)
	}
	if code, body := get(t, front, "/clusters/west/api/v1/pods?limit=1"); code != 200 || !strings.Contains(body, `"kind":"PodList"`) {
		t.Errorf("west once reached: %d %.200s", code, body)
	}

	west.down.Store(true)
	west.srv.CloseClientConnections()
	eventually(t, "west stale", func() bool { return stateOf(f, "west").State == server.ClusterStale })
	if st := stateOf(f, "west"); st.Reason == "" {
		t.Errorf("west stale without a reason: %+v", st)
	}
	if code, _ := get(t, front, "/clusters/west/api/v1/pods?limit=1"); code != 200 {
		t.Errorf("a stale cluster answers from memory: %d", code)
	}
	if st := stateOf(f, "east"); st.State != server.ClusterSynced {
		t.Errorf("east while west is down: %+v; expect synced", st)
	}
	var list struct{ Clusters []server.ClusterState }
	_, body := get(t, front, "/api/v1/clusters")
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Clusters) != 2 {
		t.Fatalf("/api/v1/clusters: %s %v", body, err)
	}
	west.down.Store(false)
	eventually(t, "west synced again", func() bool { return stateOf(f, "west").State == server.ClusterSynced })
}

func TestNamesAreCheckedAtOnce(t *testing.T) {
	none := func(context.Context) (Parts, error) { return Parts{}, errors.New("unused") }
	_, err := New([]Cluster{{Name: "a", Connect: none}, {Name: "a", Connect: none}, {Name: "B_1", Connect: none}, {Name: "", Connect: none}}, Options{})
	for _, want := range []string{`cluster "a" is configured twice`, `cluster name "B_1"`, `cluster name ""`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v; expect it to say %s", err, want)
		}
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("a fleet of no clusters was built")
	}
}

// noReader is the front's reader: a cache of no resources.
func noReader(t *testing.T) *cache.Cache {
	c, err := cache.New(&rest.Config{Host: "http://127.0.0.1:1"}, nil, cache.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
