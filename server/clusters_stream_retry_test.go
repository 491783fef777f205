package server

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// switchedAuthorizer hangs every review until its context ends while
// hang is set (an API server that does not answer), and allows
// everything once it is not.
type switchedAuthorizer struct {
	hang  atomic.Bool
	asked atomic.Int64
}

func (s *switchedAuthorizer) Authorize(ctx context.Context, _ auth.Attributes) (bool, string, error) {
	s.asked.Add(1)
	if !s.hang.Load() {
		return true, "", nil
	}
	<-ctx.Done()
	return false, "", ctx.Err()
}

// TestFleetStreamBesideAHungAuthorizer: with b's access reviews hanging
// and an authorization timeout of an hour, a stream across a and b opens
// with a's snapshot and SYNCED, and a's changes flow, while b's part is
// one CLUSTER message, a 503 saying authorization could not be asked and
// when it is tried again; once b's reviews answer, b's part opens with
// its snapshot and says it is back. On code that waits for the
// authorization timeout, the stream does not open and the test fails on
// its first wait.
func TestFleetStreamBesideAHungAuthorizer(t *testing.T) {
	st, err := auth.ParseStaticTokens([]byte("s3cret,alice,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	hung := &switchedAuthorizer{}
	hung.hang.Store(true)
	sf := startStreamFleet(t, func(cluster string) auth.Authorizer {
		if cluster == "b" {
			return hung
		}
		return fixedAuthorizer(func(auth.Attributes) bool { return true })
	}, AuthOptions{Authenticator: st}, "a", "b")
	for _, s := range sf.srv {
		s.opts.Auth.Timeout, s.opts.Auth.ClusterTimeout = time.Hour, 50*time.Millisecond
	}

	opened := make(chan *sseClient, 1)
	go func() {
		opened <- openSSE(t, sf.url+"/api/v1/pods?watch=true", http.Header{"Authorization": {"Bearer s3cret"}})
	}()
	var c *sseClient
	select {
	case c = <-opened:
	case <-time.After(15 * time.Second):
		t.Fatal("the stream did not open within 15s: b's hung review holds it up")
	}
	if c.resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", c.resp.StatusCode)
	}
	var mu sync.Mutex
	var bs []string
	fr := newFleetReplica(nil)
	go func() {
		for ev := range c.events {
			if gjson.Get(ev.data, "cluster").Str == "b" {
				mu.Lock()
				bs = append(bs, ev.data)
				mu.Unlock()
			}
			fr.apply([]byte(ev.data))
		}
	}()
	fr.waitEqual(t, sf, "a's snapshot", "a")
	sf.change(t, "a", 3)
	fr.waitEqual(t, sf, "a's changes", "a")
	mu.Lock()
	if len(bs) != 1 {
		t.Fatalf("b's messages %v while its reviews hang; expect one CLUSTER message", bs)
	}
	m := gjson.Parse(bs[0])
	if m.Get("type").Str != "CLUSTER" || m.Get("status").Int() != 503 ||
		!strings.Contains(m.Get("reason").Str, `authorization could not be asked: cluster "b"'s API server did not answer the access review within 50ms`) ||
		m.Get("retryAfterSeconds").Int() < 1 {
		t.Errorf("b's message %s; expect a 503 saying authorization could not be asked, and when it is tried again", bs[0])
	}
	mu.Unlock()

	// b's reviews answer again: its part is tried again and opens.
	hung.hang.Store(false)
	fr.waitEqual(t, sf, "b's snapshot once its reviews answer", "b")
	sf.change(t, "b", 2)
	fr.waitEqual(t, sf, "b's changes", "b")
	if got := fr.statesOf("b"); len(got) != 2 || got[0] != "503 synced" || got[1] != "200 synced" {
		t.Errorf("b's CLUSTER messages %v; expect 503 then 200, each once", got)
	}
}

// fakeClock is a stream's clock the test moves: its wake-ups run when
// it passes them.
type fakeClock struct {
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped *bool
}

func (fc *fakeClock) clock() streamClock {
	return streamClock{
		now: func() time.Time { return fc.now },
		after: func(d time.Duration, f func()) func() bool {
			stopped := new(bool)
			fc.timers = append(fc.timers, fakeTimer{at: fc.now.Add(d), f: f, stopped: stopped})
			return func() bool { *stopped = true; return true }
		},
	}
}

func (fc *fakeClock) advance(d time.Duration) {
	fc.now = fc.now.Add(d)
	kept := fc.timers[:0]
	for _, tm := range fc.timers {
		switch {
		case *tm.stopped:
		case !tm.at.After(fc.now):
			tm.f()
		default:
			kept = append(kept, tm)
		}
	}
	fc.timers = kept
}

// TestFleetStreamSlowClientBackoff: a client that keeps overflowing a's
// part (a queue of 4 events, and changes of many more while it does not
// read) gets that part reopened with its snapshot at once the first
// time, then only after a wait that doubles each time (1s, 2s, 4s on the
// stream's clock), each said in a CLUSTER message with
// retryAfterSeconds, and its return said too; b's part is left alone;
// after a quiet period the next overflow reopens at once again. The
// clock is the test's, moved by hand: reopenings are counted, not timed.
func TestFleetStreamSlowClientBackoff(t *testing.T) {
	sf := startStreamFleet(t, nil, AuthOptions{}, "a", "b")
	sf.shared.streams.opts.QueueSize = 4
	var mu sync.Mutex
	opens := map[string]int{}
	count := func(c string) int {
		mu.Lock()
		defer mu.Unlock()
		return opens[c]
	}
	inner := resourceOpener(context.Background(), nil, "pods", cache.WatchQuery{Namespace: "probe"})
	fa := &fleetAsk{kind: "pods", names: []string{"a", "b"}, snapshot: true,
		open: func(cs *Server, name, from string, snapshot bool, notify chan<- struct{}) (cache.Subscription, error) {
			mu.Lock()
			opens[name]++
			mu.Unlock()
			return inner(cs, name, from, snapshot, notify)
		}}
	fs, err := sf.front.startFleetStream(fa, make(chan struct{}, 1), "")
	if err != nil {
		t.Fatal(err)
	}
	defer fs.close()
	fc := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	fs.clock = fc.clock()

	fr := newFleetReplica(nil)
	var msgs []gjson.Result // the stream's messages of a, in order
	drain := func() {
		for {
			it, ok := fs.nextItem()
			if !ok {
				return
			}
			b := it.raw
			if b == nil {
				b = spliceTag(it.tag, &it.m)
			}
			fr.apply(b)
			if m := gjson.ParseBytes(b); m.Get("cluster").Str == "a" {
				msgs = append(msgs, m)
			}
		}
	}
	seen := func(typ string) int {
		n := 0
		for _, m := range msgs {
			if m.Get("type").Str == typ {
				n++
			}
		}
		return n
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		cachetest.Eventually(t, what, func() bool { drain(); return cond() })
	}
	waitFor("a and b synced", func() bool { return fr.cluster("a").isSynced() && fr.cluster("b").isSynced() })

	// overflow makes many changes in a while the client reads nothing,
	// then reads until a's part ends.
	overflows := 0
	overflow := func() {
		t.Helper()
		sf.change(t, "a", 12)
		cachetest.Eventually(t, "a's cache has the changes", func() bool {
			return len(cachetest.State(t, sf.fx["a"].Cache, "pods", cache.ListQuery{Namespace: "probe"})) ==
				len(sf.served(t, "a", "probe")())
		})
		overflows++
		waitFor("a's part overflows", func() bool { return seen("RESYNC_REQUIRED") == overflows })
	}
	// retryAfter is the last CLUSTER message's wait for a, 0 when the
	// last CLUSTER message is none of a wait.
	retryAfter := func() int64 {
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Get("type").Str == "CLUSTER" {
				return msgs[i].Get("retryAfterSeconds").Int()
			}
		}
		return 0
	}
	back := func(opens int) {
		t.Helper()
		waitFor("a reopened with its snapshot", func() bool { return count("a") == opens && seen("SYNCED") == opens })
		fr.cluster("a").waitEqual(t, "a's snapshot", sf.served(t, "a", "probe"))
	}

	overflow() // the first: reopened at once
	back(2)
	if w := retryAfter(); w != 0 {
		t.Errorf("the first overflow said a wait of %ds; expect a reopening at once", w)
	}
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		overflow()
		drain()
		if w := retryAfter(); w != int64(wait/time.Second) {
			t.Fatalf("overflow %d: the CLUSTER message says a wait of %ds; expect %s", overflows, w, wait)
		}
		fc.advance(wait - time.Millisecond)
		drain()
		if n := count("a"); n != 2+i {
			t.Fatalf("overflow %d: a was opened %d times before its wait was over; expect %d", overflows, n, 2+i)
		}
		fc.advance(time.Millisecond)
		back(3 + i)
	}
	if got := fr.statesOf("a"); len(got) != 7 || got[len(got)-1] != "200 synced" {
		t.Errorf("a's CLUSTER messages %v; expect synced, then each wait and each return", got)
	}

	// Quiet for long enough: the next overflow is forgiven again.
	fc.advance(partQuiet)
	overflow()
	back(6)
	if count("b") != 1 {
		t.Errorf("b was opened %d times; expect once, its part untouched", count("b"))
	}
	if err := fr.failed(); err != nil {
		t.Fatal(err)
	}
}

