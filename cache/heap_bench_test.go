package cache

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/query"
)

// heapKept is the cache BenchmarkHeapPerPod measured, kept reachable
// (stopped) so that -memprofile, written when the benchmarks end, shows
// where its bytes are.
var heapKept *Cache

// BenchmarkHeapPerPod is the in-process side of make bench's heap figure:
// the live heap per pod of a synced cache of HEAP_PODS pods (10,000 by
// default) in make bench's layout, with its five indexes and the address
// feed (owner table, history, mirror), against the pod's stored JSON
// (its length, and the allocation it takes). It reports the heap per pod
// without ordered indexes (nor column values: the cache is synced with
// LazyColumns), with every pod's column values kept (as the column warmer
// keeps them by default), and with an ordered index for each pod Table
// column asked after them (the kept column values included), each as a
// ratio to the JSON's length; the last also as a ratio to the heap
// without (x-lazy), what the questions' heap figure compares
// (test/bench/questionheap.go) but for the namespace/name order's
// standing index.
//
//	go test -run XXX -bench HeapPerPod -benchtime 1x ./cache
//	go test -run XXX -bench HeapPerPod/without -benchtime 1x -memprofile heap.out -memprofilerate 1 ./cache
//	go tool pprof -sample_index=inuse_space -top cache.test heap.out
func BenchmarkHeapPerPod(b *testing.B) {
	n := 10_000
	if v := os.Getenv("HEAP_PODS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil || n < 100 {
			b.Fatalf("HEAP_PODS=%q: want a number of pods of at least 100", v)
		}
	}
	heap := func() float64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC() // the first may leave what finalizers free
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapAlloc)
	}
	// sync caches n pods and returns it, its heap above what was live
	// before it started (the list served is live in both) and the mean
	// length and allocation of its stored JSON.
	sync := func(b *testing.B) (c *Cache, perPod, jsonLen, jsonAlloc float64, stop func()) {
		body := benchLayoutFixture(b, n)
		srv := listServer(b, body)
		before := heap()
		c, stopCache := startSyncedPods(b, &rest.Config{Host: srv.URL, DisableCompression: true},
			Spec{Resource: "pods", Indexes: benchIndexes()}, Options{LazyColumns: true}, n)
		after := heap()
		if got := len(c.owners.Addresses()); got == 0 {
			b.Fatalf("the owner table holds %d addresses", got)
		}
		for _, o := range c.byName["pods"].objects() {
			jsonLen += float64(o.Len())
			jsonAlloc += float64(cap(o.own))
		}
		runtime.KeepAlive(body)
		return c, (after - before) / float64(n), jsonLen / float64(n), jsonAlloc / float64(n), func() { stopCache(); srv.Close() }
	}
	report := func(b *testing.B, perPod, jsonLen float64) {
		b.ReportMetric(perPod, "B/pod")
		b.ReportMetric(jsonLen, "json-B/pod")
		b.ReportMetric(perPod/jsonLen, "ratio")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("without-ordered-indexes", func(b *testing.B) {
		for b.Loop() {
			c, perPod, jsonLen, _, stop := sync(b)
			stop()
			report(b, perPod, jsonLen)
			heapKept = c
		}
	})
	// Every pod's column values kept, as the column warmer keeps them
	// after the sync unless LazyColumns (warm.go).
	b.Run("columns-warmed", func(b *testing.B) {
		heapKept = nil
		for b.Loop() {
			c, perPod, jsonLen, _, stop := sync(b)
			before := heap()
			r := c.byName["pods"]
			c.warm(b.Context(), r, r.columnSchema(), runtime.GOMAXPROCS(0))
			added := (heap() - before) / float64(n)
			stop()
			report(b, perPod+added, jsonLen)
			b.ReportMetric(added, "B/pod-columns")
			heapKept = c
		}
	})
	// The standing indexes of DefaultPodSortIndexes (order_standing.go)
	// over the warmed columns, as after the sync by default: the heap per
	// pod with both, and the heap and CPU the indexes add (built one at a
	// time on one goroutine).
	b.Run("standing-indexes", func(b *testing.B) {
		heapKept = nil
		for b.Loop() {
			c, perPod, jsonLen, _, stop := sync(b)
			r := c.byName["pods"]
			synced := heap()
			c.warm(b.Context(), r, r.columnSchema(), runtime.GOMAXPROCS(0))
			before := heap()
			sorts, err := podSorts(DefaultPodSortIndexes)
			if err != nil {
				b.Fatal(err)
			}
			c.podSorts = sorts
			cpu := processCPU()
			c.stand(b.Context(), r, r.columnSchema())
			spent := processCPU() - cpu
			after := heap()
			added := (after - before) / float64(n)
			stop()
			report(b, perPod+(after-synced)/float64(n), jsonLen) // columns warmed and indexes
			b.ReportMetric(float64(len(sorts)), "indexes")
			b.ReportMetric(added, "B/pod-standing")
			b.ReportMetric(added/float64(len(sorts)), "B/pod/index")
			b.ReportMetric(float64(spent.Milliseconds()), "build-cpu-ms")
			heapKept = c
		}
	})
	// An ordered index for each pod column, asked once the column values
	// are kept (as the column warmer keeps them by default; the questions'
	// heap figure asks them of a kubeindex settled so): the heap per pod
	// with both, and what both add.
	b.Run("with-column-indexes", func(b *testing.B) {
		heapKept = nil
		for b.Loop() {
			c, perPod, jsonLen, _, stop := sync(b)
			before := heap()
			r := c.byName["pods"]
			c.warm(b.Context(), r, r.columnSchema(), runtime.GOMAXPROCS(0))
			sc := query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
			for _, col := range sc.Columns() {
				s, err := sc.ParseSort(col)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.List("pods", ListQuery{Limit: 100, Ask: &Ask{Schema: sc, Sort: s, SortText: col, Now: time.Now()}}); err != nil {
					b.Fatal(err)
				}
			}
			c.walks = newWalks(time.Now) // the walks kept for paging are not the indexes'
			indexes := len(c.byName["pods"].orders.live())
			added := (heap() - before) / float64(n)
			stop()
			report(b, perPod+added, jsonLen)
			b.ReportMetric(float64(indexes), "indexes")
			b.ReportMetric(added, "B/pod-indexes")
			b.ReportMetric((perPod+added)/perPod, "x-lazy") // the questions' heap target: <= 1.2
			heapKept = c
		}
	})
}
