package cache

import "sync"

// minRing is the ring a queue starts with, and returns to once drained.
const minRing = 8

// queue is a subscription's bounded FIFO of deliveries. The broker pushes
// under its own lock and never waits; the consumer pops. Its memory follows
// its contents, not its bound: no ring until the first delivery, a small
// ring while the consumer keeps up, doubling up to the bound while it lags,
// and dropped once drained. So the thousands of subscriptions a server
// holds, idle most of the time, cost little however large their bound.
//
// All methods are safe for concurrent use.
type queue struct {
	mu    sync.Mutex
	ring  []delivery
	head  int // the oldest delivery's index in ring
	n     int // deliveries queued
	limit int // the bound, > 0
}

// push appends d, or reports false when limit deliveries are queued.
func (q *queue) push(d delivery) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == q.limit {
		return false
	}
	if q.n == len(q.ring) {
		q.grow()
	}
	i := q.head + q.n
	if i >= len(q.ring) {
		i -= len(q.ring)
	}
	q.ring[i] = d
	q.n++
	return true
}

// grow doubles the full ring, within limit, keeping the order.
func (q *queue) grow() {
	ring := make([]delivery, min(max(2*len(q.ring), minRing), q.limit))
	k := copy(ring, q.ring[q.head:])
	copy(ring[k:], q.ring[:q.head])
	q.ring, q.head = ring, 0
}

// pop removes and returns the oldest delivery; false when there is none.
func (q *queue) pop() (delivery, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return delivery{}, false
	}
	d := q.ring[q.head]
	q.ring[q.head] = delivery{} // the event may be forgotten by the history
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
	return d, true
}

// backlog returns how many events are queued and the size of their
// objects: how far behind the consumer is, in events and in bytes.
// Bookmarks carry no object and are not counted.
func (q *queue) backlog() (events int, bytes int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k := range q.n {
		i := q.head + k
		if i >= len(q.ring) {
			i -= len(q.ring)
		}
		if d := q.ring[i]; d.as != asBookmark && d.ev.obj != nil {
			events++
			bytes += int64(len(d.ev.obj.raw))
		}
	}
	return events, bytes
}

// len returns how many deliveries are queued.
func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}
