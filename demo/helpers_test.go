package demo

import (
	"testing"
	"time"
)

// fixedClock makes generated objects byte-identical across runs.
func fixedClock() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

// newCluster returns a test cluster or fails.
func newCluster(t testing.TB, opts Options) *TestCluster {
	t.Helper()
	c, err := NewTest(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
