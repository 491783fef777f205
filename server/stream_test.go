package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func probePod(ns, name, node, app string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q,"labels":{"app":%q}},
		"spec":{"nodeName":%q,"containers":[{"name":"c","image":"probe:1"}]},"status":{"phase":"Running"}}`, name, ns, app, node)
}

// churn makes n changes: demo steps, and creates and deletes of our own.
func churn(t *testing.T, ss *streamServer, n int) {
	for i := range n {
		ss.f.Sim.Step()
		switch i % 7 {
		case 2:
			if err := ss.f.Sim.Apply("pods", probePod("probe", fmt.Sprint("p-", i%5), "node-2", "web")); err != nil {
				t.Error(err)
			}
		case 5:
			ss.f.Sim.Delete("pods", "probe", fmt.Sprint("p-", i%3)) // may be absent; p-3 and p-4 stay
		}
	}
}

// followWS applies every message of a single-resource socket to r.
func followWS(conn *websocket.Conn, r *replica) {
	go func() {
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			r.apply(msg)
		}
	}()
}

// The consistency property, over every transport: clients that apply the
// snapshot and then the events hold exactly what the cache (and so the API
// server) holds, while creates, updates and deletes run concurrently.
func TestStreamsRebuildTheStateUnderChurn(t *testing.T) {
	ss := startStreams(t, Options{})
	var churned sync.WaitGroup
	churned.Go(func() { churn(t, ss, 200) })

	type check struct {
		name     string
		r        *replica
		resource string
		q        cache.ListQuery
	}
	var checks []check
	sse := newReplica(nil)
	openSSE(t, ss.url+"/api/v1/pods?watch=true", nil).follow(sse)
	checks = append(checks, check{"SSE pods", sse, "pods", cache.ListQuery{}})

	ws := newReplica(nil)
	followWS(dialWS(t, ss.wsURL("/api/v1/pods?watch=true&index=node&value=node-2&diff=jsonpatch"), nil), ws)
	checks = append(checks, check{"WebSocket pods on node-2", ws, "pods", cache.ListQuery{Index: "node", Value: "node-2"}})

	mux := openMux(t, ss)
	checks = append(checks,
		check{"mux pods", mux.subscribe(t, "all", `,"resource":"pods","diff":"merge"`, nil), "pods", cache.ListQuery{}},
		check{"mux probe pods", mux.subscribe(t, "probe", `,"resource":"po","namespace":"probe","labelSelector":"app=web"`, nil),
			"pods", cache.ListQuery{Namespace: "probe", LabelSelector: "app=web"}},
		check{"mux nodes", mux.subscribe(t, "nodes", `,"resource":"nodes"`, nil), "nodes", cache.ListQuery{}})

	churned.Wait()
	cachetest.Eventually(t, "the cache equals the API server", func() bool {
		return maps.Equal(cachetest.State(t, ss.f.Cache, "pods", cache.ListQuery{}), simPods(ss))
	})
	for _, c := range checks {
		c.r.waitEqual(t, c.name+" rebuilds the cache", func() map[string]string { return cachetest.State(t, ss.f.Cache, c.resource, c.q) })
		if len(c.r.objs) == 0 || len(c.r.events) == 0 {
			t.Errorf("%s: %d objects, %d events: the check proves little", c.name, len(c.r.objs), len(c.r.events))
		}
	}
	if ws.patches == 0 || checks[2].r.patches == 0 {
		t.Errorf("no MODIFIED event carried a patch (jsonpatch %d, merge %d)", ws.patches, checks[2].r.patches)
	}
}

func TestSSEResumesWithLastEventID(t *testing.T) {
	ss := startStreams(t, Options{})
	steady := newReplica(nil)
	openSSE(t, ss.url+"/api/v1/pods?watch=true", nil).follow(steady)

	first := openSSE(t, ss.url+"/api/v1/pods?watch=true", nil)
	left := newReplica(nil)
	lastID := ""
	for lastID == "" || len(left.events) < 3 {
		if len(left.events) == 0 {
			churn(t, ss, 2)
		}
		ev, ok := first.next(t)
		if !ok {
			t.Fatal("stream ended")
		}
		if ev.event == "ADDED" && !ev.hasID && left.synced {
			t.Fatalf("event after SYNCED without an id: %+v", ev)
		}
		left.apply([]byte(ev.data))
		if ev.hasID {
			lastID = ev.id
		}
		if len(left.events) < 3 {
			churn(t, ss, 1)
		}
	}
	first.close()
	held, _, _ := left.snapshot()
	churn(t, ss, 30)
	// Let everything settle, so the resumed stream and the steady one can
	// be compared event for event.
	cachetest.Eventually(t, "the cache equals the API server", func() bool {
		return maps.Equal(cachetest.State(t, ss.f.Cache, "pods", cache.ListQuery{}), simPods(ss))
	})
	steady.waitEqual(t, "the steady client catches up", func() map[string]string { return cachetest.State(t, ss.f.Cache, "pods", cache.ListQuery{}) })

	resumed := newReplica(held)
	resumed.synced = true // it continues a synced stream
	again := openSSE(t, ss.url+"/api/v1/pods?watch=true", http.Header{"Last-Event-ID": {lastID}})
	var got []string
	for {
		ev, ok := again.next(t)
		if !ok {
			t.Fatal("stream ended")
		}
		if ev.event == "SYNCED" {
			break
		}
		resumed.apply([]byte(ev.data))
		got = append(got, ev.event+" "+ev.id+" "+gjson.Get(ev.data, "object.metadata.namespace").Str+"/"+gjson.Get(ev.data, "object.metadata.name").Str)
	}
	// Exactly the events the steady client saw after lastID.
	steady.mu.Lock()
	var want []string
	for i, e := range steady.events {
		if strings.Split(e, " ")[1] == lastID {
			want = steady.events[i+1:]
		}
	}
	steady.mu.Unlock()
	if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("resumed after %s:\n got %v\nwant %v", lastID, got, want)
	}
	again.follow(resumed)
	churn(t, ss, 5)
	resumed.waitEqual(t, "the resumed client holds the cache's state", func() map[string]string { return cachetest.State(t, ss.f.Cache, "pods", cache.ListQuery{}) })
}

func TestResumeBeyondTheHistoryRequiresResync(t *testing.T) {
	ss := startStreamsWith(t, cachetest.Config{Options: cache.Options{Streams: cache.StreamOptions{HistorySize: 5}}}, Options{})
	sse := openSSE(t, ss.url+"/api/v1/pods?watch=true&snapshot=false", nil)
	ev, _ := sse.next(t)
	if ev.event != "SYNCED" || !ev.hasID {
		t.Fatalf("first event %+v; expect SYNCED with an id", ev)
	}
	old := ev.id
	before := ss.f.Cache.StreamStats()[0].ResourceVersion
	churn(t, ss, 30)
	cachetest.Eventually(t, "the broker moves on by more than its history", func() bool {
		return ss.f.Cache.StreamStats()[0].ResourceVersion != before && len(sse.events) >= 10
	})

	t.Run("SSE", func(t *testing.T) {
		c := openSSE(t, ss.url+"/api/v1/pods?watch=true", http.Header{"Last-Event-ID": {old}})
		ev, _ := c.next(t)
		if ev.event != "RESYNC_REQUIRED" || !ev.hasID || ev.id != "" || gjson.Get(ev.data, "reason").Str == "" {
			t.Errorf("got %+v; expect RESYNC_REQUIRED clearing the id, with a reason", ev)
		}
		if _, more := c.next(t); more {
			t.Error("the stream goes on after RESYNC_REQUIRED")
		}
	})
	t.Run("WebSocket", func(t *testing.T) {
		conn := dialWS(t, ss.wsURL("/api/v1/pods?watch=true&resourceVersion="+old), nil)
		_, msg, err := conn.ReadMessage()
		if err != nil || gjson.GetBytes(msg, "type").Str != "RESYNC_REQUIRED" {
			t.Fatalf("got %s %v; expect RESYNC_REQUIRED", msg, err)
		}
		_, _, err = conn.ReadMessage()
		if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
			t.Errorf("after RESYNC_REQUIRED: %v; expect a normal close", err)
		}
	})
	t.Run("multiplexed", func(t *testing.T) {
		m := openMux(t, ss)
		stale := m.subscribe(t, "stale", `,"resource":"pods","resourceVersion":"`+old+`"`, nil)
		fresh := m.subscribe(t, "fresh", `,"resource":"pods"`, nil)
		cachetest.Eventually(t, "the stale subscription is told to resync", func() bool {
			stale.mu.Lock()
			defer stale.mu.Unlock()
			return stale.ended != ""
		})
		fresh.waitEqual(t, "the other subscription on the socket goes on", func() map[string]string {
			return cachetest.State(t, ss.f.Cache, "pods", cache.ListQuery{})
		})
		m.subscribe(t, "stale", `,"resource":"pods"`, nil) // the id is free again
		churn(t, ss, 3)
		m.subs["stale"].waitEqual(t, "a resubscription works", func() map[string]string {
			return cachetest.State(t, ss.f.Cache, "pods", cache.ListQuery{})
		})
	})
}

// A client that stops reading fills its bounded queue, is told to resync
// and dropped, while another client keeps receiving; the informer never
// waits for it.
func TestStalledReaderIsDroppedAndOthersContinue(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	s := New(f.Cache, Options{Streams: StreamOptions{QueueSize: 16, WriteTimeout: time.Minute}})
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.Listener = smallBuffers{hs.Listener}
	hs.Start()
	t.Cleanup(func() {
		s.streams.stop()
		hs.Close()
	})
	ss := &streamServer{f: f, s: s, url: hs.URL}

	dialer := websocket.Dialer{NetDialContext: (&net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	}}).DialContext, ReadBufferSize: 1024}
	stalled, _, err := dialer.Dial(ss.wsURL("/api/v1/pods?watch=true"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	healthy := openMux(t, ss)
	r := healthy.subscribe(t, "h", `,"resource":"pods"`, nil)
	pods := func() map[string]string { return cachetest.State(t, f.Cache, "pods", cache.ListQuery{}) }
	r.waitEqual(t, "the healthy client syncs", pods)

	cachetest.Eventually(t, "the stalled subscriber is dropped", func() bool {
		churn(t, ss, 1)
		return f.Cache.StreamStats()[0].Dropped > 0
	})
	if st := f.Cache.StreamStats()[0]; st.Subscribers != 1 {
		t.Errorf("broker has %d subscribers; expect only the healthy one", st.Subscribers)
	}
	// Operators see it: the drop and the remaining subscriber are metrics.
	metrics := do(t, s.Handler(), http.MethodGet, "/metrics").Body.String()
	for _, want := range []string{`kubeindex_stream_resyncs_total{resource="pods"} 1`, `kubeindex_stream_subscribers{resource="pods"} 1`,
		`kubeindex_stream_queued_events{resource="pods"}`, `kubeindex_stream_queued_bytes{resource="pods"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	churn(t, ss, 20)
	r.waitEqual(t, "the healthy client keeps up", pods)

	// When the stalled client finally reads: a consistent prefix, then
	// RESYNC_REQUIRED, then a close frame.
	last := ""
	for {
		_, msg, err := stalled.ReadMessage()
		if err != nil {
			if last != "RESYNC_REQUIRED" || !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
				t.Fatalf("stalled client: last message %s, then %v; expect RESYNC_REQUIRED then a normal close", last, err)
			}
			break
		}
		last = gjson.GetBytes(msg, "type").Str
	}
}

