package replay

import (
	"strings"
	"sync"
	"testing"
)

type member struct {
	name string
	box  Outbox[int]
}

func (m *member) Outbox() *Outbox[int] { return &m.box }

func newMember(name string, limit int) (*member, chan struct{}) {
	notify := make(chan struct{}, 1)
	m := &member{name: name}
	m.box.Init(limit, notify)
	return m, notify
}

func takeAll(o *Outbox[int]) []int {
	var out []int
	for {
		v, ok := o.Take()
		if !ok {
			return out
		}
		out = append(out, v)
	}
}

// TestFanoutOverflowEndsOnlyTheSlowMember: given a fast and a slow member,
// when the slow one's queue overflows, then it alone is ended with the
// overflow reason, removed and counted once; what it had queued stays
// takeable, and the fast one got every event.
func TestFanoutOverflowEndsOnlyTheSlowMember(t *testing.T) {
	var f Fanout[*member, int]
	fast, _ := newMember("fast", 2)
	slow, slowNotify := newMember("slow", 3)
	f.Add(fast)
	f.Add(slow)
	var got []int
	for ev := range 5 {
		for s := range f.All() {
			f.Offer(s, ev)
		}
		got = append(got, takeAll(&fast.box)...)
	}
	if len(got) != 5 {
		t.Errorf("the fast member got %v; expect every event", got)
	}
	if f.Len() != 1 || f.Dropped() != 1 {
		t.Fatalf("%d members, %d dropped; expect the slow one dropped", f.Len(), f.Dropped())
	}
	reason, ended := slow.box.Ended()
	if !ended || reason != Overflowed(3) || !strings.Contains(reason, "queue of 3 events overflowed") {
		t.Errorf("slow ended %v with %q; expect the overflow naming its bound", ended, reason)
	}
	if _, ended := fast.box.Ended(); ended {
		t.Error("the fast member ended")
	}
	select {
	case <-slowNotify:
	default:
		t.Error("the slow member's consumer was not woken")
	}
	if q := takeAll(&slow.box); len(q) != 3 || q[0] != 0 || q[2] != 2 {
		t.Errorf("the slow member's queue holds %v; expect the 3 events before the overflow", q)
	}
	slow.box.End("later") // the first reason stays
	if r, _ := slow.box.Ended(); r != Overflowed(3) {
		t.Errorf("a second End replaced the reason: %q", r)
	}
}

// TestFanoutBookmarksIdleMembers: a bookmark goes to the members offered
// nothing since the last one and to those always given one; it never ends
// a member whose queue is full.
func TestFanoutBookmarksIdleMembers(t *testing.T) {
	var f Fanout[*member, int]
	idle, _ := newMember("idle", 4)
	busy, _ := newMember("busy", 4)
	always, _ := newMember("always", 4)
	full, _ := newMember("full", 1)
	for _, m := range []*member{idle, busy, always, full} {
		f.Add(m)
	}
	f.Offer(busy, 1)
	f.Offer(always, 1)
	f.Offer(full, 1)
	f.Bookmark(-1, func(m *member) bool { return m == always })
	for _, tc := range []struct {
		m    *member
		want []int
	}{{idle, []int{-1}}, {busy, []int{1}}, {always, []int{1, -1}}, {full, []int{1}}} {
		if got := takeAll(&tc.m.box); len(got) != len(tc.want) || len(got) > 0 && got[len(got)-1] != tc.want[len(tc.want)-1] {
			t.Errorf("%s took %v; expect %v", tc.m.name, got, tc.want)
		}
	}
	if f.Dropped() != 0 || f.Len() != 4 {
		t.Errorf("a bookmark dropped someone: %d members, %d dropped", f.Len(), f.Dropped())
	}
	f.Bookmark(-2, nil) // busy was idle since the last one: now it gets one
	if got := takeAll(&busy.box); len(got) != 1 || got[0] != -2 {
		t.Errorf("busy took %v after an idle tick; expect the bookmark", got)
	}
}

// TestOutboxConcurrentOfferAndTake: the producer offers while the consumer
// takes (run with -race); nothing is lost, duplicated or reordered.
func TestOutboxConcurrentOfferAndTake(t *testing.T) {
	const n = 10000
	var f Fanout[*member, int]
	m, notify := newMember("m", n)
	f.Add(m)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			f.Offer(m, i)
		}
	}()
	next := 0
	for next < n {
		<-notify
		for {
			v, ok := m.box.Take()
			if !ok {
				break
			}
			if v != next {
				t.Fatalf("took %d; expect %d", v, next)
			}
			next++
		}
	}
	wg.Wait()
	if _, ended := m.box.Ended(); ended {
		t.Error("ended though the queue could hold every event")
	}
}
