package main

import (
	"runtime"
	"sync"
)

// startHeapFloor is the heap a starting process may reach before the
// collector's first cycle. Package initialization, discovery and the first
// lists allocate a few megabytes each, nearly all of it kept; from the
// runtime's starting goal of 4 MB a small cluster's start-up ran a cycle
// every few megabytes, marking what it had just built.
const startHeapFloor = 32 << 20

// holdStartHeap raises the heap goal to at least twice startHeapFloor until
// release is called (once the cache has synced). It allocates a block that
// is never written, so it costs address space, not resident memory, and
// holds no pointers, so marking it costs nothing. It does nothing when the
// collector is tuned explicitly (GOGC, or a GOMEMLIMIT other than "off",
// which is the runtime's default) or when memLimit, the limit taken from
// the container (0: none), is small enough for the floor to matter against
// it. release may be called more than once, from any goroutine.
func holdStartHeap(getenv func(string) string, memLimit int64) (release func()) {
	if limit := getenv("GOMEMLIMIT"); getenv("GOGC") != "" || (limit != "" && limit != "off") || (memLimit > 0 && memLimit < 16*startHeapFloor) {
		return func() {}
	}
	floor := make([]byte, startHeapFloor)
	// sync.OnceFunc drops the function, and so the block, once it has run.
	return sync.OnceFunc(func() { runtime.KeepAlive(floor) })
}
