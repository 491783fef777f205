package cache

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// The queue is first-in first-out and bounded, whatever the pushes and
// pops interleave with its growing, wrapping around and shrinking.
func TestQueueIsABoundedFIFO(t *testing.T) {
	for _, limit := range []int{1, 3, minRing, minRing + 1, 100} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			q := &queue{limit: limit}
			evs := make([]*event, 4*limit+10)
			for i := range evs {
				evs[i] = &event{rvStr: strconv.Itoa(i)}
			}
			pushed, popped := 0, 0
			push := func(n int) {
				for range n {
					if ok := q.push(delivery{ev: evs[pushed], as: asModified}); ok != (pushed-popped < limit) {
						t.Fatalf("push with %d of %d queued: %v", pushed-popped, limit, ok)
					} else if ok {
						pushed++
					}
				}
			}
			pop := func(n int) {
				for range n {
					d, ok := q.pop()
					if ok != (popped < pushed) {
						t.Fatalf("pop with %d queued: %v", pushed-popped, ok)
					}
					if !ok {
						return
					}
					if d.ev != evs[popped] || d.as != asModified {
						t.Fatalf("popped %s; expect %d, in order", d.ev.rvStr, popped)
					}
					popped++
				}
			}
			push(limit + 1) // the last one does not fit
			pop(2)
			push(3)
			pop(limit)
			push(limit)
			pop(limit + 1)
			if q.len() != 0 || popped != pushed {
				t.Errorf("%d left, %d pushed, %d popped", q.len(), pushed, popped)
			}
		})
	}
}

// An idle subscription holds no ring, and one whose lag is over gives the
// memory of its grown ring back: a queue's memory follows what it holds,
// not its bound.
func TestQueueMemoryFollowsItsContents(t *testing.T) {
	q := &queue{limit: DefaultQueueSize}
	if q.ring != nil {
		t.Fatal("a new queue has a ring")
	}
	q.push(delivery{})
	if len(q.ring) != minRing {
		t.Errorf("ring of %d after one delivery; expect %d", len(q.ring), minRing)
	}
	for range 500 {
		q.push(delivery{})
	}
	if len(q.ring) < 501 || len(q.ring) > 1024 {
		t.Errorf("ring of %d holding 501", len(q.ring))
	}
	for q.len() > 0 {
		q.pop()
	}
	if q.ring != nil {
		t.Errorf("a drained queue keeps a ring of %d", len(q.ring))
	}
	// A consumer that keeps up keeps its small ring: no allocation per event.
	for range 100 {
		q.push(delivery{})
		q.pop()
	}
	if len(q.ring) != minRing {
		t.Errorf("ring of %d for a consumer that keeps up; expect %d", len(q.ring), minRing)
	}
}

// A subscriber overflows at exactly QueueSize events waiting: the one
// beyond ends it with RESYNC_REQUIRED, counted once; until then every
// queued event is delivered, in order.
func TestBrokerOverflowsAtExactlyQueueSize(t *testing.T) {
	const size = 20 // more than the ring a queue starts with, and not a power of two
	tb := newTestBroker(t, StreamOptions{})
	s, _ := tb.subscribe(WatchQuery{QueueSize: size})
	if m, _ := s.Next(); m.Type != Synced {
		t.Fatalf("first message %s; expect SYNCED", m.Type)
	}
	for i := range 3 {
		tb.apply("ns", fmt.Sprint("p", i), nil)
	}
	var got []string
	for range 2 { // the queue wraps around from here
		m, _ := s.Next()
		got = append(got, string(m.Type)+" "+m.ResourceVersion)
	}
	for i := 3; i < size+2; i++ {
		tb.apply("ns", fmt.Sprint("p", i), nil)
	}
	if n, c := s.Queued(); n != size || c != size {
		t.Fatalf("queued %d of %d; expect a full queue of %d", n, c, size)
	}
	if st := tb.b.stats(); st.Dropped != 0 || st.Subscribers != 1 {
		t.Fatalf("stats %+v with a full queue; expect nobody dropped yet", st)
	}
	tb.b.bookmark() // never drops anyone, nor queues beyond the bound
	if st := tb.b.stats(); st.Dropped != 0 {
		t.Fatalf("a bookmark dropped the subscriber: %+v", st)
	}
	for {
		m, ok := s.Next()
		if !ok {
			break
		}
		got = append(got, string(m.Type)+" "+m.ResourceVersion)
	}
	want := make([]string, size+2)
	for i := range want {
		want[i] = "ADDED " + strconv.Itoa(i+1)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("delivered %v; expect %v", got, want)
	}

	for i := range size + 1 {
		tb.apply("ns", fmt.Sprint("q", i), nil)
	}
	if st := tb.b.stats(); st.Dropped != 1 || st.Subscribers != 0 {
		t.Errorf("stats %+v after %d events on a queue of %d; expect the subscriber dropped and counted", st, size+1, size)
	}
	m, _ := s.Next()
	if m.Type != ResyncRequired || !strings.Contains(m.Reason, "queue of 20 events overflowed") {
		t.Errorf("got %s %q; expect RESYNC_REQUIRED naming the bound", m.Type, m.Reason)
	}
	if _, ok := s.Next(); ok {
		t.Error("messages after RESYNC_REQUIRED")
	}
}

func TestQueueBacklogCountsEventsAndTheirBytes(t *testing.T) {
	q := queue{limit: 4}
	small, large := &event{obj: &Object{raw: []byte(`{"a":1}`)}}, &event{obj: &Object{raw: make([]byte, 100)}}
	q.push(delivery{ev: small, as: asAdded})
	q.push(delivery{ev: &event{rv: 7}, as: asBookmark})
	q.push(delivery{ev: large, as: asModified})
	if n, b := q.backlog(); n != 2 || b != 107 {
		t.Fatalf("backlog = %d events, %d bytes; expect 2 events (bookmarks are not), 107 bytes", n, b)
	}
	q.pop()
	q.pop()
	q.push(delivery{ev: small, as: asDeleted})
	q.push(delivery{ev: small, as: asDeleted}) // wraps around the ring of 4
	if n, b := q.backlog(); n != 3 || b != 114 {
		t.Fatalf("after popping two and pushing two: backlog = %d events, %d bytes; expect 3, 114", n, b)
	}
}
