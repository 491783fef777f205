package cache

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkSearch searches a cache of ASK_PODS pods (100,000 by default)
// in make bench's layout: a name fragment most pods match (every hit
// ranked and sorted, a page of 50 kept), a rare one, a label value, part
// of an address (every pod's podIPs read) and a whole address (the owner
// table). It reports ms per search.
//
//	go test -run XXX -bench Search -benchtime 5x ./cache
func BenchmarkSearch(b *testing.B) {
	n := askPods(b)
	c := layoutPods(b, n, Options{})
	// The layout gives every pod one UID, and the owner table knows an
	// object by its UID: the last pod listed is the one it holds.
	last := fmt.Sprintf("10.%d.%d.%d", 64+(n-1)>>16, (n-1)>>8&255, (n-1)&255)
	for _, tc := range []struct{ name, text string }{
		{"name-fragment-most", "-0"},
		{"name-fragment-rare", "ledger-1-00000003"},
		{"label-value", "CHECKOUT-0"},
		{"address-part", "10.64.1."},
		{"address-whole", last},
	} {
		b.Run(tc.name, func(b *testing.B) {
			hits := 0
			start := time.Now()
			for b.Loop() {
				res, err := c.Search(SearchQuery{Text: tc.text, Limit: 50})
				if err != nil {
					b.Fatal(err)
				}
				hits = res.Total
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/search")
			b.ReportMetric(float64(hits), "hits")
			b.ReportMetric(0, "ns/op")
		})
	}
}
