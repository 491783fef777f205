package cache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
)

func TestBrokerSnapshotThenEventsHasNoGapOrDuplicate(t *testing.T) {
	tb := newTestBroker(t, StreamOptions{})
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	nss := []string{"ns-1", "ns-2"}
	step := func() {
		ns, name := nss[rng.IntN(2)], names[rng.IntN(len(names))]
		app := map[string]string{"app": []string{"web", "db"}[rng.IntN(2)]}
		if tb.current(ns+"/"+name) != nil && rng.IntN(3) == 0 {
			tb.delete(ns, name)
		} else {
			tb.apply(ns, name, app)
		}
	}
	queries := []WatchQuery{
		{Snapshot: true},
		{Snapshot: true, Namespace: "ns-2"},
		{Snapshot: true, LabelSelector: "app=web"},
		{Snapshot: true, LabelSelector: "app=db", Namespace: "ns-1"},
		{Snapshot: false},
	}
	type client struct {
		s *eventSub
		f *filter
		r *replica
	}
	var clients []client
	var wg sync.WaitGroup
	done := make(chan struct{})
	var mu sync.Mutex
	for i := range 400 {
		step()
		if i%20 == 0 {
			q := queries[(i/20)%len(queries)]
			s, notify := tb.subscribe(q)
			f, _ := tb.r.newFilter(q)
			c := client{s, f, newReplica()}
			if !q.Snapshot {
				// A client without a snapshot starts from what it knew.
				c.r.objs = tb.state(f)
			}
			mu.Lock()
			clients = append(clients, c)
			mu.Unlock()
			wg.Go(func() {
				for {
					select {
					case <-notify:
						c.r.drain(t, c.s)
					case <-done:
						c.r.drain(t, c.s)
						return
					}
				}
			})
		}
	}
	close(done)
	wg.Wait()
	for i, c := range clients {
		if !c.r.synced || c.r.ended != "" {
			t.Fatalf("client %d: synced %v ended %q", i, c.r.synced, c.r.ended)
		}
		if want := tb.state(c.f); !maps.Equal(c.r.objs, want) {
			t.Errorf("client %d rebuilt %v; the broker holds %v", i, c.r.objs, want)
		}
	}
}

func TestBrokerResumeGetsExactlyTheMissedEvents(t *testing.T) {
	tb := newTestBroker(t, StreamOptions{})
	for i := range 5 {
		tb.apply("ns", fmt.Sprint("p", i), nil)
	}
	live, _ := tb.subscribe(WatchQuery{Snapshot: true})
	a := newReplica()
	a.drain(t, live)
	tb.apply("ns", "p1", map[string]string{"x": "1"})
	a.drain(t, live)
	left := a.rv // the client disconnects here
	live.Close()

	cont, _ := tb.subscribe(WatchQuery{}) // a client that stayed connected
	b := newReplica()
	b.objs = tb.state(nil)
	b.drain(t, cont)
	tb.apply("ns", "p2", nil)
	tb.delete("ns", "p3")
	tb.apply("ns", "p9", nil)
	b.drain(t, cont)

	resumed, _ := tb.subscribe(WatchQuery{ResourceVersion: left})
	c := newReplica()
	c.objs = maps.Clone(a.objs)
	c.drain(t, resumed)
	// b saw SYNCED then the three events; c sees the three events then SYNCED.
	want := append(append([]string{}, b.types[1:]...), "SYNCED "+tb.b.stats().ResourceVersion)
	if fmt.Sprint(c.types) != fmt.Sprint(want) {
		t.Errorf("resumed from %s: got %v; expect %v", left, c.types, want)
	}
	if !maps.Equal(c.objs, tb.state(nil)) {
		t.Errorf("resumed client holds %v; broker %v", c.objs, tb.state(nil))
	}
}

