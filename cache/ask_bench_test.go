package cache

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/query"
)

// BenchmarkQuestions answers questions over a cache of ASK_PODS pods
// (100,000 by default) in make bench's layout: a sorted, filtered page of
// 100 by Table columns and by paths, page 1 against page 900 (by offset
// on a first page, and by continuing a walk), and counts grouped by two
// keys. Pages by offset and counts are timed with a pod changing before
// each answer (as in a live cluster), and page 900 and counts again as
// asked with nothing changed. Each reports its first answer (which
// builds the sort's ordered index and keeps the values read) and then
// p50 and p99 of K answers.
// It reports the heap per pod before any question and with an ordered
// index for each pod column, and what one index takes per pod; and what
// the column warmer costs and a first sort by a column after it.
//
//	go test -run XXX -bench Questions -benchtime 5x ./cache
func BenchmarkQuestions(b *testing.B) {
	n := askPods(b)
	c := layoutPods(b, n, Options{LazyColumns: true})
	sc := query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
	now := time.Now()
	ask := func(filter, sort string, offset int) *Ask {
		var f query.Filter
		var err error
		if filter != "" {
			if f, err = sc.ParseFilter([]string{filter}, now); err != nil {
				b.Fatal(err)
			}
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
	far := min(899, n/100-1) // page 900, or the last of a smaller cache
	forget := func() {       // the kept values, for a cold answer
		for _, o := range c.byName["pods"].objects() {
			o.columns.Store(nil)
		}
	}
	heap := func() float64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapAlloc)
	}
	forget()
	base := heap()
	b.Run("heap-per-pod/without-indexes", func(b *testing.B) {
		for b.Loop() {
		}
		b.ReportMetric(base/float64(n), "B/pod")
		b.ReportMetric(0, "ns/op")
	})
	// timed answers each question K times once it is warm (its first
	// answer, which builds its ordered index or reads its values, is
	// reported apart), and reports the wall time's p50 and p99 and the
	// process's CPU time per answer (on a shared machine, the CPU time
	// varies far less than the wall time).
	const K = 40
	timed := func(b *testing.B, answer func()) {
		start, cpu := time.Now(), processCPU()
		answer()
		first, firstCPU := time.Since(start), processCPU()-cpu
		lat := make([]time.Duration, 0, K)
		cpu = processCPU()
		for b.Loop() {
			for range K {
				start := time.Now()
				answer()
				lat = append(lat, time.Since(start))
			}
		}
		spent := processCPU() - cpu
		slices.Sort(lat)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(first), "first-ms")
		b.ReportMetric(ms(firstCPU), "first-cpu-ms")
		b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
		b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
		b.ReportMetric(ms(spent)/float64(len(lat)), "cpu-ms/answer")
		b.ReportMetric(0, "ns/op")
	}
	// change makes one pod Running, or no longer Running, as the handler
	// applies an update (to the ordered indexes only): in and out of every
	// filter above, so that no answer finds its index, nor its remembered
	// pass, as the last answer left it: a question in a cluster that
	// changes (order_memo.go).
	pods := c.byName["pods"]
	var flip [2]*Object
	for _, o := range pods.objects() {
		if running := []byte(`"phase":"Running"`); bytes.Contains(o.Raw(), running) {
			other, err := NewObject(bytes.Replace(o.Raw(), running, []byte(`"phase":"Pending"`), 1), "v1", "Pod")
			if err != nil {
				b.Fatal(err)
			}
			flip = [2]*Object{o, other}
			break
		}
	}
	if flip[0] == nil {
		b.Fatal("no Running pod")
	}
	turn := 0
	change := func() {
		pods.orders.change(flip[turn%2], flip[(turn+1)%2])
		turn++
	}
	for _, tc := range []struct{ name, filter, sort string }{
		{"page-100/column", "status=Running", "-node,-age"},
		{"page-100/path", "status.phase=Running", "-spec.nodeName,metadata.creationTimestamp"},
	} {
		b.Run(tc.name+"/page-1", func(b *testing.B) {
			timed(b, func() { change(); list(b, ListQuery{Limit: 100, Ask: ask(tc.filter, tc.sort, 0)}) })
		})
		b.Run(tc.name+"/page-900-offset", func(b *testing.B) {
			timed(b, func() { change(); list(b, ListQuery{Limit: 100, Ask: ask(tc.filter, tc.sort, far*100)}) })
		})
		b.Run(tc.name+"/page-900-offset-unchanged", func(b *testing.B) {
			timed(b, func() { list(b, ListQuery{Limit: 100, Ask: ask(tc.filter, tc.sort, far*100)}) })
		})
		b.Run(tc.name+"/page-900-continue", func(b *testing.B) {
			first := list(b, ListQuery{Limit: 100, Ask: ask(tc.filter, tc.sort, 0)})
			// the token of page 899, as a walk reaches it
			tok, _ := decodeContinue("pods", first.Continue)
			tok.Pos = far * 100
			q := ListQuery{Limit: 100, Continue: encodeToken(tok), Ask: ask(tc.filter, tc.sort, 0)}
			timed(b, func() { list(b, q) })
		})
	}
	for _, tc := range []struct{ name, groupBy string }{
		{"counts/columns", "status,node"},
		{"counts/paths", "status.phase,spec.nodeName"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			keys, err := sc.ParseKeys("groupBy", tc.groupBy, 2, false)
			if err != nil {
				b.Fatal(err)
			}
			timed(b, func() {
				change()
				res, err := c.Count("pods", ListQuery{Ask: &Ask{Schema: sc, Now: now}}, keys)
				if err != nil || res.Total != n {
					b.Fatal(res.Total, err)
				}
			})
		})
		b.Run(tc.name+"-unchanged", func(b *testing.B) {
			keys, err := sc.ParseKeys("groupBy", tc.groupBy, 2, false)
			if err != nil {
				b.Fatal(err)
			}
			timed(b, func() {
				res, err := c.Count("pods", ListQuery{Ask: &Ask{Schema: sc, Now: now}}, keys)
				if err != nil || res.Total != n {
					b.Fatal(res.Total, err)
				}
			})
		})
	}
	// A first sort by a column once the warmer has kept every pod's
	// column values (warm.go), as after the sync by default: what the
	// warmer's pass costs in CPU and in heap per pod, and then the first
	// question of a sort by each pod column, none of whose ordered
	// indexes exists.
	b.Run("first-sort/kept-columns", func(b *testing.B) {
		for b.Loop() {
			r := c.byName["pods"]
			r.orders.set.Store(nil)
			forget()
			before := heap()
			cpu := processCPU()
			c.warm(b.Context(), r, r.columnSchema(), runtime.GOMAXPROCS(0))
			b.ReportMetric(float64((processCPU() - cpu).Milliseconds()), "warm-cpu-ms")
			b.ReportMetric((heap()-before)/float64(n), "warm-B/pod")
			var worst, worstCPU time.Duration
			for _, col := range []string{"-restarts", "status", "-ready", "node", "ip", "-age"} {
				start, cpu := time.Now(), processCPU()
				list(b, ListQuery{Limit: 100, Ask: ask("", col, 0)})
				worst, worstCPU = max(worst, time.Since(start)), max(worstCPU, processCPU()-cpu)
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "worst-first-ms")
			b.ReportMetric(float64(worstCPU.Microseconds())/1000, "worst-first-cpu-ms")
			b.ReportMetric(0, "ns/op")
		}
	})
	// The memory of ordered indexes: one over a column whose values are
	// kept already (what an index adds), then one for each pod column,
	// and the whole heap per pod with them, against the heap before any
	// question (base).
	b.Run("heap/index-per-pod", func(b *testing.B) {
		for b.Loop() {
			list(b, ListQuery{Limit: 100, Ask: ask("", "restarts", 0)}) // keeps the columns
			before := heap()
			list(b, ListQuery{Limit: 100, Ask: ask("", "-restarts", 0)})
			b.ReportMetric((heap()-before)/float64(n), "B/pod/index")
			b.ReportMetric(0, "ns/op")
		}
	})
	// The pod columns indexed, from nothing: no index, no kept values.
	b.Run("heap-per-pod/with-column-indexes", func(b *testing.B) {
		for b.Loop() {
			c.byName["pods"].orders.set.Store(nil)
			forget()
			before := heap()
			for _, col := range sc.Columns() {
				list(b, ListQuery{Limit: 100, Ask: ask("", col, 0)})
			}
			h := heap()
			b.ReportMetric(float64(len(c.byName["pods"].orders.live())), "indexes")
			b.ReportMetric((h-before)/float64(n), "B/pod-added")
			b.ReportMetric(h/float64(n), "B/pod")
			b.ReportMetric(0, "ns/op")
		}
	})
}

// layoutPods is a synced cache of n pods in make bench's layout, with
// the bench's indexes, stopped when b ends.
func layoutPods(b *testing.B, n int, opts Options) *Cache {
	srv := listServer(b, benchLayoutFixture(b, n))
	b.Cleanup(srv.Close)
	c, stop := startSyncedPods(b, &rest.Config{Host: srv.URL, DisableCompression: true},
		Spec{Resource: "pods", Indexes: benchIndexes()}, opts, n)
	b.Cleanup(stop) // before the server closes
	return c
}

// askPods is the number of pods the question benchmarks cache: ASK_PODS,
// 100,000 by default, at least 1,000.
func askPods(b *testing.B) int {
	n := 100_000
	if v := os.Getenv("ASK_PODS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil || n < 1000 {
			b.Fatalf("ASK_PODS=%q: want a number of pods of at least 1000", v)
		}
	}
	return n
}
