// Package startheap holds the collector's heap goal up while kubeindex
// starts, from package initialization until its cache has synced (see
// Hold). The hold begins in this package's init, which runs before the
// packages whose initialization allocates the most (client-go's scheme,
// the API types): from the runtime's starting goal of 4 MB, initializing
// them alone ran a cycle. It reads the environment as the runtime does:
// GOGC or GOMEMLIMIT set means the collector is tuned, and held as told.
package startheap

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// process is the hold package initialization took.
var process = Hold(os.Getenv, 0)

// Release ends the hold package initialization took. It may be called
// more than once, from any goroutine.
func Release() { process() }

// Small reports whether a memory limit (0: none) is small enough for the
// floor to matter against it: Hold does not hold then.
func Small(memLimit int64) bool { return memLimit > 0 && memLimit < 16*Floor }

// Floor is the heap a starting process may reach before the
// collector's first cycle. Package initialization, discovery and the first
// lists allocate a few megabytes each, nearly all of it kept; from the
// runtime's starting goal of 4 MB a small cluster's start-up ran a cycle
// every few megabytes, marking what it had just built.
const Floor = 32 << 20

// runtimeHeapMinimum is the Go runtime's smallest heap goal at GOGC=100;
// it scales with GOGC.
const runtimeHeapMinimum = 4 << 20

// Hold keeps the collector's heap goal where a live block of
// Floor bytes would put it, twice the live heap plus twice the
// floor, until release is called (once the cache has synced). It does so
// with GOGC, set again after each cycle from the heap that cycle found
// live, rather than with such a block: the block counts towards the goal
// only once a cycle has marked it, and allocating it at start-up started
// that cycle, which a small cluster's start then paid for and needed no
// other. It does nothing when the collector is tuned explicitly (GOGC, or
// a GOMEMLIMIT other than "off", which is the runtime's default) or when
// memLimit, the limit taken from the container (0: none), is small enough
// for the floor to matter against it. release restores GOGC; it may be
// called more than once, from any goroutine.
func Hold(getenv func(string) string, memLimit int64) (release func()) {
	if limit := getenv("GOMEMLIMIT"); getenv("GOGC") != "" || (limit != "" && limit != "off") || Small(memLimit) {
		return func() {}
	}
	h := &startHeap{}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.prev = debug.SetGCPercent(gcPercent(0))
	h.armLocked()
	return sync.OnceFunc(h.release)
}

// startHeap is the state of one holdStartHeap.
type startHeap struct {
	mu       sync.Mutex
	prev     int // GOGC before
	released bool
}

// cycleMark is allocated unreachable so that the next cycle runs its
// cleanup. It holds a pointer: a pointer-free object this small shares a
// block with others (the tiny allocator) and its cleanup might never run.
type cycleMark struct{ _ *byte }

// armLocked has the next cycle call cycled.
func (h *startHeap) armLocked() {
	runtime.AddCleanup(new(cycleMark), (*startHeap).cycled, h)
}

// cycled sets GOGC from the live heap the cycle that just ended found.
func (h *startHeap) cycled() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return
	}
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	debug.SetGCPercent(gcPercent(live[0].Value.Uint64()))
	h.armLocked()
}

func (h *startHeap) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released = true
	debug.SetGCPercent(h.prev)
}

// gcPercent is the GOGC whose goal, after a cycle that found live
// bytes live, is 2*live + 2*Floor: the runtime's goal is live *
// (1 + GOGC/100), and never less than runtimeHeapMinimum * GOGC/100,
// which rules while the live heap is smaller than that minimum (before
// the first cycle, it is all there is).
func gcPercent(live uint64) int {
	goal := 2*live + 2*Floor
	return int(100 * (goal - live) / max(live, runtimeHeapMinimum))
}
