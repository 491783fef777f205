package main

import (
	"runtime"
	"runtime/metrics"
	"testing"
)

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
	if before >= 2*startHeapFloor {
		t.Skipf("the test process's heap goal is %d already", before)
	}

	for name, e := range map[string]map[string]string{"untuned": nil, "GOMEMLIMIT=off, the default": {"GOMEMLIMIT": "off"}} {
		release := holdStartHeap(env(e), 0)
		if got := heapGoal(); got < 2*startHeapFloor {
			t.Fatalf("%s: heap goal while held = %d, want at least %d", name, got, 2*startHeapFloor)
		}
		release()
		release() // a second call is harmless
		if got := heapGoal(); got >= 2*startHeapFloor {
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
			release := holdStartHeap(env(tc.env), tc.limit)
			defer release()
			if got := heapGoal(); got >= 2*startHeapFloor {
				t.Fatalf("heap goal = %d: the floor was held", got)
			}
		})
	}
}
