package cache

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// BenchmarkIPHistorySync is the informer path's cost of the address
// history: CPU per pod of an initial sync with the history off and on,
// in alternating rounds of one run, and the ratio.
//
//	go test -run XXX -bench IPHistorySync -benchtime 1x ./cache
func BenchmarkIPHistorySync(b *testing.B) {
	const n, rounds = 4000, 4
	srv := listServer(b, podListFixture(b, n))
	cfg := &rest.Config{Host: srv.URL, DisableCompression: true}
	var cpu [2]time.Duration
	for b.Loop() {
		for range rounds {
			for i, off := range []bool{true, false} {
				before := processCPU()
				syncPods(b, cfg, Spec{Resource: "pods", Indexes: benchIndexes()}, Options{IPHistory: IPHistoryOptions{Off: off}}, n)
				cpu[i] += processCPU() - before
			}
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*rounds*n) }
	b.ReportMetric(per(cpu[0]), "cpu-ns/pod-off")
	b.ReportMetric(per(cpu[1]), "cpu-ns/pod-on")
	b.ReportMetric(per(cpu[1])/per(cpu[0]), "on/off")
}

// BenchmarkIPHistoryMemory is the heap one change of owner costs: a new
// pod takes one of 10,000 addresses, ending its previous holder's
// interval, 200,000 times.
//
//	go test -run XXX -bench IPHistoryMemory -benchtime 1x ./cache
func BenchmarkIPHistoryMemory(b *testing.B) {
	const changes, addresses = 200_000, 10_000
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		clk := &handClock{t: t0}
		x := newIPHistory(IPHistoryOptions{Retention: 24 * time.Hour, MaxIntervals: 10 * changes}, clk.now)
		for i := range changes {
			clk.t = clk.t.Add(time.Millisecond)
			h := podHolding(fmt.Sprintf("%08d-0000-0000-0000-000000000000", i), false, fmt.Sprintf("10.%d.%d.%d", 64+i%addresses>>16, i%addresses>>8&255, i%addresses&255))
			h.who.namespace, h.who.name = "shop", fmt.Sprintf("web-%d", i)
			x.observe(h)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		st := x.stats()
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(st.Intervals), "bytes/change")
		runtime.KeepAlive(x)
	}
}
