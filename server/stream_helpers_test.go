package server

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// streamServer is the whole stack over real HTTP: the demo API server, the
// cache, and this server on a loopback port.
type streamServer struct {
	f   *cachetest.Fixture
	s   *Server
	url string // http://127.0.0.1:port
}

func startStreams(t *testing.T, opts Options, specs ...cache.Spec) *streamServer {
	t.Helper()
	return startStreamsWith(t, cachetest.Config{}, opts, specs...)
}

// startStreamsWith is startStreams over a cache configured by conf.
func startStreamsWith(t *testing.T, conf cachetest.Config, opts Options, specs ...cache.Spec) *streamServer {
	t.Helper()
	if len(specs) == 0 {
		specs = cachetest.DefaultSpecs()
	}
	f := cachetest.StartWith(t, conf, specs...)
	s := New(f.Cache, opts)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.streams.stop() // end the streams, or Close waits for them
		hs.Close()
	})
	return &streamServer{f: f, s: s, url: hs.URL}
}

func (ss *streamServer) wsURL(path string) string {
	return "ws" + strings.TrimPrefix(ss.url, "http") + path
}

// replica is the state a client rebuilds from one subscription's messages.
// It records the first message a gap-free, duplicate-free stream could not
// have produced.
type replica struct {
	mu       sync.Mutex
	objs     map[string]string // key → object resourceVersion
	synced   bool
	rv       string // last resumable position
	ended    string // RESYNC_REQUIRED reason
	err      error
	events   []string // "TYPE rv key" of events after SYNCED
	patches  int      // MODIFIED events that carried a patch
	messages int
}

func newReplica(start map[string]string) *replica {
	r := &replica{objs: maps.Clone(start)}
	if r.objs == nil {
		r.objs = map[string]string{}
	}
	return r
}

func (r *replica) apply(msg []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.messages++
	fail := func(format string, args ...any) {
		if r.err == nil {
			r.err = fmt.Errorf(format, args...)
		}
	}
	if !gjson.ValidBytes(msg) {
		fail("message is not JSON: %.200s", msg)
		return
	}
	m := gjson.ParseBytes(msg)
	typ, rv := m.Get("type").Str, m.Get("resourceVersion").Str
	meta := m.Get("object.metadata")
	key := meta.Get("name").Str
	if ns := meta.Get("namespace").Str; ns != "" {
		key = ns + "/" + key
	}
	_, held := r.objs[key]
	switch typ {
	case "ADDED":
		if held {
			fail("ADDED %s twice", key)
		}
		r.objs[key] = meta.Get("resourceVersion").Str
	case "MODIFIED":
		if !held {
			fail("MODIFIED %s before ADDED", key)
		}
		r.objs[key] = meta.Get("resourceVersion").Str
		if m.Get("patch").Exists() {
			r.patches++
		}
	case "DELETED":
		if !held {
			fail("DELETED %s before ADDED", key)
		}
		delete(r.objs, key)
	case "SYNCED":
		if r.synced {
			fail("SYNCED twice")
		}
		r.synced = true
	case "BOOKMARK":
	case "RESYNC_REQUIRED":
		r.ended = m.Get("reason").Str
		return
	default:
		fail("unexpected message %.200s", msg)
		return
	}
	if r.synced && typ != "SYNCED" && typ != "BOOKMARK" {
		r.events = append(r.events, typ+" "+rv+" "+key)
	}
	if r.synced {
		r.rv = rv
	}
}

func (r *replica) snapshot() (objs map[string]string, rv string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended != "" && r.err == nil {
		return nil, "", fmt.Errorf("told to resync: %s", r.ended)
	}
	return maps.Clone(r.objs), r.rv, r.err
}