// TestFleetStreamRetiredInsideItsSnapshot: a cluster whose server is
// retired while its part is inside its snapshot has no position to come
// back from; when it serves again, its part starts again with a
// RESYNC_REQUIRED (the client drops the part of the snapshot it holds),
// then its whole snapshot and one SYNCED: never an object ADDED twice.
func TestFleetStreamRetiredInsideItsSnapshot(t *testing.T) {
	sf := startStreamFleet(t, nil, AuthOptions{}, "a", "b")
	fa := &fleetAsk{kind: "pods", names: []string{"a", "b"}, snapshot: true,
		open: resourceOpener(context.Background(), nil, "pods", cache.WatchQuery{})}
	fs, err := sf.front.startFleetStream(fa, make(chan struct{}, 1), "")
	if err != nil {
		t.Fatal(err)
	}
	defer fs.close()
	fr := newFleetReplica(nil)
	var types []string // a's messages' types, in order
	next := func() bool {
		it, ok := fs.nextItem()
		if !ok {
			return false
		}
		b := it.raw
		if b == nil {
			b = spliceTag(it.tag, &it.m)
		}
		fr.apply(b)
		if m := gjson.ParseBytes(b); m.Get("cluster").Str == "a" {
			types = append(types, m.Get("type").Str)
		}
		return true
	}
	cachetest.Eventually(t, "a's first snapshot item", func() bool {
		for next() {
			if len(types) > 0 && types[len(types)-1] == "ADDED" {
				return true
			}
		}
		return false
	})
	sf.srv["a"].Retire(`cluster "a" restarted: its configuration changed`)
	// Read nothing more until the stream knows: a stays inside its snapshot.
	cachetest.Eventually(t, "a's retirement seen", func() bool { return fs.parts[0].retired.Load() })
	cachetest.Eventually(t, "a reported failed", func() bool {
		for next() {
		}
		return fr.saw("a 503 failed")
	})
	sf.srv["a"] = New(sf.fx["a"].Cache, Options{ClusterName: "a", Shared: sf.shared, Logger: quiet()})
	sf.fleet.set([]string{"a", "b"}, maps.Clone(sf.srv))
	cachetest.Eventually(t, "a's snapshot again", func() bool {
		for next() {
		}
		return fr.cluster("a").isSynced()
	})
	fr.waitEqual(t, sf, "a and b", "a", "b")
	i := slices.Index(types, "RESYNC_REQUIRED")
	if i < 0 || slices.Index(types, "SYNCED") < i || slices.Contains(types[:i], "SYNCED") {
		t.Errorf("a's messages %v; expect part of a snapshot, RESYNC_REQUIRED, then the whole snapshot and SYNCED", types)
	}
	if !slices.Equal(fr.resyncs, []string{"a"}) { // read by this goroutine alone
		t.Errorf("resyncs %v; expect a's once", fr.resyncs)
	}
}

// TestPartBackoff: a part's waits: an overflow at once, then doubling to
// the bound; a failed open at least partBackoffFirst, then doubling; a
// quiet period forgets them.
func TestPartBackoff(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		floor time.Duration
		want  []time.Duration
	}{
		{"overflows", 0, []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, partBackoffMax, partBackoffMax}},
		{"failed opens", partBackoffFirst, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, partBackoffMax, partBackoffMax}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b partBackoff
			now := t0
			for i, want := range tc.want {
				if got := b.fail(now, tc.floor); got != want {
					t.Errorf("failure %d: wait %s; expect %s", i+1, got, want)
				}
				now = now.Add(time.Second)
			}
			if got := b.fail(now.Add(partQuiet), tc.floor); got != tc.want[0] {
				t.Errorf("after a quiet period: wait %s; expect %s", got, tc.want[0])
			}
		})
	}
}
