package server

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// windowRows is what a client holds of a window, built from its messages
// as docs/streams.md says.
type windowRows struct {
	rows   []string // raw JSON
	offset int
	total  int
	counts string
	resume string
}

func (c *windowRows) apply(t *testing.T, m gjson.Result) {
	t.Helper()
	switch m.Get("type").Str {
	case "WINDOW":
		c.rows = nil
		for _, r := range m.Get("rows").Array() {
			c.rows = append(c.rows, r.Raw)
		}
		c.offset, c.counts = int(m.Get("offset").Int()), m.Get("counts").Raw
	case "WINDOW_CHANGES":
		for _, op := range m.Get("ops").Array() {
			at := int(op.Get("at").Int())
			switch op.Get("op").Str {
			case "remove":
				c.rows = slices.Delete(c.rows, at, at+1)
			case "insert":
				c.rows = slices.Insert(c.rows, at, op.Get("row").Raw)
			case "update":
				c.rows[at] = op.Get("row").Raw
			case "move":
				from := int(op.Get("from").Int())
				c.rows = slices.Delete(c.rows, from, from+1)
				c.rows = slices.Insert(c.rows, int(op.Get("to").Int()), op.Get("row").Raw)
			}
		}
		if m.Get("counts").Exists() {
			c.counts = m.Get("counts").Raw
		}
	default:
		t.Fatalf("not a window message: %s", m.Raw)
	}
	c.total, c.resume = int(m.Get("total").Int()), m.Get("resume").Str
}

func (c *windowRows) keys() []string {
	var out []string
	for _, r := range c.rows {
		out = append(out, gjson.Get(r, "metadata.namespace").Str+"/"+gjson.Get(r, "metadata.name").Str+"@"+gjson.Get(r, "metadata.resourceVersion").Str)
	}
	return out
}

// restWindow is the same question asked of the REST API: its page, total
// and counts.
func restWindow(t *testing.T, get func(path string) []byte, query, sort string, offset, limit int) (keys []string, total int, counts string) {
	t.Helper()
	body := get(fmt.Sprintf("/api/v1/pods?%s&sort=%s&offset=%d&limit=%d", query, sort, offset, limit))
	for _, it := range gjson.GetBytes(body, "items").Array() {
		keys = append(keys, it.Get("metadata.namespace").Str+"/"+it.Get("metadata.name").Str+"@"+it.Get("metadata.resourceVersion").Str)
	}
	c := gjson.ParseBytes(get("/api/v1/resources/pods/counts?" + query + "&groupBy=namespace,status"))
	return keys, int(gjson.GetBytes(body, "metadata.totalItemCount").Int()), fmt.Sprintf(`{"groupBy":%s,"groups":%s}`, c.Get("groupBy").Raw, c.Get("groups").Raw)
}

// follow reads window messages until the client's window equals want().
func (c *windowRows) follow(t *testing.T, m *muxClient, what string, want func() ([]string, int, string)) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		keys, total, counts := want()
		if slices.Equal(c.keys(), keys) && c.total == total && c.counts == counts {
			return
		}
		select {
		case msg := <-m.other:
			c.apply(t, gjson.ParseBytes(msg))
		case err := <-m.done:
			t.Fatalf("%s: socket closed: %v", what, err)
		case <-time.After(time.Until(deadline)):
			t.Fatalf("%s: rows %v total %d counts %s\n want %v total %d counts %s", what, c.keys(), c.total, c.counts, keys, total, counts)
		}
	}
}

func restGetter(t *testing.T, base, token string) func(string) []byte {
	return func(path string) []byte {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return b
	}
}

