package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/ipowner"
)

// addrClient is an agent's map of the address stream, over any transport:
// next gives the raw messages (and, for SSE, the event id).
type addrClient struct {
	t      *testing.T
	next   func() (msg []byte, id string, ok bool)
	owners map[string]string // ip → "Kind ns/name role|…"
	pos    string
	synced bool
	log    []string // "TYPE ip owners" of changes, and RESET
	items  int      // snapshot items
}

func ownerList(owners gjson.Result) string {
	var out []string
	for _, o := range owners.Array() {
		out = append(out, fmt.Sprintf("%s %s/%s %s", o.Get("kind").Str, o.Get("namespace").Str, o.Get("name").Str, o.Get("role").Str))
	}
	return strings.Join(out, "|")
}

// step applies one message and returns it.
func (c *addrClient) step() gjson.Result {
	c.t.Helper()
	raw, id, ok := c.next()
	if !ok {
		c.t.Fatalf("the stream ended; log %q", c.log)
	}
	m := gjson.ParseBytes(raw)
	pos := m.Get("resourceVersion").Str
	if id != pos && !(m.Get("type").Str == "RESYNC_REQUIRED" && id == "") {
		c.t.Fatalf("SSE id %q is not the message's position %q: %s", id, pos, raw)
	}
	switch m.Get("type").Str {
	case "OWNERS":
		ip, owners := m.Get("ip").Str, ownerList(m.Get("owners"))
		if owners == "" {
			delete(c.owners, ip)
		} else {
			c.owners[ip] = owners
		}
		if pos == "" {
			c.items++
		} else {
			c.log = append(c.log, "OWNERS "+ip+" "+owners)
		}
	case "RESET":
		c.owners = map[string]string{}
		c.log = append(c.log, "RESET")
	case "SYNCED":
		c.synced = true
	case "BOOKMARK":
	default:
		c.t.Fatalf("unexpected message %s", raw)
	}
	if pos != "" {
		c.pos = pos
	}
	return m
}

func (c *addrClient) until(what string, cond func() bool) {
	c.t.Helper()
	for !cond() {
		c.step()
	}
}

func newAddrClient(t *testing.T, next func() ([]byte, string, bool)) *addrClient {
	return &addrClient{t: t, next: next, owners: map[string]string{}}
}

func addrSSE(t *testing.T, url string, header http.Header) *addrClient {
	t.Helper()
	sse := openSSE(t, url, header)
	if sse.resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", url, sse.resp.Status)
	}
	return newAddrClient(t, func() ([]byte, string, bool) {
		ev, ok := sse.next(t)
		if ok && ev.event != gjson.Get(ev.data, "type").Str {
			t.Fatalf("event %q carries %s", ev.event, ev.data)
		}
		return []byte(ev.data), ev.id, ok
	})
}

// wsNext reads a socket's messages; tagged is the multiplexed socket's id.
func wsNext(t *testing.T, conn *websocket.Conn, tagged string) func() ([]byte, string, bool) {
	return func() ([]byte, string, bool) {
		conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, msg, err := conn.ReadMessage()
		if err != nil {
			t.Logf("read: %v", err)
			return nil, "", false
		}
		if tagged != "" && gjson.GetBytes(msg, "id").Str != tagged {
			t.Fatalf("message not of subscription %q: %s", tagged, msg)
		}
		return msg, gjson.GetBytes(msg, "resourceVersion").Str, true
	}
}