func TestBrokerResumeBeyondHistoryRequiresResync(t *testing.T) {
	tb := newTestBroker(t, StreamOptions{HistorySize: 3, HistoryAge: time.Minute})
	tb.subscribe(WatchQuery{}) // the end of the (empty) initial list, at 0
	for i := range 6 {
		tb.apply("ns", fmt.Sprint("p", i), nil) // RVs 1..6, history keeps 4..6
	}
	tests := []struct {
		name, rv string
		resync   bool
	}{
		{"older than the history", "2", true},
		{"just before the oldest retained", "3", false},
		{"current", "6", false},
		{"ahead of the server", "7", true},
	}
	for _, tt := range tests {
		s, _ := tb.subscribe(WatchQuery{ResourceVersion: tt.rv})
		m, _ := s.Next()
		if got := m.Type == ResyncRequired; got != tt.resync {
			t.Errorf("%s (%s): first message %s %q; expect resync=%v", tt.name, tt.rv, m.Type, m.Reason, tt.resync)
		}
		if tt.resync {
			if _, more := s.Next(); more {
				t.Errorf("%s: messages after RESYNC_REQUIRED", tt.name)
			}
		}
		s.Close()
	}
	tb.clock.Advance(2 * time.Minute) // every event is now too old, but the newest is kept
	s, _ := tb.subscribe(WatchQuery{ResourceVersion: "4"})
	if m, _ := s.Next(); m.Type != ResyncRequired {
		t.Errorf("resume after the history aged out: %s; expect RESYNC_REQUIRED", m.Type)
	}
	s, _ = tb.subscribe(WatchQuery{ResourceVersion: "5"})
	if m, _ := s.Next(); m.Type != MessageType(Added) || m.ResourceVersion != "6" {
		t.Errorf("resume from just before the newest event, aged out: %s %s; expect the event at 6, which the history keeps until a newer one", m.Type, m.ResourceVersion)
	}
	s, _ = tb.subscribe(WatchQuery{ResourceVersion: "6"})
	if m, _ := s.Next(); m.Type != Synced || m.ResourceVersion != "6" {
		t.Errorf("resume from the current position with no history: %s %s; expect SYNCED 6", m.Type, m.ResourceVersion)
	}
}

func TestBrokerOverflowEndsOnlyTheSlowSubscriber(t *testing.T) {
	tb := newTestBroker(t, StreamOptions{})
	slow, _ := tb.subscribe(WatchQuery{QueueSize: 4})
	fast, _ := tb.subscribe(WatchQuery{QueueSize: 4})
	fr := newReplica()
	for i := range 50 {
		tb.apply("ns", fmt.Sprint("p", i), nil)
		fr.drain(t, fast)
		if n, c := slow.Queued(); n > c {
			t.Fatalf("queue holds %d of %d", n, c)
		}
	}
	if st := tb.b.stats(); st.Subscribers != 1 || st.Dropped != 1 {
		t.Errorf("stats %+v; expect the slow subscriber dropped and counted", st)
	}
	m, _ := slow.Next()
	if m.Type != ResyncRequired || m.Reason == "" {
		t.Errorf("slow subscriber got %s; expect RESYNC_REQUIRED with a reason", m.Type)
	}
	if len(fr.objs) != 50 || fr.ended != "" {
		t.Errorf("fast subscriber has %d objects (ended %q); expect all 50", len(fr.objs), fr.ended)
	}
}

// The initial list is a snapshot: no position before its end, nor inside
// it, can be resumed from, even though its objects' resourceVersions are.
func TestBrokerResumeBeforeTheInitialListRequiresResync(t *testing.T) {
	tb := newTestBroker(t, StreamOptions{})
	tb.rv = 10
	tb.apply("ns", "a", nil) // listed at 11
	tb.apply("ns", "b", nil) // listed at 12
	tb.listRV = 20           // the list's own resourceVersion
	for _, rv := range []string{"0", "11", "12", "19"} {
		s, _ := tb.subscribe(WatchQuery{ResourceVersion: rv})
		if m, _ := s.Next(); m.Type != ResyncRequired {
			t.Errorf("resume from %s, before the initial list ended: %s; expect RESYNC_REQUIRED", rv, m.Type)
		}
	}
	s, _ := tb.subscribe(WatchQuery{Snapshot: true})
	r := newReplica()
	r.drain(t, s)
	if r.rv != "20" {
		t.Errorf("SYNCED at %s; expect the list's resourceVersion 20", r.rv)
	}
	s, _ = tb.subscribe(WatchQuery{ResourceVersion: "20"})
	if m, _ := s.Next(); m.Type != Synced {
		t.Errorf("resume from the list's resourceVersion: %s; expect SYNCED", m.Type)
	}
}