func TestMalformedMessagesGetErrorsAndTheSocketContinues(t *testing.T) {
	ss := startStreams(t, Options{Streams: StreamOptions{MaxMessageBytes: 1024, MaxSubscriptionsPerSocket: 2}}, cachetest.PodSpec())
	m := openMux(t, ss)
	good := m.subscribe(t, "good", `,"resource":"pods","namespace":"probe"`, nil)
	tests := []struct {
		name, msg, id, reason string
	}{
		{"not JSON", `{"op":`, "", "BadRequest"},
		{"not an object", `[1,2]`, "", "BadRequest"},
		{"two objects", `{"op":"unsubscribe","id":"x"}{}`, "x", "BadRequest"},
		{"unknown op", `{"op":"publish","id":"a"}`, "a", "BadRequest"},
		{"unknown field", `{"op":"subscribe","id":"b","resource":"pods","labelselector":"x"}`, "b", "BadRequest"},
		{"wrong type", `{"op":"subscribe","id":"c","resource":"pods","snapshot":"yes"}`, "c", "BadRequest"},
		{"no id", `{"op":"subscribe","resource":"pods"}`, "", "BadRequest"},
		{"no resource", `{"op":"subscribe","id":"d"}`, "d", "BadRequest"},
		{"unknown resource", `{"op":"subscribe","id":"e","resource":"widgets"}`, "e", "NotFound"},
		{"bad selector", `{"op":"subscribe","id":"f","resource":"pods","labelSelector":"a in ("}`, "f", "BadRequest"},
		{"bad diff", `{"op":"subscribe","id":"g","resource":"pods","diff":"xml"}`, "g", "BadRequest"},
		{"resume and snapshot", `{"op":"subscribe","id":"h","resource":"pods","resourceVersion":"1","snapshot":true}`, "h", "BadRequest"},
		{"duplicate id", `{"op":"subscribe","id":"good","resource":"pods"}`, "good", "BadRequest"},
		{"unknown subscription", `{"op":"unsubscribe","id":"nope"}`, "nope", "BadRequest"},
		{"oversized", `{"op":"subscribe","id":"big","resource":"pods","labelSelector":"` + strings.Repeat("a", 2000) + `"}`, "", "BadRequest"},
	}
	for _, tt := range tests {
		m.send(t, tt.msg)
		e := m.expectOther(t)
		if e.Get("type").Str != "ERROR" || e.Get("id").Str != tt.id || e.Get("reason").Str != tt.reason || e.Get("message").Str == "" {
			t.Errorf("%s: got %s; expect ERROR id=%q reason=%s", tt.name, e.Raw, tt.id, tt.reason)
		}
	}
	if err := m.conn.WriteMessage(websocket.BinaryMessage, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if e := m.expectOther(t); e.Get("type").Str != "ERROR" {
		t.Errorf("binary message: %s", e.Raw)
	}
	m.subscribe(t, "second", `,"resource":"pods","snapshot":false`, nil)
	m.send(t, `{"op":"subscribe","id":"third","resource":"pods"}`)
	if e := m.expectOther(t); e.Get("reason").Str != "TooManyRequests" || e.Get("id").Str != "third" {
		t.Errorf("subscription beyond the per-socket bound: %s", e.Raw)
	}
	m.send(t, `{"op":"unsubscribe","id":"second"}`)
	if e := m.expectOther(t); e.Get("type").Str != "UNSUBSCRIBED" || e.Get("id").Str != "second" {
		t.Errorf("unsubscribe: %s", e.Raw)
	}

	// After all that, the first subscription still works.
	if err := ss.f.Sim.Apply("pods", probePod("probe", "after-errors", "node-1", "web")); err != nil {
		t.Fatal(err)
	}
	good.waitEqual(t, "the good subscription sees the new pod", func() map[string]string {
		return map[string]string{"probe/after-errors": ss.f.Sim.ResourceVersion()}
	})
}

func TestShutdownSendsCloseFrames(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	s := New(f.Cache, Options{ShutdownTimeout: 10 * time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	ss := &streamServer{f: f, s: s, url: "http://" + ln.Addr().String()}

	single := dialWS(t, ss.wsURL("/api/v1/pods?watch=true"), nil)
	mux := openMux(t, ss)
	r := mux.subscribe(t, "a", `,"resource":"pods"`, nil)
	r.waitEqual(t, "the mux client syncs", func() map[string]string { return cachetest.State(t, f.Cache, "pods", cache.ListQuery{}) })
	sse := openSSE(t, ss.url+"/api/v1/pods?watch=true", nil)
	sse.next(t)

	cancel()
	for {
		if _, _, err := single.ReadMessage(); err != nil {
			if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
				t.Errorf("single-resource socket ended with %v; expect close 1001", err)
			}
			break
		}
	}
	select {
	case err := <-mux.done:
		if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
			t.Errorf("multiplexed socket ended with %v; expect close 1001", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("multiplexed socket not closed")
	}
	for range sse.events { // the SSE response ends
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return")
	}
}

func TestStreamRequestErrors(t *testing.T) {
	ss := startStreams(t, Options{Streams: StreamOptions{MaxSubscribers: 1, AllowedOrigins: []string{"https://dash.example.com"}}}, cachetest.PodSpec())
	get := func(path string, header http.Header) (*http.Response, metav1.Status) {
		req, _ := http.NewRequest(http.MethodGet, ss.url+path, nil)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st metav1.Status
		json.NewDecoder(resp.Body).Decode(&st)
		return resp, st
	}
	sse := http.Header{"Accept": {"text/event-stream"}}
	tests := []struct {
		name, path string
		header     http.Header
		code       int
		mention    string
	}{
		{"no transport", "/api/v1/pods?watch=true", nil, 400, "text/event-stream"},
		{"watch=false", "/api/v1/pods?watch=false", sse, 400, "list"},
		{"unknown parameter", "/api/v1/pods?watch=true&resourceversion=1", sse, 400, "resourceVersion"},
		{"bad snapshot", "/api/v1/pods?watch=true&snapshot=maybe", sse, 400, "snapshot"},
		{"bad diff", "/api/v1/pods?watch=true&diff=xml", sse, 400, "jsonpatch"},
		{"bad resourceVersion", "/api/v1/pods?watch=true&resourceVersion=abc", sse, 400, "resourceVersion"},
		{"unknown resource", "/api/v1/widgets?watch=true", sse, 404, "widgets"},
		{"stream without upgrade", "/api/v1/stream", nil, 400, "WebSocket"},
	}
	for _, tt := range tests {
		resp, st := get(tt.path, tt.header)
		if resp.StatusCode != tt.code || int(st.Code) != tt.code || !strings.Contains(st.Message, tt.mention) {
			t.Errorf("%s: %d %+v; expect %d mentioning %q", tt.name, resp.StatusCode, st, tt.code, tt.mention)
		}
	}

	t.Run("origin", func(t *testing.T) {
		_, resp, err := websocket.DefaultDialer.Dial(ss.wsURL("/api/v1/stream"), http.Header{"Origin": {"https://evil.example.com"}})
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("foreign origin: %v %v; expect 403", resp, err)
		}
		var st metav1.Status
		json.NewDecoder(resp.Body).Decode(&st)
		if st.Reason != "Forbidden" || !strings.Contains(st.Message, "evil.example.com") {
			t.Errorf("foreign origin: %+v", st)
		}
		for _, origin := range []string{ss.url, "https://dash.example.com"} {
			c, _, err := websocket.DefaultDialer.Dial(ss.wsURL("/api/v1/stream"), http.Header{"Origin": {origin}})
			if err != nil {
				t.Errorf("origin %s: %v", origin, err)
				continue
			}
			c.Close()
		}
	})
	t.Run("subscriber bound", func(t *testing.T) {
		first := openSSE(t, ss.url+"/api/v1/pods?watch=true", nil)
		if first.resp.StatusCode != 200 {
			t.Fatalf("first subscriber: %d", first.resp.StatusCode)
		}
		resp, st := get("/api/v1/pods?watch=true", sse)
		if resp.StatusCode != http.StatusTooManyRequests || st.Reason != "TooManyRequests" {
			t.Errorf("beyond MaxSubscribers: %d %+v; expect 429", resp.StatusCode, st)
		}
		first.close()
		cachetest.Eventually(t, "the slot is released", func() bool { return ss.s.streams.subscribers.Load() == 0 })
	})
}

func TestNotSyncedStreamIs503(t *testing.T) {
	f := cachetest.New(t, cachetest.PodSpec()) // never started
	h := New(f.Cache, Options{}).Handler()
	req := localRequest(http.MethodGet, "/api/v1/pods?watch=true", nil)
	req.Header.Set("Accept", "text/event-stream")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("watch before sync: %d %s; expect 503", rec.Code, rec.Body)
	}
}

func TestSSEDataSplitsLines(t *testing.T) {
	var buf strings.Builder
	bw := newTestBufio(&buf)
	sseData{bw}.Write([]byte("{\"a\":\n1,\r\n\"b\":2}"))
	bw.Flush()
	if got := buf.String(); got != "{\"a\":\ndata: 1,\ndata: \ndata: \"b\":2}" {
		t.Errorf("got %q", got)
	}
}

func newTestBufio(w io.Writer) *bufio.Writer { return bufio.NewWriter(w) }

// simPods is the API server's own view of the pods: the oracle.
func simPods(ss *streamServer) map[string]string {
	out := map[string]string{}
	for _, raw := range ss.f.Sim.Objects("pods") {
		m := gjson.GetManyBytes(raw, "metadata.namespace", "metadata.name", "metadata.resourceVersion")
		out[m[0].Str+"/"+m[1].Str] = m[2].Str
	}
	return out
}

// kubeindex_stream_delivery_seconds observes each live event once per
// subscriber that received it, under its transport, and nothing a
// subscriber was handed from the past: not the snapshot, not the events
// replayed on resume.
func TestStreamDeliveryMetric(t *testing.T) {
	ss := startStreams(t, Options{})
	ws, sse := newReplica(nil), newReplica(nil)
	followWS(dialWS(t, ss.wsURL("/api/v1/pods?watch=true"), nil), ws)
	openSSE(t, ss.url+"/api/v1/pods?watch=true", nil).follow(sse)
	cachetest.Eventually(t, "both streams are synced", func() bool { return ws.isSynced() && sse.isSynced() })
	if w, s := deliveries(t, ss); w.count != 0 || s.count != 0 {
		t.Fatalf("snapshots observed as deliveries: websocket %v, sse %v", w.count, s.count)
	}

	churn(t, ss, 20)
	state := func() map[string]string { return cachetest.State(t, ss.f.Cache, "pods", cache.ListQuery{}) }
	cachetest.Eventually(t, "the cache equals the API server", func() bool { return maps.Equal(state(), simPods(ss)) })
	ws.waitEqual(t, "the WebSocket client catches up", state)
	sse.waitEqual(t, "the SSE client catches up", state)
	var w, s histogram
	cachetest.Eventually(t, "one observation per event received", func() bool {
		w, s = deliveries(t, ss)
		return w.count == float64(ws.eventCount()) && s.count == float64(sse.eventCount())
	})
	if w.count == 0 || s.count == 0 {
		t.Fatalf("no event observed: websocket %v, sse %v", w.count, s.count)
	}
	for name, h := range map[string]histogram{"websocket": w, "sse": s} {
		if h.sum <= 0 || h.sum/h.count > 5 {
			t.Errorf("%s: mean delivery %vs over %v events: not a delay", name, h.sum/h.count, h.count)
		}
	}

	// A resumed stream replays what it missed: old events, not deliveries.
	sse.mu.Lock()
	from := strings.Split(sse.events[0], " ")[1]
	sse.mu.Unlock()
	resumed := openSSE(t, ss.url+"/api/v1/pods?watch=true", http.Header{"Last-Event-ID": {from}})
	replayed := 0
	for {
		ev, ok := resumed.next(t)
		if !ok {
			t.Fatal("resumed stream ended")
		}
		if ev.event == "SYNCED" {
			break
		}
		replayed++
	}
	if _, again := deliveries(t, ss); replayed == 0 || again.count != s.count {
		t.Errorf("%d events replayed; sse deliveries went from %v to %v", replayed, s.count, again.count)
	}
}

// histogram is a histogram's count and sum as /metrics shows them.
type histogram struct{ count, sum float64 }

// deliveries scrapes the delivery histogram of both transports.
func deliveries(t *testing.T, ss *streamServer) (ws, sse histogram) {
	t.Helper()
	resp, err := http.Get(ss.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		v, err := strconv.ParseFloat(value, 64)
		if !ok || err != nil {
			continue
		}
		switch name {
		case `kubeindex_stream_delivery_seconds_count{transport="websocket"}`:
			ws.count = v
		case `kubeindex_stream_delivery_seconds_sum{transport="websocket"}`:
			ws.sum = v
		case `kubeindex_stream_delivery_seconds_count{transport="sse"}`:
			sse.count = v
		case `kubeindex_stream_delivery_seconds_sum{transport="sse"}`:
			sse.sum = v
		}
	}
	return ws, sse
}

// With Coalesce, the events that arrive while a stream waits after a write
// go out together, in one write; the first event after a quiet spell is
// not held. Both transports.
func TestStreamCoalescesEventsAfterAWrite(t *testing.T) {
	const hold = 2 * time.Second
	for _, transport := range []string{"websocket", "sse"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			f := cachetest.Start(t, cachetest.PodSpec())
			s := New(f.Cache, Options{Streams: StreamOptions{Coalesce: hold}})
			hs := httptest.NewUnstartedServer(s.Handler())
			counted := &writeCounter{Listener: hs.Listener}
			hs.Listener = counted
			hs.Start()
			t.Cleanup(func() {
				s.streams.stop()
				hs.Close()
			})
			ss := &streamServer{f: f, s: s, url: hs.URL}
			got := make(chan string, 16) // "TYPE name" of each message
			note := func(msg []byte) {
				m := gjson.ParseBytes(msg)
				got <- m.Get("type").Str + " " + m.Get("object.metadata.name").Str
			}
			const path = "/api/v1/pods?watch=true&snapshot=false"
			if transport == "websocket" {
				conn := dialWS(t, ss.wsURL(path), nil)
				go func() {
					for {
						_, msg, err := conn.ReadMessage()
						if err != nil {
							return
						}
						note(msg)
					}
				}()
			} else {
				c := openSSE(t, ss.url+path, nil)
				go func() {
					for ev := range c.events {
						note([]byte(ev.data))
					}
				}()
			}
			expect := func(want string, within time.Duration) {
				t.Helper()
				select {
				case m := <-got:
					if m != want {
						t.Fatalf("got %q; expect %q", m, want)
					}
				case <-time.After(within):
					t.Fatalf("no %q within %v", want, within)
				}
			}
			apply := func(name string) {
				t.Helper()
				if err := ss.f.Sim.Apply("pods", probePod("probe", name, "node-1", "web")); err != nil {
					t.Fatal(err)
				}
			}
			expect("SYNCED ", 15*time.Second)
			time.Sleep(hold + hold/4) // a quiet spell: the wait after SYNCED is over

			begin := time.Now()
			apply("a")
			expect("ADDED a", 15*time.Second)
			if d := time.Since(begin); d >= hold/2 {
				t.Errorf("the first event after a quiet spell took %v: held back", d)
			}
			// The stream now waits: b is held until c joins it.
			writes := counted.writes.Load()
			apply("b")
			select {
			case m := <-got:
				t.Fatalf("%q arrived while the stream should hold it", m)
			case <-time.After(hold / 4):
			}
			apply("c")
			expect("ADDED b", 15*time.Second)
			expect("ADDED c", 15*time.Second)
			if n := counted.writes.Load() - writes; n != 1 {
				t.Errorf("b and c took %d writes; expect them coalesced into 1", n)
			}
		})
	}
}

// writeCounter counts the writes to every connection it accepts.
type writeCounter struct {
	net.Listener
	writes atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, writes: &l.writes}, nil
}

type countedConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}
