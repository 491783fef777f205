package cache

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/demo"
	"github.com/kubeindex/kubeindex/indexers"
)

// fixture is a cache running against the demo's fake API server over real
// HTTP: the same ListerWatcher, informer and index code as production.
type fixture struct {
	sim   *demo.Cluster
	cache *Cache
}

func podSpec() Spec {
	return Spec{Resource: "pods", Indexes: append(indexers.Defaults("pods"),
		indexers.Spec{Name: "image", Path: "spec.containers.#.image"},
		indexers.Spec{Name: "app", Label: "app"})}
}

func defaultSpecs() []Spec {
	specs := []Spec{podSpec()}
	for _, r := range []string{"services", "nodes", "deployments.apps", "replicasets", "namespaces"} {
		specs = append(specs, Spec{Resource: r, Indexes: indexers.Defaults(r)})
	}
	return specs
}

// newFixture builds the cache without starting it.
func newFixture(t *testing.T, specs ...Spec) *fixture {
	t.Helper()
	sim := demo.New(demo.Options{Seed: 7, BookmarkInterval: 200 * time.Millisecond})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	found, err := Discover(discovery.NewDiscoveryClientForConfigOrDie(cfg))
	if err != nil {
		t.Fatal(err)
	}
	var configured []Configured
	var resolved []Resource
	for _, s := range specs {
		r, err := found.Resolve(s.Resource)
		if err != nil {
			t.Fatal(err)
		}
		resolved = append(resolved, r)
		configured = append(configured, Configured{Spec: s})
	}
	NameResources(resolved)
	for i := range configured {
		configured[i].Resource = resolved[i]
	}
	c, err := New(cfg, configured, Options{StaleAfter: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{sim: sim, cache: c}
}

// startFixture builds, starts and waits for the cache to sync.
func startFixture(t *testing.T, specs ...Spec) *fixture {
	t.Helper()
	f := newFixture(t, specs...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.cache.Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
	defer cancelSync()
	if !f.cache.WaitForSync(syncCtx) {
		t.Fatal("cache did not sync")
	}
	return f
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