func TestBrokerSkipsResyncsAndHandlesTombstones(t *testing.T) {
	tb := newTestBroker(t, StreamOptions{})
	p := tb.apply("ns", "p", nil)
	s, _ := tb.subscribe(WatchQuery{})
	r := newReplica()
	r.objs = tb.state(nil)
	r.drain(t, s)

	tb.feed.OnUpdate(p, p)                                                     // informer resync
	tb.feed.OnUpdate(p, testPod(t, "ns", "p", "1", nil))                       // relist, unchanged
	tb.feed.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/q", Obj: p}) // never seen
	tb.feed.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/p", Obj: p})
	r.drain(t, s)
	want := []string{"SYNCED 1", "DELETED 1 ns/p"}
	if fmt.Sprint(r.types) != fmt.Sprint(want) {
		t.Errorf("got %v; expect %v", r.types, want)
	}
	if len(tb.state(nil)) != 0 {
		t.Errorf("broker still holds %v", tb.state(nil))
	}
}

func TestBrokerFilterEntriesAndExits(t *testing.T) {
	tb := newTestBroker(t, StreamOptions{})
	tb.apply("ns", "p", map[string]string{"app": "db"})
	s, _ := tb.subscribe(WatchQuery{Snapshot: true, LabelSelector: "app=web"})
	r := newReplica()
	tb.apply("ns", "p", map[string]string{"app": "web"}) // enters
	tb.apply("ns", "p", map[string]string{"app": "web", "v": "2"})
	tb.apply("ns", "p", map[string]string{"app": "db"}) // leaves
	tb.apply("ns", "p", map[string]string{"app": "db", "v": "3"})
	r.drain(t, s)
	want := []string{"SYNCED 1", "ADDED 2 ns/p", "MODIFIED 3 ns/p", "DELETED 4 ns/p"}
	if fmt.Sprint(r.types) != fmt.Sprint(want) {
		t.Errorf("got %v; expect %v", r.types, want)
	}
}

// Events from several namespaces' informers interleave out of
// resourceVersion order. Resuming must never skip one.
func TestBrokerResumeAcrossOutOfOrderShards(t *testing.T) {
	tb := newTestBroker(t, StreamOptions{})
	s, _ := tb.subscribe(WatchQuery{})
	in := func(ns, name, rv string) { tb.feed.OnAdd(testPod(t, ns, name, rv, nil), false) }
	in("a", "x", "10")
	in("a", "y", "12")
	in("b", "z", "11") // late: stamped 12
	in("a", "w", "13")
	all := newReplica()
	all.drain(t, s)
	want := []string{"SYNCED 0", "ADDED 10 a/x", "ADDED 12 a/y", "ADDED 12 b/z", "ADDED 13 a/w"}
	if fmt.Sprint(all.types) != fmt.Sprint(want) {
		t.Fatalf("got %v; expect %v", all.types, want)
	}
	// A client that saw "ADDED 12 a/y" resumes from 12: it must get b/z.
	r, _ := tb.subscribe(WatchQuery{ResourceVersion: "12"})
	got := newReplica()
	got.objs = map[string]string{"a/x": "10", "a/y": "12"}
	got.drain(t, r)
	if !maps.Equal(got.objs, tb.state(nil)) {
		t.Errorf("resumed from 12: %v (%v); expect %v", got.objs, got.types, tb.state(nil))
	}
}

