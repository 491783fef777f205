package cache

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/kubeindex/kubeindex/internal/replay"
)

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

func TestBacklogCountsEventsAndTheirBytes(t *testing.T) {
	var box replay.Outbox[delivery]
	box.Init(4, make(chan struct{}, 1))
	small, large := &event{obj: &Object{own: []byte(`{"a":1}`)}}, &event{obj: &Object{own: make([]byte, 100)}}
	box.Offer(delivery{ev: small, as: asAdded})
	box.Mark(delivery{ev: &event{rvStr: "7"}, as: asBookmark})
	box.Offer(delivery{ev: large, as: asModified})
	if n, b := backlog(&box); n != 2 || b != 107 {
		t.Fatalf("backlog = %d events, %d bytes; expect 2 events (bookmarks are not), 107 bytes", n, b)
	}
	box.Take()
	box.Take()
	box.Offer(delivery{ev: small, as: asDeleted})
	box.Offer(delivery{ev: small, as: asDeleted}) // wraps around the ring of 4
	if n, b := backlog(&box); n != 3 || b != 114 {
		t.Fatalf("after taking two and offering two: backlog = %d events, %d bytes; expect 3, 114", n, b)
	}
}
