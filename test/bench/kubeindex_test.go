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

// A ratio just under its target must not print as the target itself.
func TestRatioText(t *testing.T) {
	for v, want := range map[float64]string{0.846: "0.846", 0.85: "0.850", 1.2: "1.200", 218.46: "218.5", math.NaN(): "n/a"} {
		if got := ratioText(v); got != want {
			t.Errorf("ratioText(%v) = %q; expect %q", v, got, want)
		}
	}
}
