package cache

import (
	"fmt"
	"testing"
)

// BenchmarkBrokerFanout is one event's way through a resource's broker:
// published by the informer's handler, offered by the fan-out to every
// subscriber (no filter), and taken by each consumer with Next. The
// stream's whole path, WebSockets included, is server's
// BenchmarkStreamFanout. cpu-ns/op is the process's CPU time per event:
// on a shared machine it varies much less than ns/op.
//
//	go test -run '^$' -bench BrokerFanout ./cache
func BenchmarkBrokerFanout(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprint(n, " subscribers"), func(b *testing.B) {
			tb := newTestBroker(b, StreamOptions{})
			for i := range 20 {
				tb.apply("ns", fmt.Sprint("p", i), nil)
			}
			drains := make([]func() int, n)
			for i := range drains {
				s, _ := tb.subscribe(WatchQuery{})
				drains[i] = func() (taken int) {
					for _, ok := s.Next(); ok; _, ok = s.Next() {
						taken++
					}
					return taken
				}
				drains[i]() // SYNCED
			}
			b.ReportAllocs()
			i, cpu := 0, processCPU()
			for b.Loop() {
				tb.apply("ns", fmt.Sprint("p", i%20), nil) // the test broker fans out at once
				for _, drain := range drains {
					if drain() != 1 {
						b.Fatal("a subscriber did not get the event")
					}
				}
				i++
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(i), "cpu-ns/op")
		})
	}
}