// waitEqual waits until the replica holds exactly want().
func (r *replica) waitEqual(t *testing.T, what string, want func() map[string]string) {
	t.Helper()
	var got, expect map[string]string
	var err error
	cachetest.Eventually(t, what, func() bool {
		got, _, err = r.snapshot()
		expect = want()
		return err != nil || maps.Equal(got, expect)
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	id    string
	hasID bool
	event string
	data  string
}

// sseClient reads an event stream on its own goroutine.
type sseClient struct {
	resp   *http.Response
	events chan sseEvent // closed at the end of the stream
	cancel context.CancelFunc
}

func openSSE(t *testing.T, url string, header http.Header) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &sseClient{resp: resp, events: make(chan sseEvent, 1<<16), cancel: cancel}
	t.Cleanup(c.close)
	if resp.StatusCode != http.StatusOK {
		return c
	}
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch {
			case line == "":
				if ev.event != "" || ev.data != "" {
					c.events <- ev
				}
				ev = sseEvent{}
			case field == "id":
				ev.id, ev.hasID = value, true
			case field == "event":
				ev.event = value
			case field == "data":
				if ev.data != "" {
					ev.data += "\n"
				}
				ev.data += value
			}
		}
	}()
	return c
}

func (c *sseClient) close() {
	c.cancel()
	c.resp.Body.Close()
}

// follow applies every event to r; the last id seen is kept in r too.
func (c *sseClient) follow(r *replica) {
	go func() {
		for ev := range c.events {
			r.apply([]byte(ev.data))
		}
	}()
}

// next waits for the next event.
func (c *sseClient) next(t *testing.T) (sseEvent, bool) {
	t.Helper()
	select {
	case ev, ok := <-c.events:
		return ev, ok
	case <-time.After(15 * time.Second):
		t.Fatal("no event within 15s")
	}
	return sseEvent{}, false
}

func dialWS(t *testing.T, url string, header http.Header) *websocket.Conn {
	t.Helper()
	conn, resp, err := websocket.DefaultDialer.Dial(url, header)
	if err != nil {
		body := ""
		if resp != nil {
			b := make([]byte, 512)
			n, _ := resp.Body.Read(b)
			body = string(b[:n])
		}
		t.Fatalf("dial %s: %v %s", url, err, body)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// muxClient reads a multiplexed socket, routing messages by id.
type muxClient struct {
	conn  *websocket.Conn
	mu    sync.Mutex
	subs  map[string]*replica
	other chan []byte // messages without a known subscription (errors, acks)
	done  chan error  // the read error that ended the socket
}

func openMux(t *testing.T, ss *streamServer) *muxClient {
	t.Helper()
	m := &muxClient{conn: dialWS(t, ss.wsURL("/api/v1/stream"), nil), subs: map[string]*replica{},
		other: make(chan []byte, 1024), done: make(chan error, 1)}
	go func() {
		for {
			_, msg, err := m.conn.ReadMessage()
			if err != nil {
				m.done <- err
				return
			}
			id := gjson.GetBytes(msg, "id").Str
			m.mu.Lock()
			r := m.subs[id]
			m.mu.Unlock()
			if r == nil || gjson.GetBytes(msg, "type").Str == "ERROR" || gjson.GetBytes(msg, "type").Str == "UNSUBSCRIBED" {
				m.other <- msg
				continue
			}
			r.apply(msg)
		}
	}()
	return m
}

// subscribe sends a subscribe message and returns the replica its
// messages build.
func (m *muxClient) subscribe(t *testing.T, id, fields string, start map[string]string) *replica {
	t.Helper()
	r := newReplica(start)
	m.mu.Lock()
	m.subs[id] = r
	m.mu.Unlock()
	m.send(t, fmt.Sprintf(`{"op":"subscribe","id":%q%s}`, id, fields))
	return r
}

func (m *muxClient) send(t *testing.T, msg string) {
	t.Helper()
	if err := m.conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// expectOther waits for the next untracked message (ERROR, UNSUBSCRIBED).
func (m *muxClient) expectOther(t *testing.T) gjson.Result {
	t.Helper()
	select {
	case msg := <-m.other:
		return gjson.ParseBytes(msg)
	case err := <-m.done:
		t.Fatalf("socket closed: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("no message within 15s")
	}
	return gjson.Result{}
}

// smallBuffers makes every accepted connection's kernel send buffer tiny,
// so that a client that stops reading blocks the server's writes quickly.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

func (r *replica) isSynced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.synced
}

// eventCount is how many events the replica applied after SYNCED.
func (r *replica) eventCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}
