package bench

import (
	"math"
	"testing"
)

// quantileBound reads a quantile of the observations made between two
// scrapes of a cumulative histogram, as the bucket bound that holds it.
func TestQuantileBound(t *testing.T) {
	before := buckets{0.001: 10, 0.01: 10, 0.1: 10, math.Inf(1): 10}
	after := buckets{0.001: 60, 0.01: 108, 0.1: 109, math.Inf(1): 110}
	for _, tt := range []struct {
		q, want float64
	}{
		{0.25, 0.001}, {0.50, 0.001}, {0.51, 0.01}, {0.98, 0.01}, {0.99, 0.1}, {1, math.Inf(1)},
	} {
		got, total := quantileBound(before, after, tt.q)
		if got != tt.want || total != 100 {
			t.Errorf("q %v: bound %v of %v observations; expect %v of 100", tt.q, got, total, tt.want)
		}
	}
	if _, total := quantileBound(after, after, 0.99); total != 0 {
		t.Errorf("no observations between equal scrapes; got %v", total)
	}
}