// A late event shares the stamp of the event before it. Once the history
// has forgotten it, a client at that stamp (which saw the event that set
// it, not the late one) must resync: resuming would skip it.
func TestBrokerResumeAtAForgottenLateEventRequiresResync(t *testing.T) {
	tb := newTestBroker(t, StreamOptions{HistorySize: 2})
	tb.subscribe(WatchQuery{})
	in := func(ns, name, rv string) { tb.feed.OnAdd(testPod(t, ns, name, rv, nil), false) }
	in("a", "x", "10")
	in("b", "late", "9") // stamped 10
	in("a", "y", "11")
	in("a", "z", "12") // the history keeps 11 and 12: the late event at 10 is forgotten
	s, _ := tb.subscribe(WatchQuery{ResourceVersion: "10"})
	if m, _ := s.Next(); m.Type != ResyncRequired || !strings.Contains(m.Reason, "older than the retained history (from 10)") {
		t.Errorf("resume from 10 after its late event was forgotten: %s %q; expect RESYNC_REQUIRED", m.Type, m.Reason)
	}
	if oldest, expired := s.Expired(); !expired || oldest != 10 {
		t.Errorf("Expired() = %d, %v; expect 10, true", oldest, expired)
	}
	s, _ = tb.subscribe(WatchQuery{ResourceVersion: "11"})
	if m, _ := s.Next(); m.Type != MessageType(Added) || m.ResourceVersion != "12" {
		t.Errorf("resume from 11: %s %s; expect ADDED 12", m.Type, m.ResourceVersion)
	}
}

func TestBrokerBookmarksIdleSubscribers(t *testing.T) {
	tb := newTestBroker(t, StreamOptions{})
	tb.apply("ns", "p", nil)
	idle, _ := tb.subscribe(WatchQuery{LabelSelector: "app=none"})
	busy, _ := tb.subscribe(WatchQuery{})
	tb.apply("ns", "q", nil)
	tb.b.bookmark()
	ri, rb := newReplica(), newReplica()
	rb.objs = map[string]string{"ns/p": "1"}
	ri.drain(t, idle)
	rb.drain(t, busy)
	if fmt.Sprint(ri.types) != "[SYNCED 1 BOOKMARK 2]" {
		t.Errorf("idle subscriber: %v; expect SYNCED then a bookmark at 2", ri.types)
	}
	if fmt.Sprint(rb.types) != "[SYNCED 1 ADDED 2 ns/q]" {
		t.Errorf("busy subscriber: %v; expect no bookmark on the first tick", rb.types)
	}
	tb.b.bookmark()
	rb.drain(t, busy)
	if last := rb.types[len(rb.types)-1]; last != "BOOKMARK 2" {
		t.Errorf("busy subscriber after an idle tick: %v", rb.types)
	}
}

func TestMessageJSON(t *testing.T) {
	tb := newTestBroker(t, StreamOptions{})
	tb.apply("ns", "p", map[string]string{"app": "web"})
	merge, _ := tb.subscribe(WatchQuery{Snapshot: true, Diff: MergePatch})
	jp, _ := tb.subscribe(WatchQuery{Diff: JSONPatch})
	tb.apply("ns", "p", map[string]string{"tier": "front"})
	decode := func(m Message) map[string]any {
		var buf bytes.Buffer
		if _, err := m.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		if appended := m.AppendTo([]byte("x")); string(appended[1:]) != buf.String() || m.Len() != buf.Len() {
			t.Errorf("AppendTo gives %s (Len %d); WriteTo %s", appended[1:], m.Len(), buf.Bytes())
		}
		var v map[string]any
		if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
			t.Fatalf("%s is not JSON: %v", buf.Bytes(), err)
		}
		return v
	}
	next := func(s *eventSub) Message { m, _ := s.Next(); return m }
	if v := decode(next(merge)); v["type"] != "ADDED" || v["resourceVersion"] != "1" || v["object"] == nil {
		t.Errorf("snapshot item %v", v)
	}
	if v := decode(next(merge)); fmt.Sprint(v) != "map[resourceVersion:1 type:SYNCED]" {
		t.Errorf("synced %v", v)
	}
	v := decode(next(merge))
	if fmt.Sprint(v["patch"]) != "map[metadata:map[labels:map[app:<nil> tier:front] resourceVersion:2]]" {
		t.Errorf("merge patch %v", v["patch"])
	}
	next(jp)
	v = decode(next(jp))
	if fmt.Sprint(v["patch"]) != "[map[op:remove path:/metadata/labels/app] map[op:add path:/metadata/labels/tier value:front] map[op:replace path:/metadata/resourceVersion value:2]]" {
		t.Errorf("json patch %v", v["patch"])
	}
	resync := Message{Type: ResyncRequired, Reason: `queue "full"`}
	if v := decode(resync); v["reason"] != `queue "full"` {
		t.Errorf("resync %v", v)
	}
	// Encoded once: both subscribers' messages share the event's bytes.
	evs, _ := tb.b.log.Since(tb.b.log.Oldest())
	ev := evs[len(evs)-1]
	if &ev.head(Modified)[0] != &ev.head(Modified)[0] || &ev.tail(Modified, JSONPatch)[0] != &ev.tail(Modified, JSONPatch)[0] {
		t.Error("event frames are rebuilt per call")
	}
}

