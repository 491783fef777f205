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

// BenchmarkQuestions answers questions over a cache of ASK_PODS pods
// (100,000 by default) in make bench's layout: a sorted, filtered page of
// 100 by Table columns (cold: the objects' column values not yet kept;
// then warm) and by paths, page 1 against page 900 (by offset on a first
// page, and by continuing a walk), and counts grouped by two keys. It
// reports ms per answer, and the heap the kept column values take per
// pod.
//
//	go test -run XXX -bench Questions -benchtime 5x ./cache
func BenchmarkQuestions(b *testing.B) {
	n := 100_000
	if v := os.Getenv("ASK_PODS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil || n < 100_000 && n < 1000 {
			b.Fatalf("ASK_PODS=%q: want a number of pods of at least 1000", v)
		}
	}
	srv := listServer(b, benchLayoutFixture(b, n))
	defer srv.Close()
	c, stop := startSyncedPods(b, &rest.Config{Host: srv.URL, DisableCompression: true},
		Spec{Resource: "pods", Indexes: benchIndexes()}, Options{}, n)
	defer stop()
	sc := query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
	now := time.Now()
	ask := func(filter, sort string, offset int) *Ask {
		f, err := sc.ParseFilter([]string{filter}, now)
		if err != nil {
			b.Fatal(err)
		}
		s, err := sc.ParseSort(sort)
		if err != nil {
			b.Fatal(err)
		}
		return &Ask{Schema: sc, Filter: f, Sort: s, SortText: sort, Offset: offset, Now: now}
	}
	list := func(b *testing.B, q ListQuery) ListResult {
		res, err := c.List("pods", q)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Items) != q.Limit {
			b.Fatalf("%d items; expect %d", len(res.Items), q.Limit)
		}
		return res
	}
	report := func(b *testing.B, start time.Time) {
		b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/answer")
		b.ReportMetric(0, "ns/op")
	}
	far := min(899, n/100-1) // page 900, or the last of a smaller cache
	forget := func() {       // the kept column values, for a cold answer
		for _, sh := range c.byName["pods"].shards {
			for _, o := range sh.informer.GetIndexer().List() {
				o.(*Object).columns.Store(nil)
			}
		}
	}
	b.Run("page-100/column/page-1-cold", func(b *testing.B) {
		var spent time.Duration
		for b.Loop() {
			b.StopTimer()
			forget()
			b.StartTimer()
			start := time.Now()
			list(b, ListQuery{Limit: 100, Ask: ask("status=Running", "-node,-age", 0)})
			spent += time.Since(start)
		}
		b.ReportMetric(float64(spent.Microseconds())/1000/float64(b.N), "ms/answer")
		b.ReportMetric(0, "ns/op")
	})
	for _, tc := range []struct{ name, filter, sort string }{
		{"page-100/column", "status=Running", "-node,-age"},
		{"page-100/path", "status.phase=Running", "-spec.nodeName,metadata.creationTimestamp"},
	} {
		b.Run(tc.name+"/page-1", func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				list(b, ListQuery{Limit: 100, Ask: ask(tc.filter, tc.sort, 0)})
			}
			report(b, start)
		})
		b.Run(tc.name+"/page-900-offset", func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				list(b, ListQuery{Limit: 100, Ask: ask(tc.filter, tc.sort, far*100)})
			}
			report(b, start)
		})
		b.Run(tc.name+"/page-900-continue", func(b *testing.B) {
			first := list(b, ListQuery{Limit: 100, Ask: ask(tc.filter, tc.sort, 0)})
			// the token of page 899, as a walk reaches it
			tok, _ := decodeContinue("pods", first.Continue)
			tok.Pos = far * 100
			q := ListQuery{Limit: 100, Continue: encodeToken(tok), Ask: ask(tc.filter, tc.sort, 0)}
			start := time.Now()
			for b.Loop() {
				list(b, q)
			}
			report(b, start)
		})
	}
	b.Run("kept-columns-heap", func(b *testing.B) {
		for b.Loop() {
			forget()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			list(b, ListQuery{Limit: 100, Ask: ask("status=Running", "-node", 0)})
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "B/pod")
			b.ReportMetric(0, "ns/op")
		}
	})
	for _, tc := range []struct{ name, groupBy string }{
		{"counts/columns", "status,node"},
		{"counts/paths", "status.phase,spec.nodeName"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			keys, err := sc.ParseKeys("groupBy", tc.groupBy, 2, false)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			for b.Loop() {
				res, err := c.Count("pods", ListQuery{Ask: &Ask{Schema: sc, Now: now}}, keys)
				if err != nil || res.Total != n {
					b.Fatal(res.Total, err)
				}
			}
			report(b, start)
		})
	}
}