func reusedPod(name, ip string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"reuse"},
		"spec":{"nodeName":"node-1","containers":[{"name":"c","image":"x"}]},
		"status":{"phase":"Running","podIP":%q,"podIPs":[{"ip":%q}]}}`, name, ip, ip)
}

// TestAddressStreamTransports: given the demo cluster, when an agent opens
// the address stream over SSE, a WebSocket and the multiplexed socket,
// then each gets the snapshot (pods, Services, nodes), SYNCED, then an
// address reused A → B as [A], [], [B]; and an SSE stream resumed with
// Last-Event-ID from after [A] gets exactly [] and [B], with no snapshot.
func TestAddressStreamTransports(t *testing.T) {
	ss := startStreams(t, Options{})
	sse := addrSSE(t, ss.url+"/api/v1/ip:watch", nil)
	ws := newAddrClient(t, wsNext(t, dialWS(t, ss.wsURL("/api/v1/ip:watch"), nil), ""))
	muxConn := dialWS(t, ss.wsURL("/api/v1/stream"), nil)
	if err := muxConn.WriteMessage(websocket.TextMessage, []byte(`{"op":"subscribe","id":"ips","resource":"ip:watch"}`)); err != nil {
		t.Fatal(err)
	}
	mux := newAddrClient(t, wsNext(t, muxConn, "ips"))
	clients := map[string]*addrClient{"sse": sse, "websocket": ws, "multiplexed": mux}
	for name, c := range clients {
		c.until("SYNCED", func() bool { return c.synced })
		if c.owners["10.96.0.1"] != "Service default/kubernetes clusterIP" || !strings.Contains(c.owners["10.0.0.11"], "Node /node-1 nodeInternal") {
			t.Errorf("%s: snapshot of %d addresses lacks the kubernetes Service or node-1: %q %q", name, c.items, c.owners["10.96.0.1"], c.owners["10.0.0.11"])
		}
		if !strings.Contains(strings.Join(mapValues(c.owners), "|"), "Pod ") {
			t.Errorf("%s: no pod address in the snapshot", name)
		}
	}

	const x = "10.250.3.3"
	changes := []struct {
		do   func() error
		want string
	}{
		{func() error { return ss.f.Sim.Apply("pods", reusedPod("a", x)) }, "OWNERS " + x + " Pod reuse/a podIP"},
		{func() error { return ss.f.Sim.Delete("pods", "reuse", "a") }, "OWNERS " + x + " "},
		{func() error { return ss.f.Sim.Apply("pods", reusedPod("b", x)) }, "OWNERS " + x + " Pod reuse/b podIP"},
	}
	var afterA string
	for i, ch := range changes {
		if err := ch.do(); err != nil {
			t.Fatal(err)
		}
		for name, c := range clients {
			n := len(c.log)
			c.until(ch.want, func() bool { return len(c.log) > n && c.log[len(c.log)-1] == ch.want })
			for _, l := range c.log[n : len(c.log)-1] {
				if strings.Contains(l, " "+x+" ") {
					t.Errorf("%s: %q before %q", name, l, ch.want)
				}
			}
			if i == 0 && name == "sse" {
				afterA = c.pos
			}
		}
	}

	resumed := addrSSE(t, ss.url+"/api/v1/ip:watch", http.Header{"Last-Event-ID": {afterA}})
	resumed.until("SYNCED", func() bool { return resumed.synced })
	var got []string
	for _, l := range resumed.log {
		if strings.Contains(l, " "+x+" ") {
			got = append(got, l)
		}
	}
	if resumed.items != 0 || strings.Join(got, ";") != changes[1].want+";"+changes[2].want {
		t.Errorf("resumed after A: %d snapshot items, changes of X %q; expect none, then %q and %q", resumed.items, got, changes[1].want, changes[2].want)
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestAddressStreamResumeTooOld: given a history of a few changes, when a
// stream resumes from a position it has forgotten, then it is told
// (RESET), given a fresh snapshot and SYNCED, and goes on.
func TestAddressStreamResumeTooOld(t *testing.T) {
	ss := startStreamsWith(t, cachetest.Config{Options: cache.Options{Streams: cache.StreamOptions{HistorySize: 4}}}, Options{})
	c := addrSSE(t, ss.url+"/api/v1/ip:watch", nil)
	c.until("SYNCED", func() bool { return c.synced })
	start := c.pos
	for i := range 6 {
		if err := ss.f.Sim.Apply("pods", reusedPod(fmt.Sprintf("p%d", i), fmt.Sprintf("10.250.4.%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	c.until("the six pods", func() bool { return c.owners["10.250.4.5"] != "" })
	old := addrSSE(t, ss.url+"/api/v1/ip:watch?resourceVersion="+start, nil)
	first := old.step()
	if first.Get("type").Str != "RESET" || !strings.Contains(first.Get("reason").Str, "older than the retained history") {
		t.Fatalf("resume from a forgotten position opens with %s; expect RESET", first.Raw)
	}
	old.until("SYNCED", func() bool { return old.synced })
	if old.items != len(c.owners) || old.owners["10.250.4.5"] != c.owners["10.250.4.5"] {
		t.Errorf("after RESET, a snapshot of %d addresses; expect the %d held", old.items, len(c.owners))
	}
}

// TestAddressStreamNodeFilter: node= keeps that node's pods and addresses
// (and Services, which belong to no node); kinds= narrows the kinds.
func TestAddressStreamNodeFilter(t *testing.T) {
	ss := startStreams(t, Options{})
	c := addrSSE(t, ss.url+"/api/v1/ip:watch?node=node-1&kinds=pods,nodes", nil)
	c.until("SYNCED", func() bool { return c.synced })
	if len(c.owners) == 0 || !strings.Contains(c.owners["10.0.0.11"], "Node /node-1 nodeInternal") {
		t.Fatalf("node-1's stream: %d addresses, 10.0.0.11 %q", len(c.owners), c.owners["10.0.0.11"])
	}
	for ip, owners := range c.owners {
		l, err := ss.f.Cache.LookupAddress(ipowner.Query{IP: ip})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range l.Pods {
			if p.Active() && p.NodeName != "node-1" && strings.Contains(owners, p.Namespace+"/"+p.Name+" ") {
				t.Errorf("%s: pod %s/%s of %s in node-1's stream", ip, p.Namespace, p.Name, p.NodeName)
			}
		}
		if strings.Contains(owners, "Service ") || strings.Contains(owners, "Node /node-2") {
			t.Errorf("%s: %q in node-1's stream of pods and nodes", ip, owners)
		}
	}
	if err := ss.f.Sim.Apply("pods", reusedPod("here", "10.250.5.1")); err != nil { // on node-1
		t.Fatal(err)
	}
	c.until("the pod on node-1", func() bool { return c.owners["10.250.5.1"] == "Pod reuse/here podIP" })
}

// TestAddressStreamBadInput: a bad filter or position is a 400 (an ERROR
// on the multiplexed socket) that says what is wrong.
func TestAddressStreamBadInput(t *testing.T) {
	ss := startStreams(t, Options{})
	for _, tt := range []struct{ query, says string }{
		{"kinds=deployments", "pods, services and nodes"},
		{"node=Not_A_Node", "not a node name"},
		{"resourceVersion=123", "not a position of the address stream"},
		{"namespace=x", "unknown query parameter"},
	} {
		sse := openSSE(t, ss.url+"/api/v1/ip:watch?"+tt.query, nil)
		body := make([]byte, 2048)
		n, _ := sse.resp.Body.Read(body)
		if sse.resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body[:n]), tt.says) {
			t.Errorf("%s: %d %s; expect 400 saying %q", tt.query, sse.resp.StatusCode, body[:n], tt.says)
		}
	}
	resp, err := http.Get(ss.url + "/api/v1/ip:watch")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a plain GET: %d; expect 400 (it is a stream)", resp.StatusCode)
	}
	m := openMux(t, ss)
	for _, tt := range []struct{ msg, says string }{
		{`{"op":"subscribe","id":"a","resource":"ip:watch","kinds":"secrets"}`, "pods, services and nodes"},
		{`{"op":"subscribe","id":"b","resource":"ip:watch","namespace":"x"}`, "takes kinds, node and resourceVersion"},
		{`{"op":"subscribe","id":"c","resource":"ip:watch","resourceVersion":"nope"}`, "not a position"},
		{`{"op":"subscribe","id":"d","resource":"pods","node":"node-1"}`, "fields of the address stream"},
	} {
		m.send(t, tt.msg)
		got := m.expectOther(t)
		if got.Get("type").Str != "ERROR" || got.Get("code").Int() != 400 || !strings.Contains(got.Get("message").Str, tt.says) {
			t.Errorf("%s: %s; expect an ERROR 400 saying %q", tt.msg, got.Raw, tt.says)
		}
	}
}

// TestAuthAddressStreamHidesForbiddenOwners: given alice, who may read
// pods in team-a only, when she opens the address stream, then she sees
// team-a's pod addresses and no Service, node or other team's pod; an
// address shared with team-b shows her pod alone; changes of hidden
// owners never reach her, and the address whose last visible owner leaves
// becomes free for her. A caller who may read none of them is refused.
func TestAuthAddressStreamHidesForbiddenOwners(t *testing.T) {
	e := startAuth(t, Options{})
	bearer := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }
	alice := addrSSE(t, e.ss.url+"/api/v1/ip:watch", bearer("alice-token"))
	alice.until("SYNCED", func() bool { return alice.synced })
	syncedAt := alice.pos
	for ip, want := range map[string]string{
		"10.77.0.1": "Pod team-a/a-0 podIP", "10.77.0.9": "Pod team-a/a-shared podIP",
		"10.77.0.2": "", "10.96.0.1": "", "10.0.0.11": "",
	} {
		if alice.owners[ip] != want {
			t.Errorf("alice's %s: %q; expect %q", ip, alice.owners[ip], want)
		}
	}
	for ip, owners := range alice.owners {
		if !strings.HasPrefix(owners, "Pod team-a/") || strings.Contains(owners, "|") {
			t.Errorf("alice sees %s held by %q", ip, owners)
		}
	}
	admin := addrSSE(t, e.ss.url+"/api/v1/ip:watch", bearer("admin-token"))
	admin.until("SYNCED", func() bool { return admin.synced })
	if admin.owners["10.77.0.9"] != "Pod team-a/a-shared podIP|Pod team-b/b-shared podIP" || admin.owners["10.96.0.1"] == "" {
		t.Errorf("the admin's 10.77.0.9 %q, 10.96.0.1 %q; expect both pods, and the Service", admin.owners["10.77.0.9"], admin.owners["10.96.0.1"])
	}

	for _, step := range []func() error{
		func() error { return e.ss.f.Sim.Delete("pods", "team-b", "b-shared") }, // hidden from alice
		func() error { return e.ss.f.Sim.Delete("pods", "team-b", "b-0") },      // hidden from alice
		func() error { return e.ss.f.Sim.Delete("pods", "team-a", "a-shared") },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	alice.until("10.77.0.9 is free", func() bool { return len(alice.log) > 0 })
	if want := []string{"OWNERS 10.77.0.9 "}; strings.Join(alice.log, ";") != strings.Join(want, ";") {
		t.Errorf("alice's changes: %q; expect only %q", alice.log, want)
	}
	// The accepted exposure (docs/security.md): a position counts the
	// address changes of the whole cluster, one each, and tells nothing
	// else: her one change arrives 3 past her SYNCED, the two hidden
	// changes before it counted, nothing of what or where they were.
	seq := func(pos string) int {
		_, n, _ := strings.Cut(pos, "-")
		v, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("position %q", pos)
		}
		return v
	}
	if moved := seq(alice.pos) - seq(syncedAt); moved != 3 {
		t.Errorf("alice's position moved by %d over 2 hidden changes and 1 of hers; expect 3", moved)
	}

	nobody := openSSE(t, e.ss.url+"/api/v1/ip:watch", bearer("nobody-token"))
	if nobody.resp.StatusCode != http.StatusForbidden {
		t.Errorf("nobody: %d; expect 403", nobody.resp.StatusCode)
	}
}

// TestAddressStreamRefusals: with no pods, Services or nodes cached the
// stream is a 404; before they have synced, a 503 to retry.
func TestAddressStreamRefusals(t *testing.T) {
	for _, tt := range []struct {
		name  string
		start bool
		spec  cache.Spec
		code  int
	}{
		{"nothing that holds addresses", true, cache.Spec{Resource: "deployments.apps"}, http.StatusNotFound},
		{"not synced", false, cachetest.PodSpec(), http.StatusServiceUnavailable},
	} {
		var f *cachetest.Fixture
		if tt.start {
			f = cachetest.Start(t, tt.spec)
		} else {
			f = cachetest.New(t, tt.spec)
		}
		hs := httptest.NewServer(New(f.Cache, Options{Logger: quiet()}).Handler())
		sse := openSSE(t, hs.URL+"/api/v1/ip:watch", nil)
		if sse.resp.StatusCode != tt.code {
			t.Errorf("%s: %d; expect %d", tt.name, sse.resp.StatusCode, tt.code)
		}
		sse.close()
		hs.Close()
	}
}
