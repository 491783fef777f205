package replay

import "sync"

// minRing is the ring a queue starts with, and returns to once drained.
const minRing = 8

// Queue is a bounded first-in first-out queue. Its memory follows its
// contents, not its bound: no ring until the first push, a small ring
// while the consumer keeps up, doubling up to the bound while it lags, and
// dropped once drained. So the thousands of subscribers a server holds,
// idle most of the time, cost little however large their bound.
//
// The zero value is a queue of bound 0, which takes nothing: set the bound
// with SetLimit before use. All methods are safe for concurrent use.
type Queue[T any] struct {
	mu    sync.Mutex
	ring  []T
	head  int // the oldest item's index in ring
	n     int // items queued
	limit int
}

// SetLimit sets the bound (at least 1). Call it before the first Push.
func (q *Queue[T]) SetLimit(limit int) {
	q.mu.Lock()
	q.limit = max(limit, 1)
	q.mu.Unlock()
}

// Push appends v, or reports false when the queue holds its bound.
func (q *Queue[T]) Push(v T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n >= q.limit {
		return false
	}
	if q.n == len(q.ring) {
		q.grow()
	}
	i := q.head + q.n
	if i >= len(q.ring) {
		i -= len(q.ring)
	}
	q.ring[i] = v
	q.n++
	return true
}

// grow doubles the full ring, within limit, keeping the order.
func (q *Queue[T]) grow() {
	ring := make([]T, min(max(2*len(q.ring), minRing), q.limit))
	k := copy(ring, q.ring[q.head:])
	copy(ring[k:], q.ring[:q.head])
	q.ring, q.head = ring, 0
}

// Pop removes and returns the oldest item; false when there is none.
func (q *Queue[T]) Pop() (T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var zero T
	if q.n == 0 {
		return zero, false
	}
	v := q.ring[q.head]
	q.ring[q.head] = zero // what it points to may be forgotten elsewhere
	q.n--
	if q.head++; q.head == len(q.ring) {
		q.head = 0
	}
	if q.n == 0 {
		q.head = 0
		if len(q.ring) > minRing {
			q.ring = nil // a lag is over: give its memory back
		}
	}
	return v, true
}

// Each calls f with every queued item, oldest first, under the queue's
// lock: f must not call the queue.
func (q *Queue[T]) Each(f func(T)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k := range q.n {
		i := q.head + k
		if i >= len(q.ring) {
			i -= len(q.ring)
		}
		f(q.ring[i])
	}
}

// Len returns how many items are queued.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// Limit returns the bound.
func (q *Queue[T]) Limit() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.limit
}

// capacity is the ring's size, for the tests of its memory.
func (q *Queue[T]) capacity() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ring)
}
