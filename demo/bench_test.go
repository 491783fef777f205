package demo

import "testing"

func BenchmarkStep(b *testing.B) {
	c := newCluster(b, Options{Seed: 1, Now: fixedClock})
	b.ResetTimer()
	for range b.N {
		if err := c.Step(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNew(b *testing.B) {
	for range b.N {
		newCluster(b, Options{Seed: 1, Now: fixedClock})
	}
}
