package ipowner

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkIPHistoryMemory is the heap one change of owner costs: a new
// pod takes one of 10,000 addresses, ending its previous holder's
// interval, 200,000 times.
//
//	go test -run XXX -bench IPHistoryMemory -benchtime 1x ./ipowner
func BenchmarkIPHistoryMemory(b *testing.B) {
	const changes, addresses = 200_000, 10_000
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		clk := &handClock{t: t0}
		x := newHistory(HistoryOptions{Retention: 24 * time.Hour, MaxIntervals: 10 * changes}, clk.now)
		for i := range changes {
			clk.t = clk.t.Add(time.Millisecond)
			h := podHolding(fmt.Sprintf("%08d-0000-0000-0000-000000000000", i), false, fmt.Sprintf("10.%d.%d.%d", 64+i%addresses>>16, i%addresses>>8&255, i%addresses&255))
			h.Owner.Namespace, h.Owner.Name = "shop", fmt.Sprintf("web-%d", i)
			x.Observe(h)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		st := x.Stats()
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(st.Intervals), "bytes/change")
		runtime.KeepAlive(x)
	}
}
