package replay

import (
	"iter"
	"maps"
	"strconv"
	"sync/atomic"
)

// Outbox is one subscriber's side of a stream: its bounded queue, the
// channel that wakes its consumer, and the reason it ended, if it did.
// The producer offers without ever waiting; the consumer takes.
//
// Init it before use; the zero value takes nothing. Offer and Mark must be
// called under the lock that guards the subscriber's Fanout; the other
// methods are safe for concurrent use.
type Outbox[T any] struct {
	queue  Queue[T]
	notify chan<- struct{}
	end    atomic.Pointer[string]
	// offered is set when something was queued since the last Bookmark.
	offered bool
}

// Init bounds the queue at limit items and sets the consumer's wake-up
// channel: it is signalled, without blocking, whenever Take may have
// something new or the outbox ended. Give it a buffer of at least 1; it may
// be shared by several outboxes.
func (o *Outbox[T]) Init(limit int, notify chan<- struct{}) {
	o.queue.SetLimit(limit)
	o.notify = notify
}

// Offer queues v and wakes the consumer. When the queue is full it ends
// the outbox instead (Overflowed) and reports false: the producer then
// forgets the subscriber, which must resync.
func (o *Outbox[T]) Offer(v T) bool {
	if o.queue.Push(v) {
		o.offered = true
		o.Signal()
		return true
	}
	o.End(Overflowed(o.queue.Limit()))
	return false
}

// Mark queues v, a bookmark, unless the queue is full: a subscriber is
// never ended for a bookmark (and one with a full queue is not idle).
func (o *Outbox[T]) Mark(v T) {
	if o.queue.Push(v) {
		o.Signal()
	}
}

// Overflowed is the reason an outbox of limit items ends with when it
// overflows.
func Overflowed(limit int) string {
	return "the subscriber fell behind: its queue of " + strconv.Itoa(limit) + " events overflowed"
}

// End ends the outbox with reason, unless it already ended, and wakes the
// consumer. What is queued stays takeable.
func (o *Outbox[T]) End(reason string) {
	o.end.CompareAndSwap(nil, &reason)
	o.Signal()
}

// Ended returns the reason the outbox ended with; false while it has not.
func (o *Outbox[T]) Ended() (reason string, ok bool) {
	if r := o.end.Load(); r != nil {
		return *r, true
	}
	return "", false
}

// Signal wakes the consumer, without blocking.
func (o *Outbox[T]) Signal() {
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

// Take removes and returns the oldest queued item; false when none is.
func (o *Outbox[T]) Take() (T, bool) { return o.queue.Pop() }

// Queued returns how many items wait, and the bound.
func (o *Outbox[T]) Queued() (n, limit int) { return o.queue.Len(), o.queue.Limit() }

// Each calls f with every queued item, oldest first, under the queue's
// lock (see Queue.Each).
func (o *Outbox[T]) Each(f func(T)) { o.queue.Each(f) }

// Member is what a Fanout holds: a subscriber, by its identity, with its
// outbox.
type Member[T any] interface {
	comparable
	Outbox() *Outbox[T]
}

// Fanout is a stream's set of subscribers and the overflow rule: a member
// whose queue is full when offered an event is ended (Overflowed), removed
// and counted, and nobody waits for it.
//
// The zero value is an empty set. Its user's lock guards it, and the
// members' Offer and Mark; Dropped is safe for concurrent use.
type Fanout[S Member[T], T any] struct {
	members map[S]struct{}
	dropped atomic.Uint64
}

// Add makes s a member.
func (f *Fanout[S, T]) Add(s S) {
	if f.members == nil {
		f.members = map[S]struct{}{}
	}
	f.members[s] = struct{}{}
}

// Remove forgets s, a member or not.
func (f *Fanout[S, T]) Remove(s S) { delete(f.members, s) }

// Len is the number of members.
func (f *Fanout[S, T]) Len() int { return len(f.members) }

// All yields the members, in no order. Offer may remove the member it is
// given during the iteration.
func (f *Fanout[S, T]) All() iter.Seq[S] { return maps.Keys(f.members) }

// Offer queues v for s; when s's queue is full, s is ended, removed and
// counted, and Offer reports false.
func (f *Fanout[S, T]) Offer(s S, v T) bool {
	if s.Outbox().Offer(v) {
		return true
	}
	delete(f.members, s)
	f.dropped.Add(1)
	return false
}

// Bookmark queues mark for each member that was offered nothing since the
// previous Bookmark, and for each that always says is never idle; a full
// queue skips the bookmark (see Outbox.Mark). always may be nil.
func (f *Fanout[S, T]) Bookmark(mark T, always func(S) bool) {
	for s := range f.members {
		o := s.Outbox()
		if o.offered && (always == nil || !always(s)) {
			o.offered = false
			continue
		}
		o.Mark(mark)
	}
}

// Dropped is how many members overflowed since the Fanout was made.
func (f *Fanout[S, T]) Dropped() uint64 { return f.dropped.Load() }
