package cache

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkFirstSort is the path from "ready" to "every standing index
// built" over a cache of ASK_PODS pods (100,000 by default) in make
// bench's layout, with DefaultPodSortIndexes: the column warmer's pass
// and the standing indexes' build, as the warmer runs them right after
// the sync (each time from nothing: no kept values, no index), in wall
// and CPU time; and a first sort by a standing column asked the moment
// the pass starts (a dashboard's click right after ready), answered
// while the warmer runs; and a dashboard's first screen and click at
// that moment (dashboard-at-ready). There, warmed-ms is when the pass
// over the rows ended (the standing indexes' build begins), and aside-ms
// the time the warmer's workers spent stepping aside for costly
// questions, summed over them.
//
//	ASK_PODS=100000 go test -run XXX -bench FirstSort -benchtime 1x ./cache
//	ASK_PODS=100000 go test -run XXX -bench FirstSort/ready -benchtime 1x -cpuprofile cpu.out ./cache
func BenchmarkFirstSort(b *testing.B) {
	n := askPods(b)
	c := layoutPods(b, n, Options{LazyColumns: true})
	sorts, err := podSorts(DefaultPodSortIndexes)
	if err != nil {
		b.Fatal(err)
	}
	c.podSorts = sorts
	r := c.byName["pods"]
	sc := r.columnSchema()
	reset := func() {
		r.orders.set.Store(nil)
		for _, o := range r.objects() {
			o.columns.Store(nil)
		}
		runtime.GC()
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	// aside sums the workers' time stepped aside: each step's end less
	// its start, as offsets from base; warmed is when the last pass's
	// rows were rendered.
	base := time.Now()
	var aside, warmed atomic.Int64
	c.warmHook = func(stage string) {
		switch stage {
		case "aside":
			aside.Add(-int64(time.Since(base)))
		case "back":
			aside.Add(int64(time.Since(base)))
		case "build":
			warmed.Store(int64(time.Since(base)))
		}
	}
	// sinceBase is the time from base to t.
	sinceBase := func(t time.Time) time.Duration { return t.Sub(base) }
	b.Run("ready-to-standing", func(b *testing.B) {
		for b.Loop() {
			reset()
			start, cpu := time.Now(), processCPU()
			if !c.warm(b.Context(), r, sc, runtime.GOMAXPROCS(0)) {
				b.Fatal("warm stopped")
			}
			warmed, warmCPU := time.Since(start), processCPU()-cpu
			if !c.stand(b.Context(), r, sc) {
				b.Fatal("stand stopped")
			}
			all, allCPU := time.Since(start), processCPU()-cpu
			if got := len(r.orders.live()); got != len(sorts) {
				b.Fatalf("%d standing indexes; expect %d", got, len(sorts))
			}
			b.ReportMetric(ms(warmed), "warm-ms")
			b.ReportMetric(ms(warmCPU), "warm-cpu-ms")
			b.ReportMetric(ms(all-warmed), "stand-ms")
			b.ReportMetric(ms(allCPU-warmCPU), "stand-cpu-ms")
			b.ReportMetric(ms(all), "ready-to-standing-ms")
			b.ReportMetric(ms(allCPU), "ready-to-standing-cpu-ms")
			b.ReportMetric(0, "ns/op")
		}
	})
	// The heap the kept values and the standing indexes take per pod,
	// with the warmer keeping the standing sorts' age and path values in
	// its pass (as now), and with the builds reading them (as before).
	b.Run("heap", func(b *testing.B) {
		heap := func() float64 {
			var ms runtime.MemStats
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&ms)
			return float64(ms.HeapAlloc)
		}
		for b.Loop() {
			for _, during := range []bool{true, false} {
				reset()
				before := heap()
				if !during {
					c.podSorts = nil
				}
				c.warm(b.Context(), r, sc, runtime.GOMAXPROCS(0))
				c.podSorts = sorts
				c.stand(b.Context(), r, sc)
				unit := map[bool]string{true: "B/pod", false: "B/pod-paths-read-by-the-builds"}[during]
				b.ReportMetric((heap()-before)/float64(n), unit)
			}
			b.ReportMetric(0, "ns/op")
		}
	})
	// firstPass runs the warmer's first pass over the pods as Start's
	// warmer does, once they have synced; the channel closes when it is
	// done.
	firstPass := func() <-chan struct{} {
		r.orders.expectStanding(renderedSorts(sorts)) // as Start does
		r.orders.expectFirstPass()
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.pass(b.Context(), r, sc, true)
			r.orders.standingDone()
		}()
		return done
	}
	// A first sort by restarts asked as the warmer starts: what a click
	// right after ready waits for.
	b.Run("click-at-ready", func(b *testing.B) {
		for b.Loop() {
			reset()
			aside.Store(0)
			done := firstPass()
			start := time.Now()
			res, err := c.List("pods", ListQuery{Limit: 100, Ask: &Ask{Schema: sc, Sort: sorts[2], SortText: "restarts", Now: time.Now()}})
			if err != nil || len(res.Items) != 100 {
				b.Fatal(len(res.Items), err)
			}
			b.ReportMetric(ms(time.Since(start)), "click-ms")
			<-done
			b.ReportMetric(ms(time.Since(start)), "ready-to-standing-ms")
			b.ReportMetric(ms(time.Duration(warmed.Load())-sinceBase(start)), "warmed-ms")
			b.ReportMetric(ms(time.Duration(aside.Load())), "aside-ms")
			b.ReportMetric(0, "ns/op")
		}
	})
	// A dashboard's pods view opened the moment the warmer starts: its
	// rows (the namespace/name order) and its counts by status and node,
	// then, once the rows are shown, a click on Restarts: when each is
	// first answered, and when every standing index is built.
	b.Run("dashboard-at-ready", func(b *testing.B) {
		groupBy, err := sc.ParseKeys("groupBy", "status,node", 2, false)
		if err != nil {
			b.Fatal(err)
		}
		first := func(w *Window) bool {
			for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(time.Millisecond) {
				if m, ok := w.Next(); ok && m.Type == WindowFull {
					return true
				}
				if time.Now().After(deadline) {
					return false
				}
			}
		}
		for b.Loop() {
			reset()
			aside.Store(0)
			start, cpu := time.Now(), processCPU()
			done := firstPass()
			now := time.Now()
			rows, err := c.Window("pods", WindowQuery{Ask: &Ask{Schema: sc, Now: now}, Limit: 100}, make(chan struct{}, 1))
			if err != nil {
				b.Fatal(err)
			}
			counts, err := c.Window("pods", WindowQuery{Ask: &Ask{Schema: sc, Now: now}, Limit: 1, GroupBy: groupBy}, make(chan struct{}, 1))
			if err != nil {
				b.Fatal(err)
			}
			counted := make(chan time.Duration, 1)
			go func() {
				if !first(counts) {
					counted <- -1
					return
				}
				counted <- time.Since(start)
			}()
			if !first(rows) {
				b.Fatal("the rows: no first message in 5 minutes")
			}
			b.ReportMetric(ms(time.Since(start)), "rows-ms")
			click := time.Now()
			byRestarts, err := c.Window("pods", WindowQuery{Ask: &Ask{Schema: sc, Sort: sorts[2], SortText: "restarts", Now: now}, Limit: 100}, make(chan struct{}, 1))
			if err != nil {
				b.Fatal(err)
			}
			if !first(byRestarts) {
				b.Fatal("the click: no first message in 5 minutes")
			}
			b.ReportMetric(ms(time.Since(click)), "click-ms")
			d := <-counted
			if d < 0 {
				b.Fatal("the counts: no first message in 5 minutes")
			}
			b.ReportMetric(ms(d), "counts-ms")
			<-done
			b.ReportMetric(ms(time.Since(start)), "ready-to-standing-ms")
			b.ReportMetric(ms(processCPU()-cpu), "cpu-ms")
			b.ReportMetric(ms(time.Duration(warmed.Load())-sinceBase(start)), "warmed-ms")
			b.ReportMetric(ms(time.Duration(aside.Load())), "aside-ms")
			for _, w := range []*Window{rows, counts, byRestarts} {
				w.Close()
			}
			b.ReportMetric(0, "ns/op")
		}
	})
}
