package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// BenchmarkKubeShards: 10 shardSelector consumers over N real pods, each
// listing its shard of the UIDs' hash space and watching it while every
// pod is updated once. It reports the largest share of the objects and of
// the events any shard received (an even split is 10%), and the most pod
// watches the upstream API server had open at once (kubeindex's one).
//
//	go test -run XXX -bench KubeShards -benchtime 1x ./server
//	SHARD_PODS=100000 go test -run XXX -bench KubeShards -benchtime 1x ./server
func BenchmarkKubeShards(b *testing.B) {
	n := 20000
	if v := os.Getenv("SHARD_PODS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil || n < 1 {
			b.Fatalf("SHARD_PODS=%q: want a number of pods", v)
		}
	}
	var open, most atomic.Int64
	f := cachetest.StartWith(b, cachetest.Config{Wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("watch") != "" && r.URL.Path == "/api/v1/pods" {
				now := open.Add(1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				defer open.Add(-1)
			}
			h.ServeHTTP(w, r)
		})
	}}, cachetest.PodSpec())
	loadPods(b, f, n)
	srv := httptest.NewServer(New(f.Cache, Options{Logger: quiet()}).Handler())
	b.Cleanup(srv.Close)
	client := kubernetes.NewForConfigOrDie(&restclient.Config{Host: srv.URL + "/k8s", QPS: -1})
	ctx := context.Background()
	pods := newBenchPods(b)

	for b.Loop() {
		sels := shardSelectors("object.metadata.uid", 10)
		// Each shard's watch from no resourceVersion: its objects as ADDED,
		// then the updates as MODIFIED.
		objects, events := make([]atomic.Int64, len(sels)), make([]atomic.Int64, len(sels))
		var added, modified atomic.Int64
		for i, sel := range sels {
			w, err := client.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{ShardSelector: sel, LabelSelector: "app=bench"})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Stop()
			go func() {
				for ev := range w.ResultChan() {
					switch ev.Type {
					case watch.Added:
						objects[i].Add(1)
						added.Add(1)
					case watch.Modified:
						events[i].Add(1)
						modified.Add(1)
					default:
						b.Errorf("shard %d: %s %+v", i, ev.Type, ev.Object)
					}
				}
			}()
		}
		waitCount(b, &added, n, "the shards' objects")
		for i := range n {
			if err := f.Sim.Apply("pods", pods.json(i, 1)); err != nil {
				b.Fatal(err)
			}
		}
		waitCount(b, &modified, n, "the shards' events")
		if a := added.Load(); a != int64(n) {
			b.Fatalf("the shards hold %d pods, want %d", a, n)
		}
		var maxObjects, maxEvents float64
		for i := range sels {
			maxObjects = max(maxObjects, float64(objects[i].Load())/float64(n))
			maxEvents = max(maxEvents, float64(events[i].Load())/float64(n))
			b.Logf("shard %d: %d objects (%.2f%%), %d events (%.2f%%)", i, objects[i].Load(), 100*float64(objects[i].Load())/float64(n),
				events[i].Load(), 100*float64(events[i].Load())/float64(n))
		}
		b.Logf("%d pods, 10 shards: largest share %.2f%% of the objects, %.2f%% of the %d events; pod watches on the API server at most %d at once",
			n, 100*maxObjects, 100*maxEvents, modified.Load(), most.Load())
		b.ReportMetric(100*maxObjects, "max-%objects")
		b.ReportMetric(100*maxEvents, "max-%events")
		b.ReportMetric(float64(most.Load()), "upstream-watches")
	}
}

// waitCount waits, up to 5 minutes, until c reaches n.
func waitCount(b *testing.B, c *atomic.Int64, n int, what string) {
	deadline := time.Now().Add(5 * time.Minute)
	for c.Load() < int64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("%s: %d of %d", what, c.Load(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
