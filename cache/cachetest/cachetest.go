// Package cachetest runs a cache against the demo's fake API server over
// real HTTP, for tests of the cache and of the layers above it: the same
// ListerWatcher, informer and index code as production, with an oracle.
package cachetest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/demo"
	"github.com/kubeindex/kubeindex/indexers"
)

// Fixture is a cache and the simulated cluster it watches.
type Fixture struct {
	Sim   *demo.TestCluster
	Cache *cache.Cache
}

// PodSpec is pods with the default indexes plus an image path index and an
// app label index.
func PodSpec() cache.Spec {
	return cache.Spec{Resource: "pods", Indexes: append(indexers.Defaults("", "pods"),
		indexers.Spec{Name: "image", Path: "spec.containers.#.image"},
		indexers.Spec{Name: "app", Label: "app"})}
}

// DefaultSpecs is every resource the demo serves.
func DefaultSpecs() []cache.Spec {
	specs := []cache.Spec{PodSpec()}
	for _, r := range []struct{ name, group, plural string }{
		{"services", "", "services"}, {"nodes", "", "nodes"}, {"deployments.apps", "apps", "deployments"},
		{"replicasets", "apps", "replicasets"}, {"namespaces", "", "namespaces"},
	} {
		specs = append(specs, cache.Spec{Resource: r.name, Indexes: indexers.Defaults(r.group, r.plural)})
	}
	return specs
}

// FixedClock makes demo objects byte-identical across runs (golden files).
func FixedClock() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

// Config adjusts a fixture. The zero value is what New uses.
type Config struct {
	// Wrap wraps the fake API server's handler, e.g. to inject faults.
	Wrap func(http.Handler) http.Handler
	// Options for the cache; StaleAfter defaults to 200ms here.
	Options cache.Options
	// Pods grows the simulated cluster to this many pods (demo.Options'
	// Pods; 0: the scenario's own).
	Pods int
}

// New builds the cache over a fresh demo cluster without starting it.
func New(t testing.TB, specs ...cache.Spec) *Fixture {
	t.Helper()
	return NewWith(t, Config{}, specs...)
}

// NewWith is New with a Config.
func NewWith(t testing.TB, conf Config, specs ...cache.Spec) *Fixture {
	t.Helper()
	sim, err := demo.NewTest(demo.Options{Seed: 7, BookmarkInterval: 200 * time.Millisecond, Now: FixedClock, Pods: conf.Pods})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = sim.Handler()
	if conf.Wrap != nil {
		h = conf.Wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	found, err := cache.Discover(discovery.NewDiscoveryClientForConfigOrDie(cfg))
	if err != nil {
		t.Fatal(err)
	}
	var configured []cache.Configured
	var resolved []cache.Resource
	for _, s := range specs {
		r, err := found.Resolve(s.Resource)
		if err != nil {
			t.Fatal(err)
		}
		resolved = append(resolved, r)
		configured = append(configured, cache.Configured{Spec: s})
	}
	cache.NameResources(resolved)
	for i := range configured {
		configured[i].Resource = resolved[i]
	}
	if conf.Options.StaleAfter == 0 {
		conf.Options.StaleAfter = 200 * time.Millisecond
	}
	c, err := cache.New(cfg, configured, conf.Options)
	if err != nil {
		t.Fatal(err)
	}
	return &Fixture{Sim: sim, Cache: c}
}

// Start builds, starts and waits for the cache to sync and for every
// watch to be open; cleanup stops it. A sync ends with the list, before
// the watch that follows it may have reached the server: a test that
// breaks the connection, or reads the freshness headers, starts from a
// cache that watches.
func Start(t testing.TB, specs ...cache.Spec) *Fixture {
	t.Helper()
	return StartWith(t, Config{}, specs...)
}

// StartWith is Start with a Config.
func StartWith(t testing.TB, conf Config, specs ...cache.Spec) *Fixture {
	t.Helper()
	f := NewWith(t, conf, specs...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Cache.Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second+time.Duration(conf.Pods)*time.Millisecond)
	defer cancelSync()
	if !f.Cache.WaitForSync(syncCtx) {
		t.Fatal("cache did not sync")
	}
	Eventually(t, "every watch to be open", func() bool { return f.Cache.Freshness().WatchConnected })
	return f
}

// Eventually polls cond until it holds, failing the test after 15s.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// State lists resource through the cache and returns namespace/name →
// resourceVersion, the form in which tests compare views.
func State(t testing.TB, c *cache.Cache, resource string, q cache.ListQuery) map[string]string {
	t.Helper()
	res, err := c.List(resource, q)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range res.Items {
		out[o.Key()] = o.ResourceVersion()
	}
	return out
}

// ServedPods is what the fixture's simulated cluster serves of pods:
// namespace/name → resourceVersion, the form State gives of the cache.
func (f *Fixture) ServedPods(t testing.TB) map[string]string {
	t.Helper()
	rec := httptest.NewRecorder()
	f.Sim.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/pods", nil))
	var list struct {
		Items []struct {
			Metadata struct{ Namespace, Name, ResourceVersion string }
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || rec.Code != 200 {
		t.Fatalf("the simulated cluster's pods: %d %v", rec.Code, err)
	}
	out := map[string]string{}
	for _, it := range list.Items {
		out[it.Metadata.Namespace+"/"+it.Metadata.Name] = it.Metadata.ResourceVersion
	}
	return out
}
