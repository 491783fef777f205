package startheap

import (
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
)

// TestMain ends the hold this package's initialization took in the test
// process: the tests take their own.
func TestMain(m *testing.M) {
	Release()
	os.Exit(m.Run())
}

// heapGoal is the collector's current heap goal after a full cycle.
func heapGoal() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestHoldStartHeap(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	before := heapGoal()
	if before >= 2*Floor {
		t.Skipf("the test process's heap goal is %d already", before)
	}

	for name, e := range map[string]map[string]string{"untuned": nil, "GOMEMLIMIT=off, the default": {"GOMEMLIMIT": "off"}} {
		release := Hold(env(e), 0)
		if got := heapGoal(); got < 2*Floor {
			t.Fatalf("%s: heap goal while held = %d, want at least %d", name, got, 2*Floor)
		}
		release()
		release() // a second call is harmless
		if got := heapGoal(); got >= 2*Floor {
			t.Fatalf("%s: heap goal after release = %d, want the floor gone", name, got)
		}
	}

	for name, tc := range map[string]struct {
		env   map[string]string
		limit int64
	}{
		"GOGC set":              {env: map[string]string{"GOGC": "200"}},
		"GOMEMLIMIT set":        {env: map[string]string{"GOMEMLIMIT": "1GiB"}},
		"small container limit": {limit: 256 << 20},
	} {
		t.Run(name, func(t *testing.T) {
			release := Hold(env(tc.env), tc.limit)
			defer release()
			if got := heapGoal(); got >= 2*Floor {
				t.Fatalf("heap goal = %d: the floor was held", got)
			}
		})
	}
}

// The goal startGCPercent gives, by the runtime's rule, is where a live
// block of Floor would put it: twice the live heap plus twice
// the floor (within the runtime's minimum, while the live heap is below
// it, and within GOGC's whole percent).
func TestGCPercent(t *testing.T) {
	for _, live := range []uint64{0, 1 << 20, 3 << 20, 4 << 20, 40 << 20, 1 << 30, 100 << 30} {
		p := uint64(gcPercent(live))
		goal := max(live*(100+p)/100, runtimeHeapMinimum*p/100)
		want := 2*live + 2*Floor
		if goal < 2*Floor || goal > want || want-goal > max(runtimeHeapMinimum, live/100) {
			t.Errorf("live %d: GOGC %d, goal %d; want %d", live, p, goal, want)
		}
	}
}

// Each cycle while the heap is held sets GOGC again: the goal stays
// above the floor however many cycles run, and falls once released.
func TestHoldStartHeapAcrossCycles(t *testing.T) {
	if heapGoal() >= 2*Floor {
		t.Skip("the test process's heap goal is above the floor already")
	}
	release := Hold(func(string) string { return "" }, 0)
	for range 5 {
		if got := heapGoal(); got < 2*Floor {
			release()
			t.Fatalf("heap goal while held = %d, want at least %d", got, 2*Floor)
		}
	}
	release()
	if got := heapGoal(); got >= 2*Floor {
		t.Fatalf("heap goal after release = %d, want the floor gone", got)
	}
}