func TestLabelsParse(t *testing.T) {
	o := testPod(t, "ns", "p", "1", map[string]string{"a": "1", "b.io/c": "x"})
	if got := parseLabels(o.labels()); !maps.Equal(got, labels.Set{"a": "1", "b.io/c": "x"}) {
		t.Errorf("labels %v", got)
	}
}

// Published marks the events a subscriber receives as they happen, with
// the time the broker published them, and nothing else: not snapshot
// items, not events replayed on resume, not control messages. The
// delivery metric counts exactly these.
func TestBrokerPublishedOnlyForLiveEvents(t *testing.T) {
	tb := newTestBroker(t, StreamOptions{BookmarkInterval: time.Second})
	tb.apply("ns", "a", nil)
	tb.apply("ns", "b", nil)
	live, _ := tb.subscribe(WatchQuery{Snapshot: true})
	var kinds []string
	next := func(s *eventSub) {
		for {
			m, ok := s.Next()
			if !ok {
				return
			}
			at, isLive := m.Published()
			kinds = append(kinds, fmt.Sprintf("%s:%v", m.Type, isLive))
			if isLive && !at.Equal(tb.clock.Now()) {
				t.Errorf("%s published at %v; the clock read %v", m.Type, at, tb.clock.Now())
			}
		}
	}
	next(live) // the snapshot of a and b, then SYNCED
	tb.clock.Advance(time.Minute)
	tb.apply("ns", "a", map[string]string{"x": "1"})
	tb.delete("ns", "b")
	next(live)
	tb.b.bookmark() // the subscription received events since the last round: none
	tb.b.bookmark()
	next(live)
	want := "[ADDED:false ADDED:false SYNCED:false MODIFIED:true DELETED:true BOOKMARK:false]"
	if fmt.Sprint(kinds) != want {
		t.Errorf("live subscription: got %v; expect %v", kinds, want)
	}

	// Resumed from before a's update: the update and the delete are
	// replayed, not live; an event after the resume is.
	kinds = nil
	resumed, _ := tb.subscribe(WatchQuery{ResourceVersion: "2"})
	next(resumed)
	tb.apply("ns", "c", nil)
	next(resumed)
	want = "[MODIFIED:false DELETED:false SYNCED:false ADDED:true]"
	if fmt.Sprint(kinds) != want {
		t.Errorf("resumed subscription: got %v; expect %v", kinds, want)
	}
}

// blockingSelector is a selector whose every match waits for gate: a
// filter as slow as a test wants.
type blockingSelector struct {
	labels.Selector
	gate chan struct{}
}

func (b blockingSelector) Matches(l labels.Labels) bool {
	<-b.gate
	return b.Selector.Matches(l)
}

