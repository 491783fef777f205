package fakeapi

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func TestWatchFromResourceVersionGetsExactlyTheLaterEvents(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 1})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Apply(Pods, podJSON("shop", "before", nil)))
	rv := listRV(t, srv.URL+"/api/v1/pods")
	must(c.Apply(Pods, podJSON("shop", "a", nil)))
	must(c.Apply(Nodes, []byte(`{"metadata":{"name":"node-extra"}}`))) // other resource: not seen
	must(c.Apply(Pods, podJSON("shop", "a", map[string]string{"x": "1"})))
	must(c.Apply(Pods, podJSON("media", "b", nil)))
	must(c.Delete(Pods, "shop", "before"))

	w := openWatch(t, srv.URL+"/api/v1/pods?watch=true&resourceVersion="+rv)
	live := openWatch(t, srv.URL+"/api/v1/namespaces/shop/pods?watch=1&resourceVersion="+rv)
	must(c.Apply(Pods, podJSON("shop", "c", nil)))

	want := []string{"ADDED a", "MODIFIED a", "ADDED b", "DELETED before", "ADDED c"}
	var got []string
	prev := rv
	for _, e := range w.collect(t, len(want)) {
		got = append(got, e.Type+" "+e.name())
		if rvNum(t, e.rv()) <= rvNum(t, prev) {
			t.Errorf("event %s %s at rv %s, not after %s", e.Type, e.name(), e.rv(), prev)
		}
		prev = e.rv()
		if gjson.GetBytes(e.Object, "kind").Str != "Pod" || gjson.GetBytes(e.Object, "apiVersion").Str != "v1" {
			t.Errorf("event object without kind/apiVersion: %.80s", e.Object)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	if prev != c.ResourceVersion() {
		t.Errorf("last event at %s, cluster at %s", prev, c.ResourceVersion())
	}
	w.quiet(t)

	got = nil
	for _, e := range live.collect(t, 4) {
		got = append(got, e.Type+" "+e.name())
	}
	if want := []string{"ADDED a", "MODIFIED a", "DELETED before", "ADDED c"}; !slices.Equal(got, want) {
		t.Errorf("namespaced watch = %v, want %v", got, want)
	}
	live.quiet(t)
}

func TestWatchFromNowAndDeletedCarriesNewVersion(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 1})
	_ = c.Apply(Pods, podJSON("shop", "old", nil))
	for _, rv := range []string{"", "0"} {
		w := openWatch(t, srv.URL+"/api/v1/pods?watch=true&resourceVersion="+rv)
		w.quiet(t)
		w.cancel()
	}
	w := openWatch(t, srv.URL+"/api/v1/pods?watch=true")
	if err := c.Delete(Pods, "shop", "old"); err != nil {
		t.Fatal(err)
	}
	e, _ := w.next(t)
	if e.Type != "DELETED" || e.name() != "old" || e.rv() != c.ResourceVersion() {
		t.Errorf("got %s %s at %s, want DELETED old at %s", e.Type, e.name(), e.rv(), c.ResourceVersion())
	}
}

func TestWatchSelectorTransitions(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 1})
	w := openWatch(t, srv.URL+"/api/v1/pods?watch=true&labelSelector=canary%3Dtrue")
	steps := []struct {
		labels map[string]string
		want   string
	}{
		{nil, ""}, // created, not matching: nothing
		{map[string]string{"canary": "true"}, "ADDED"}, // starts matching
		{map[string]string{"canary": "true", "v": "2"}, "MODIFIED"},
		{map[string]string{"v": "2"}, "DELETED"}, // stops matching
		{map[string]string{"v": "3"}, ""},
	}
	for i, s := range steps {
		if err := c.Apply(Pods, podJSON("shop", "p", s.labels)); err != nil {
			t.Fatal(err)
		}
		if s.want == "" {
			w.quiet(t)
			continue
		}
		e, _ := w.next(t)
		if e.Type != s.want || e.rv() != c.ResourceVersion() {
			t.Errorf("step %d: %s at %s, want %s at %s", i, e.Type, e.rv(), s.want, c.ResourceVersion())
		}
	}
}

func TestWatchTooOldResourceVersionIsGone(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 1, HistorySize: 10})
	rv := c.ResourceVersion()
	c.Step()
	c.CompactHistory()
	w := openWatch(t, srv.URL+"/api/v1/pods?watch=true&resourceVersion="+rv)
	e, _ := w.next(t)
	st := gjson.ParseBytes(e.Object)
	if e.Type != "ERROR" || st.Get("code").Int() != http.StatusGone || st.Get("reason").Str != "Expired" ||
		st.Get("kind").Str != "Status" {
		t.Errorf("got %s %s, want ERROR 410 Expired", e.Type, e.Object)
	}
	w.ended(t)

	// The current version still resumes after compaction.
	ok := openWatch(t, srv.URL+"/api/v1/pods?watch=true&resourceVersion="+c.ResourceVersion())
	_ = c.Apply(Pods, podJSON("shop", "x", nil))
	if e, _ := ok.next(t); e.Type != "ADDED" {
		t.Errorf("watch from current rv: %s", e.Type)
	}

	// The bounded history forgets on its own.
	rv = c.ResourceVersion()
	for i := range 11 {
		_ = c.Apply(Pods, podJSON("shop", fmt.Sprint("h", i), nil))
	}
	gone := openWatch(t, srv.URL+"/api/v1/pods?watch=true&resourceVersion="+rv)
	if e, _ := gone.next(t); e.Type != "ERROR" {
		t.Errorf("watch past bounded history: %s, want ERROR", e.Type)
	}
}