func restartsPod(ns, name string, restarts int, phase string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q,"labels":{"app":"win"}},
		"spec":{"nodeName":"node-1","containers":[{"name":"c","image":"i"}]},
		"status":{"phase":%q,"containerStatuses":[{"name":"c","restartCount":%d,"ready":true,"state":{"running":{}}}]}}`, name, ns, phase, restarts)
}

// TestWindowOverTheSocket: a window's rows, total and counts are the
// REST API's answer to the same question, at first, as pods are added,
// changed and deleted, after a scroll; then it is unsubscribed.
func TestWindowOverTheSocket(t *testing.T) {
	ss := startStreams(t, Options{Streams: StreamOptions{WindowRate: 50}})
	get := restGetter(t, ss.url, "")
	m := openMux(t, ss)
	const q, sort = "labelSelector=app%3Dwin&filter=status!%3DFailed", "-restarts"
	for i := range 12 {
		ss.f.Sim.Apply("pods", restartsPod("win", fmt.Sprint("p-", i), i%5, "Running"))
	}
	cachetest.Eventually(t, "the pods are cached", func() bool {
		return len(cachetest.State(t, ss.f.Cache, "pods", cache.ListQuery{Namespace: "win"})) == 12
	})
	m.send(t, `{"op":"window","id":"w1","resource":"pods","labelSelector":"app=win","filter":["status!=Failed"],"sort":"-restarts",`+
		`"offset":2,"limit":5,"groupBy":"namespace,status","fields":"status.phase,restarts"}`)
	var c windowRows
	c.apply(t, m.expectOther(t))
	if c.offset != 2 || len(c.rows) != 5 || gjson.Get(c.rows[0], "spec").Exists() || !gjson.Get(c.rows[0], "status.phase").Exists() ||
		!gjson.Get(c.rows[0], "columns.restarts").Exists() {
		t.Fatalf("first message: offset %d, rows %v; expect 5 rows from 2, projected to status.phase and the restarts column", c.offset, c.rows)
	}
	want := func() ([]string, int, string) { return restWindow(t, get, q, sort, 2, 5) }
	c.follow(t, m, "at first", want)

	ss.f.Sim.Apply("pods", restartsPod("win", "top", 99, "Running"))
	ss.f.Sim.Apply("pods", restartsPod("win", "p-3", 50, "Running"))
	ss.f.Sim.Apply("pods", restartsPod("win", "p-4", 4, "Failed"))
	ss.f.Sim.Delete("pods", "win", "p-2")
	c.follow(t, m, "after changes", want)

	m.send(t, `{"op":"scroll","id":"w1","offset":6}`)
	msg := m.expectOther(t)
	if msg.Get("type").Str != "WINDOW" || msg.Get("offset").Int() != 6 {
		t.Fatalf("a scroll: %s; expect a WINDOW at 6", msg.Raw)
	}
	c.apply(t, msg)
	c.follow(t, m, "after a scroll", func() ([]string, int, string) { return restWindow(t, get, q, sort, 6, 5) })

	m.send(t, `{"op":"unsubscribe","id":"w1"}`)
	for {
		if msg := m.expectOther(t); msg.Get("type").Str == "UNSUBSCRIBED" {
			break
		}
	}
}

// TestWindowMessageErrors: a bad window or scroll is an ERROR naming what
// is wrong, as the REST API would answer; the socket goes on.
func TestWindowMessageErrors(t *testing.T) {
	ss := startStreams(t, Options{})
	m := openMux(t, ss)
	m.subscribe(t, "s", `,"resource":"nodes"`, nil)
	for _, tc := range []struct {
		msg  string
		code int
		want string
	}{
		{`"resource":"pods","filter":["restarts>1","age>abc"]`, 400, "filter (occurrence 2): at position 5"},
		{`"resource":"pods","filter":["age<1h"]`, 400, "filter: a window cannot filter on age"},
		{`"resource":"pods","sort":"restarts,,name"`, 400, "sort"},
		{`"resource":"pods","groupBy":"status,node,ip"`, 400, "groupBy"},
		{`"resource":"pods","fields":"spec.containers.#.image"`, 400, "fields"},
		{`"resource":"pods","fieldSelector":"spec.nodeName"`, 400, "fieldSelector"},
		{`"resource":"pods","fieldSelector":"spec.foo=x"`, 400, "spec.foo"},
		{`"resource":"pods","limit":0`, 400, "limit"},
		{`"resource":"pods","limit":501`, 400, "limit"},
		{`"resource":"pods","offset":-1`, 400, "offset"},
		{`"resource":"pods","filter":"status=Running"`, 400, "filter"},
		{`"resource":"pods","index":"node","value":"node-1"`, 400, "not index"},
		{`"resource":"ip:watch"`, 400, "address stream has no windows"},
		{`"resource":"widgets"`, 404, "widgets"},
	} {
		m.send(t, `{"op":"window","id":"w",`+tc.msg+`}`)
		got := m.expectOther(t)
		if got.Get("type").Str != "ERROR" || got.Get("id").Str != "w" || got.Get("code").Int() != int64(tc.code) || !strings.Contains(got.Get("message").Str, tc.want) {
			t.Errorf("%s: %s; expect a %d ERROR naming %q", tc.msg, got.Raw, tc.code, tc.want)
		}
	}
	for _, tc := range []struct{ msg, want string }{
		{`{"op":"scroll","id":"w","offset":1}`, "no window"},
		{`{"op":"scroll","id":"s","offset":1}`, "not a window"},
		{`{"op":"scroll","id":"s"}`, "scroll takes op, id, offset"},
		{`{"op":"scroll","id":"s","offset":1,"resource":"pods"}`, "scroll takes op, id, offset"},
		{`{"op":"subscribe","id":"x","resource":"pods","sort":"name"}`, "fields of a window"},
	} {
		m.send(t, tc.msg)
		if got := m.expectOther(t); got.Get("type").Str != "ERROR" || got.Get("code").Int() != 400 || !strings.Contains(got.Get("message").Str, tc.want) {
			t.Errorf("%s: %s; expect a 400 ERROR saying %q", tc.msg, got.Raw, tc.want)
		}
	}
	// The socket still serves: a good window after the refusals.
	m.send(t, `{"op":"window","id":"ok","resource":"pods","limit":1}`)
	if got := m.expectOther(t); got.Get("type").Str != "WINDOW" || got.Get("id").Str != "ok" {
		t.Errorf("a window after errors: %s", got.Raw)
	}
}

// TestAuthWindowsAreRestrictedLikeLists: a caller who may list pods in
// one namespace gets a window, total and counts over that namespace only,
// as its lists and counts are; a window in a namespace it may not list is
// a 403 ERROR.
func TestAuthWindowsAreRestrictedLikeLists(t *testing.T) {
	e := startAuth(t, Options{Streams: StreamOptions{WindowRate: 50}})
	get := restGetter(t, e.ss.url, "alice-token")
	proto := http.Header{"Sec-WebSocket-Protocol": {WebSocketProtocol + ", " + WebSocketTokenProtocol +
		base64.RawURLEncoding.EncodeToString([]byte("alice-token"))}}
	m, _ := openMuxWith(t, e.ss.wsURL("/api/v1/stream"), proto)
	m.send(t, `{"op":"window","id":"w","resource":"pods","labelSelector":"app=team","sort":"name","groupBy":"namespace,status"}`)
	var c windowRows
	c.apply(t, m.expectOther(t))
	want := func() ([]string, int, string) { return restWindow(t, get, "labelSelector=app%3Dteam", "name", 0, 100) }
	c.follow(t, m, "alice's window", want)
	for _, k := range c.keys() {
		if !strings.HasPrefix(k, "team-a/") {
			t.Errorf("alice's window holds %s", k)
		}
	}
	if strings.Contains(c.counts, "team-b") || c.total != 3 {
		t.Errorf("alice's window: total %d, counts %s; expect team-a's 3 pods only", c.total, c.counts)
	}
	e.ss.f.Sim.Apply("pods", teamPod("team-b", "b-new", "10.77.1.2"))
	e.ss.f.Sim.Apply("pods", teamPod("team-a", "a-new", "10.77.1.1"))
	// The window is compared with the REST answer, which lags the simulated
	// cluster by the cache's watch: wait until REST has a-new, or the window
	// and REST could agree on the state before the change.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, total, _ := want(); total == 4 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("REST never showed a-new: total %d", total)
		}
	}
	c.follow(t, m, "alice's window after changes", want)
	if c.total != 4 || strings.Contains(strings.Join(c.keys(), " "), "team-b") {
		t.Errorf("after changes: %v total %d; expect team-a's 4 pods only", c.keys(), c.total)
	}
	m.send(t, `{"op":"window","id":"b","resource":"pods","namespace":"team-b"}`)
	if got := m.expectOther(t); got.Get("id").Str != "b" || got.Get("code").Int() != 403 {
		t.Errorf("a window in team-b: %s; expect a 403 ERROR", got.Raw)
	}
}