// A subscription whose selector is long is filtered by its own consumer:
// however slow its filter, the informer's handler and the fan-out go on,
// and the other subscribers get their events.
func TestCostlyFilterHoldsUpNoOne(t *testing.T) {
	tb := newTestBroker(t, StreamOptions{})
	terms := make([]string, cheapTerms+1)
	for i := range terms {
		terms[i] = fmt.Sprintf("k%d!=x", i)
	}
	costly, _ := tb.subscribe(WatchQuery{LabelSelector: strings.Join(terms, ",")})
	other, _ := tb.subscribe(WatchQuery{})
	gate := make(chan struct{})
	costly.filter.selector = blockingSelector{costly.filter.selector, gate}
	for _, s := range []*eventSub{costly, other} {
		if m, _ := s.Next(); m.Type != Synced {
			t.Fatalf("first message %s; expect SYNCED", m.Type)
		}
	}

	handled := make(chan struct{})
	go func() {
		tb.apply("ns", "p", nil) // the informer's handler, then the fan-out
		close(handled)
	}()
	select {
	case <-handled:
	case <-time.After(15 * time.Second):
		close(gate)
		t.Fatal("the informer's handler or the fan-out waited for a subscriber's filter")
	}
	if m, ok := other.Next(); !ok || m.Type != MessageType(Added) {
		t.Errorf("the other subscriber got %s %v; expect ADDED at once", m.Type, ok)
	}
	close(gate) // the costly subscription's consumer filters its event now
	if m, ok := costly.Next(); !ok || m.Type != MessageType(Added) {
		t.Errorf("the costly subscription got %s %v; expect ADDED", m.Type, ok)
	}
}

// The informer's handler filters for no one: even a short selector is
// matched by the fan-out, on the broker's goroutine.
func TestInformerHandlerFiltersForNoOne(t *testing.T) {
	tb := newTestBroker(t, StreamOptions{})
	s, _ := tb.subscribe(WatchQuery{LabelSelector: "app=web"})
	tb.b.fanout() // it has joined
	gate := make(chan struct{})
	s.filter.selector = blockingSelector{s.filter.selector, gate}
	handled := make(chan struct{})
	go func() {
		tb.b.handler().OnAdd(testPod(t, "ns", "p", "1", map[string]string{"app": "web"}), false)
		close(handled)
	}()
	select {
	case <-handled:
	case <-time.After(15 * time.Second):
		t.Error("the informer's handler waited for a subscriber's filter")
	}
	close(gate)
	tb.b.fanout()
	s.Next() // SYNCED
	if m, ok := s.Next(); !ok || m.Type != MessageType(Added) {
		t.Errorf("after the fan-out: %s %v; expect ADDED", m.Type, ok)
	}
}

// Before the first subscription, which starts the broker once the
// informers have synced, no one can be offered an event: every stream
// starts after the events published before it. So the initial list's
// events are neither queued for the fan-out nor wake its goroutine (a
// thread woken per listed object); once started, every event is both,
// and the subscription gets the listed objects in its snapshot and the
// later event from its queue.
func TestBrokerWakesNoFanOutBeforeTheFirstSubscription(t *testing.T) {
	tb := newTestBroker(t, StreamOptions{})
	h := tb.b.handler() // without the helper's fan-out after each event
	for i := range 3 {
		h.OnAdd(testPod(t, "ns", fmt.Sprint("listed-", i), fmt.Sprint(i+1), nil), true)
	}
	if n, pending := len(tb.b.kick), len(tb.b.pending); n != 0 || pending != 0 {
		t.Fatalf("before any subscription: fan-out woken %d, events pending %d; expect 0 and 0", n, pending)
	}
	s, _ := tb.subscribe(WatchQuery{Snapshot: true})
	tb.b.fanout()
	<-tb.b.kick // the subscription's own wake-up
	h.OnAdd(testPod(t, "ns", "later", "4", nil), false)
	if n, pending := len(tb.b.kick), len(tb.b.pending); n != 1 || pending != 1 {
		t.Fatalf("after a subscription: fan-out woken %d, events pending %d; expect 1 and 1", n, pending)
	}
	tb.b.fanout()
	r := newReplica()
	r.drain(t, s)
	if got := slices.Sorted(maps.Keys(r.objs)); !slices.Equal(got, []string{"ns/later", "ns/listed-0", "ns/listed-1", "ns/listed-2"}) {
		t.Errorf("the subscriber holds %v; expect the three listed pods and the later one", got)
	}
}