func TestDropWatchesEndsStreams(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 1})
	var ws []*watchStream
	for _, p := range []string{"/api/v1/pods", "/api/v1/nodes", "/apis/apps/v1/namespaces/shop/deployments"} {
		ws = append(ws, openWatch(t, srv.URL+p+"?watch=true&resourceVersion="+c.ResourceVersion()))
	}
	waitWatchers(t, c, 3)
	c.DropWatches()
	for _, w := range ws {
		w.ended(t)
	}
	waitWatchers(t, c, 0)
}

func TestWatchTimeoutSeconds(t *testing.T) {
	t.Parallel()
	_, srv := newTestCluster(t, Options{Seed: 1})
	start := time.Now()
	w := openWatch(t, srv.URL+"/api/v1/pods?watch=true&timeoutSeconds=1")
	w.ended(t)
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("stream ended after %v, want about 1s", d)
	}
}

func TestWatchBookmarks(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 1, BookmarkInterval: 50 * time.Millisecond})
	w := openWatch(t, srv.URL+"/api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion="+c.ResourceVersion())
	_ = c.Apply(Pods, podJSON("shop", "x", nil)) // not a node: only the bookmark tells
	for {
		e, _ := w.next(t)
		if e.Type != "BOOKMARK" {
			t.Fatalf("got %s, want BOOKMARK", e.Type)
		}
		o := gjson.ParseBytes(e.Object)
		if o.Get("kind").Str != "Node" || o.Get("metadata.name").Exists() {
			t.Fatalf("bookmark object %s", e.Object)
		}
		if e.rv() == c.ResourceVersion() {
			break
		}
	}
	// A watch without allowWatchBookmarks gets none, though a bookmark
	// interval passes while it is open: the bookmarking watch sees one.
	noBookmarks := openWatch(t, srv.URL+"/api/v1/nodes?watch=true")
	waitWatchers(t, c, 2)
	for range 2 { // the second is a whole interval after noBookmarks opened
		if e, _ := w.next(t); e.Type != "BOOKMARK" {
			t.Fatalf("got %s, want BOOKMARK", e.Type)
		}
	}
	noBookmarks.quiet(t)
}

func TestSlowWatcherIsClosedNotWaitedFor(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Options{Seed: 1, WatchBuffer: 4})
	w := &watcher{res: mustResource(Pods), ch: make(chan frame, 4), stop: make(chan struct{})}
	if _, err := c.openWatch(w, &query{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { // nobody reads w.ch: churn must go on regardless
		for i := range 50 {
			_ = c.Apply(Pods, podJSON("shop", fmt.Sprint("p", i), nil))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("changes blocked on a slow watcher")
	}
	select {
	case <-w.stop:
	default:
		t.Fatal("overflowing watcher not closed")
	}
	if len(w.ch) != 4 {
		t.Errorf("buffer holds %d events, want 4", len(w.ch))
	}
	waitWatchers(t, c, 0)
}

func rvNum(t *testing.T, rv string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	return n
}

// waitWatchers waits until the cluster has n open watches. A client-go
// reflector whose list-and-watch ended (a 410 relists) waits its backoff
// first: 0.8 s, doubled after each ending within two minutes and
// jittered up to twice that, so a few drops in a row can hold one
// watcher back more than ten seconds on a loaded machine.
func waitWatchers(t *testing.T, c *testCluster, n int) {
	t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	for {
		c.mu.Lock()
		got := len(c.watchers)
		c.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d open watches, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitChanges waits until the cluster has made n more changes.
func waitChanges(t *testing.T, c *testCluster, n uint64) {
	t.Helper()
	from := rvNum(t, c.ResourceVersion())
	deadline := time.Now().Add(10 * time.Second)
	for rvNum(t, c.ResourceVersion()) < from+n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d changes after resourceVersion %d", n, from)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWatchListIsRefused: the streaming watch-list protocol is not served,
// and a client that asks for it is told so rather than silently given a
// watch without its initial events.
func TestWatchListIsRefused(t *testing.T) {
	t.Parallel()
	_, srv := newTestCluster(t, Options{Seed: 1})
	for _, q := range []string{"watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
		"watch=true&sendInitialEvents=false", "sendInitialEvents=true"} {
		code, body := get(t, srv.URL+"/api/v1/pods?"+q)
		if code != http.StatusBadRequest || gjson.GetBytes(body, "reason").Str != "BadRequest" ||
			!strings.Contains(gjson.GetBytes(body, "message").Str, "sendInitialEvents") {
			t.Errorf("%s: %d %s, want 400 naming sendInitialEvents", q, code, body)
		}
	}
}
