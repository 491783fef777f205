package demo

import "testing"

func BenchmarkStep(b *testing.B) {
	c := New(Options{Seed: 1, Now: fixedClock})
	b.ResetTimer()
	for range b.N {
		c.Step()
	}
}

func BenchmarkNew(b *testing.B) {
	for range b.N {
		New(Options{Seed: 1, Now: fixedClock})
	}
}
