package server

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// liveFleet is a Clusters whose clusters can change while it serves: a
// nil server is a cluster not serving.
type liveFleet struct {
	mu      sync.Mutex
	names   []string
	servers map[string]*Server
}

func (f *liveFleet) Cluster(name string) (*Server, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.servers[name]
	switch {
	case !ok || !slices.Contains(f.names, name):
		return nil, fmt.Errorf("%w %q", ErrUnknownCluster, name)
	case s == nil:
		return nil, fmt.Errorf("%w: %q: connection refused", ErrClusterUnavailable, name)
	}
	return s, nil
}

func (f *liveFleet) States() []ClusterState {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ClusterState
	for _, n := range f.names {
		if s := f.servers[n]; s != nil {
			out = append(out, StateOf(n, s.r))
		} else {
			out = append(out, ClusterState{Name: n, State: ClusterFailed, Reason: "connection refused"})
		}
	}
	return out
}

func (f *liveFleet) Ready() bool { return true }

func (f *liveFleet) Names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.names)
}

func (f *liveFleet) set(names []string, servers map[string]*Server) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names, f.servers = names, servers
}

// streamFleet is clusters a and b, the same simulated cluster twice (the
// same pod names in each), and their front on a loopback port.
type streamFleet struct {
	fx     map[string]*cachetest.Fixture
	srv    map[string]*Server
	fleet  *liveFleet
	shared *Shared
	front  *Server
	url    string
	authz  func(cluster string) auth.Authorizer
	authn  AuthOptions
}

func startStreamFleet(t *testing.T, authz func(cluster string) auth.Authorizer, front AuthOptions, names ...string) *streamFleet {
	t.Helper()
	sf := &streamFleet{fx: map[string]*cachetest.Fixture{}, srv: map[string]*Server{}, fleet: &liveFleet{},
		shared: NewShared(LimitOptions{}, StreamOptions{}), authz: authz, authn: front}
	for _, n := range names {
		sf.addCluster(t, n)
	}
	sf.fleet.set(names, maps.Clone(sf.srv))
	sf.front = New(noCache{}, Options{Clusters: sf.fleet, Shared: sf.shared, Auth: front, Logger: quiet()})
	hs := httptest.NewServer(sf.front.Handler())
	t.Cleanup(func() {
		sf.shared.streams.stop()
		hs.Close()
	})
	sf.url = hs.URL
	return sf
}

// addCluster starts a cluster's cache and server (not yet in the fleet).
func (sf *streamFleet) addCluster(t *testing.T, name string) {
	t.Helper()
	sf.fx[name] = cachetest.Start(t, cachetest.PodSpec())
	opts := Options{ClusterName: name, Shared: sf.shared, Logger: quiet()}
	if sf.authz != nil {
		opts.Auth = AuthOptions{Authenticator: sf.authn.Authenticator, Authorizer: sf.authz(name)}
	}
	sf.srv[name] = New(sf.fx[name].Cache, opts)
}

// served is what cluster c's simulated cluster serves of pods, in
// namespace ns ("": all).
func (sf *streamFleet) served(t *testing.T, c, ns string) func() map[string]string {
	return func() map[string]string {
		all := sf.fx[c].ServedPods(t)
		if ns != "" {
			maps.DeleteFunc(all, func(k, _ string) bool { return !strings.HasPrefix(k, ns+"/") })
		}
		return all
	}
}

// change makes a change of each kind in a cluster: a pod added, one
// modified, one deleted.
func (sf *streamFleet) change(t *testing.T, cluster string, n int) {
	t.Helper()
	sim := sf.fx[cluster].Sim
	for i := range n {
		if err := sim.Apply("pods", probePod("probe", fmt.Sprintf("p-%d", i), "node-1", "web")); err != nil {
			t.Fatal(err)
		}
		if err := sim.Apply("pods", probePod("probe", fmt.Sprintf("p-%d", i), "node-2", "web")); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			if err := sim.Delete("pods", "probe", fmt.Sprintf("p-%d", i-1)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// fleetReplica is what a client rebuilds from a stream across clusters:
// one replica per cluster, the resume token last seen, and the CLUSTER
// messages.
type fleetReplica struct {
	mu       sync.Mutex
	clusters map[string]*replica
	resume   string
	states   []string // "cluster status state" of CLUSTER messages
	resyncs  []string // clusters told to resync
	err      error
}

func newFleetReplica(start map[string]map[string]string) *fleetReplica {
	fr := &fleetReplica{clusters: map[string]*replica{}}
	for c, objs := range start {
		fr.clusters[c] = newReplica(objs)
	}
	return fr
}

func (fr *fleetReplica) apply(msg []byte) {
	m := gjson.ParseBytes(msg)
	c := m.Get("cluster").Str
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if c == "" {
		if fr.err == nil {
			fr.err = fmt.Errorf("a message without its cluster: %.200s", msg)
		}
		return
	}
	if m.Get("object.cluster").Exists() {
		fr.err = fmt.Errorf("the cluster inside the object: %.200s", msg)
	}
	if r := m.Get("resume"); r.Exists() {
		fr.resume = r.Str
	}
	switch m.Get("type").Str {
	case "CLUSTER":
		fr.states = append(fr.states, fmt.Sprintf("%s %d %s", c, m.Get("status").Int(), m.Get("state").Str))
		return
	case "RESYNC_REQUIRED":
		fr.resyncs = append(fr.resyncs, c)
		if r := fr.clusters[c]; r != nil { // relisted in the stream: start again
			r.mu.Lock()
			r.objs, r.synced, r.rv = map[string]string{}, false, ""
			r.mu.Unlock()
		}
		return
	}
	r := fr.clusters[c]
	if r == nil {
		r = newReplica(nil)
		fr.clusters[c] = r
	}
	r.apply(msg)
}

func (fr *fleetReplica) cluster(c string) *replica {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if fr.clusters[c] == nil {
		fr.clusters[c] = newReplica(nil)
	}
	return fr.clusters[c]
}

func (fr *fleetReplica) token() string {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.resume
}

func (fr *fleetReplica) failed() error {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.err
}

// statesOf is cluster c's CLUSTER messages, "status state" each.
func (fr *fleetReplica) statesOf(c string) []string {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	var out []string
	for _, s := range fr.states {
		if rest, ok := strings.CutPrefix(s, c+" "); ok {
			out = append(out, rest)
		}
	}
	return out
}

func (fr *fleetReplica) saw(state string) bool {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return slices.Contains(fr.states, state)
}

// objects is each cluster's replica's objects.
func (fr *fleetReplica) objects(t *testing.T) map[string]map[string]string {
	t.Helper()
	fr.mu.Lock()
	defer fr.mu.Unlock()
	out := map[string]map[string]string{}
	for c, r := range fr.clusters {
		objs, _, err := r.snapshot()
		if err != nil {
			t.Fatalf("cluster %s: %v", c, err)
		}
		out[c] = objs
	}
	return out
}

// waitEqual waits until the replica of each named cluster holds what
// its simulated cluster serves: not what its cache holds, which may not
// have taken in the last changes yet (a replica equal to a cache that
// lags proves nothing).
func (fr *fleetReplica) waitEqual(t *testing.T, sf *streamFleet, what string, clusters ...string) {
	t.Helper()
	for _, c := range clusters {
		fr.cluster(c).waitEqual(t, what+" in "+c, sf.served(t, c, ""))
	}
	if err := fr.failed(); err != nil {
		t.Fatal(err)
	}
}

func (fr *fleetReplica) follow(c *sseClient) {
	go func() {
		for ev := range c.events {
			fr.apply([]byte(ev.data))
		}
	}()
}

// TestFleetStreamInterleavesClusters: one event stream over two clusters
// holding the same pod names: every message names its cluster beside the
// object, each cluster's part is its snapshot, SYNCED and changes, and
// applying each cluster's messages rebuilds that cluster exactly; a
// resume token from the middle, after changes in both, gives each
// cluster exactly what it missed (no snapshot, no repeat, no gap).
func TestFleetStreamInterleavesClusters(t *testing.T) {
	sf := startStreamFleet(t, nil, AuthOptions{}, "a", "b")
	c := openSSE(t, sf.url+"/api/v1/pods?watch=true", nil)
	if c.resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", c.resp.StatusCode)
	}
	fr := newFleetReplica(nil)
	fr.follow(c)
	fr.waitEqual(t, sf, "the snapshot", "a", "b")
	sf.change(t, "a", 4)
	sf.change(t, "b", 3)
	fr.waitEqual(t, sf, "the changes", "a", "b")
	if !fr.saw("a 200 synced") || !fr.saw("b 200 synced") {
		t.Errorf("CLUSTER messages %v; expect each cluster's state", fr.states)
	}

	// Resume from the middle: what the client held at its last token.
	held := fr.objects(t)
	tok := fr.token()
	c.close()
	sf.change(t, "a", 6)
	sf.change(t, "b", 2)
	c2 := openSSE(t, sf.url+"/api/v1/pods?watch=true", http.Header{"Last-Event-ID": {tok}})
	fr2 := newFleetReplica(held)
	fr2.follow(c2)
	fr2.waitEqual(t, sf, "the resume", "a", "b")
	if len(fr2.resyncs) > 0 {
		t.Errorf("told to resync %v on a resume the history covers", fr2.resyncs)
	}
}

// TestFleetStreamOneClusterExpires: a token whose position in a has
// expired (a's history restarted) resyncs a alone, in the stream: a's
// RESYNC_REQUIRED, then its snapshot; b resumes with no snapshot.
func TestFleetStreamOneClusterExpires(t *testing.T) {
	sf := startStreamFleet(t, nil, AuthOptions{}, "a", "b")
	c := openSSE(t, sf.url+"/api/v1/pods?watch=true", nil)
	fr := newFleetReplica(nil)
	fr.follow(c)
	fr.waitEqual(t, sf, "the snapshot", "a", "b")
	held := fr.objects(t)
	pos, err := decodeFleetPositions(fr.token(), "pods")
	if err != nil || pos["a"] == "" || pos["b"] == "" {
		t.Fatalf("token %q: %v %v", fr.token(), pos, err)
	}
	c.close()
	pos["a"] = "1" // before a's history
	forged := encodeFleetPositions("pods", pos)
	sf.change(t, "b", 2)
	sf.change(t, "a", 1)
	c2 := openSSE(t, sf.url+"/api/v1/pods?watch=true&resourceVersion="+url.QueryEscape(forged), nil)
	if c2.resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", c2.resp.StatusCode)
	}
	fr2 := newFleetReplica(held)
	fr2.follow(c2)
	fr2.waitEqual(t, sf, "a relisted, b resumed", "a", "b")
	fr2.mu.Lock()
	defer fr2.mu.Unlock()
	if !slices.Equal(fr2.resyncs, []string{"a"}) {
		t.Errorf("resynced %v; expect a only", fr2.resyncs)
	}
	if next, _ := decodeFleetPositions(fr2.resume, "pods"); next["a"] == "" || next["a"] == "1" {
		t.Errorf("token after a's relist: %v; expect a's new position", next)
	}
}

// TestFleetStreamAuthorizedPerCluster: a caller allowed in a and not in b
// gets a's events only, and one CLUSTER message saying b is 403, nothing
// more.
func TestFleetStreamAuthorizedPerCluster(t *testing.T) {
	st, err := auth.ParseStaticTokens([]byte("s3cret,alice,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	sf := startStreamFleet(t, func(cluster string) auth.Authorizer {
		return fixedAuthorizer(func(auth.Attributes) bool { return cluster == "a" })
	}, AuthOptions{Authenticator: st}, "a", "b")
	h := http.Header{"Authorization": {"Bearer s3cret"}}
	c := openSSE(t, sf.url+"/api/v1/pods?watch=true", h)
	if c.resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", c.resp.StatusCode)
	}
	var raw []string
	var mu sync.Mutex
	fr := newFleetReplica(nil)
	go func() {
		for ev := range c.events {
			mu.Lock()
			raw = append(raw, ev.data)
			mu.Unlock()
			fr.apply([]byte(ev.data))
		}
	}()
	fr.waitEqual(t, sf, "a's snapshot", "a")
	sf.change(t, "b", 2)
	sf.change(t, "a", 1)
	fr.waitEqual(t, sf, "a's changes", "a")
	mu.Lock()
	defer mu.Unlock()
	forbidden := 0
	for _, m := range raw {
		g := gjson.Parse(m)
		if g.Get("cluster").Str != "b" {
			continue
		}
		if g.Get("type").Str != "CLUSTER" || g.Get("status").Int() != 403 || g.Get("reason").Exists() || g.Get("state").Exists() {
			t.Errorf("b's message %s; expect only a 403 CLUSTER message, no reason", m)
		}
		forbidden++
	}
	if forbidden != 1 {
		t.Errorf("%d messages for b; expect its 403 once", forbidden)
	}
	// Without a token the stream is refused where the front authenticates.
	if c := openSSE(t, sf.url+"/api/v1/pods?watch=true", nil); c.resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: status %d; expect 401", c.resp.StatusCode)
	}
}

// TestFleetStreamBadTokens: a token the server did not make is a 400
// that says to start without it, never a panic, on SSE and on the
// multiplexed socket.
func TestFleetStreamBadTokens(t *testing.T) {
	sf := startStreamFleet(t, nil, AuthOptions{}, "a", "b")
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, tok := range []string{
		"not a token", "%%%", b64("{"), b64("null"), b64(`{"r":"pods"}`), b64(`{"r":"nodes","p":{"a":"1"}}`),
		b64(`{"r":"pods","p":{"A_b":"1"}}`), b64(`{"r":"pods","p":{"a":""}}`), b64(`{"r":"pods","p":{"a":"1 2"}}`),
		b64(`{"r":"pods","p":{"a":"` + strings.Repeat("9", 65) + `"}}`), b64(`{"r":"pods","p":{"a":"abc"}}`),
		b64(`{"r":"pods","p":{"a":"-5"}}`), b64(`{"r":"pods","p":[1]}`), b64(`{"r":1,"p":{}}`),
	} {
		c := openSSE(t, sf.url+"/api/v1/pods?watch=true&resourceVersion="+url.QueryEscape(tok), nil)
		if c.resp.StatusCode != http.StatusBadRequest {
			t.Errorf("token %q: status %d; expect 400", tok, c.resp.StatusCode)
		}
		c.close()
	}
	for _, q := range []string{"cluster=nope", "cluster=a,,b", "snapshot=maybe", "diff=xml", "labelSelector=a%3D%3D%3Db", "index=nope&value=x"} {
		c := openSSE(t, sf.url+"/api/v1/pods?watch=true&"+q, nil)
		if c.resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d; expect 400", q, c.resp.StatusCode)
		}
		c.close()
	}
	if c := openSSE(t, sf.url+"/api/v1/nothings?watch=true", nil); c.resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown resource: status %d; expect 404", c.resp.StatusCode)
	}
	conn := dialWS(t, strings.Replace(sf.url, "http", "ws", 1)+"/api/v1/stream", nil)
	conn.WriteMessage(1, []byte(`{"op":"subscribe","id":"t","resource":"pods","resourceVersion":"forged"}`))
	_, msg, err := conn.ReadMessage()
	if err != nil || gjson.GetBytes(msg, "type").Str != "ERROR" || gjson.GetBytes(msg, "code").Int() != 400 {
		t.Errorf("a forged token on the socket: %s %v; expect an ERROR 400", msg, err)
	}
}

// FuzzFleetPositions: any token is read or refused, never a panic, and
// what is read is what was written.
func FuzzFleetPositions(f *testing.F) {
	f.Add(encodeFleetPositions("pods", map[string]string{"a": "12", "b": "7"}))
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		pos, err := decodeFleetPositions(s, "pods")
		if err != nil || pos == nil {
			return
		}
		again, err := decodeFleetPositions(encodeFleetPositions("pods", pos), "pods")
		if err != nil || !maps.Equal(again, pos) {
			t.Errorf("%q: read %v, again %v %v", s, pos, again, err)
		}
	})
}

// TestFleetStreamOverTheSocket: a subscribe across clusters on the
// multiplexed socket, beside a cluster's own subscription count: each
// message carries the id, its cluster and the token; a cluster removed
// leaves with a CLUSTER message, one added joins with its snapshot, one
// retired says why and rejoins from its position once it serves again.
func TestFleetStreamOverTheSocket(t *testing.T) {
	sf := startStreamFleet(t, nil, AuthOptions{}, "a", "b")
	conn := dialWS(t, strings.Replace(sf.url, "http", "ws", 1)+"/api/v1/stream", nil)
	fr := newFleetReplica(nil)
	var other []string
	var mu sync.Mutex
	go func() {
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			if gjson.GetBytes(msg, "id").Str != "all" {
				mu.Lock()
				other = append(other, string(msg))
				mu.Unlock()
				continue
			}
			fr.apply(msg)
		}
	}()
	conn.WriteMessage(1, []byte(`{"op":"subscribe","id":"all","resource":"pods","namespace":"probe"}`))
	conn.WriteMessage(1, []byte(`{"op":"window","id":"w","resource":"pods"}`))
	cachetest.Eventually(t, "a and b synced", func() bool { return fr.cluster("a").isSynced() && fr.cluster("b").isSynced() })
	sf.change(t, "a", 2)
	sf.change(t, "b", 3)
	probe := func(c string) func() map[string]string { return sf.served(t, c, "probe") }
	fr.cluster("a").waitEqual(t, "a's probes", probe("a"))
	fr.cluster("b").waitEqual(t, "b's probes", probe("b"))

	// c is added to the configuration: the stream of every cluster takes it in.
	sf.addCluster(t, "c")
	sf.fleet.set([]string{"a", "b", "c"}, maps.Clone(sf.srv))
	sf.change(t, "c", 2)
	fr.cluster("c").waitEqual(t, "c joined", probe("c"))

	// b is retired (its configuration changed): it says why, and comes
	// back from its position on its new server (here the same cache):
	// the events it missed, then the rest, with no snapshot, no
	// RESYNC_REQUIRED and no second SYNCED (the client following the
	// one-SYNCED rule would take that for a broken stream), and a CLUSTER
	// message that it is back.
	sf.srv["b"].Retire(`cluster "b" restarted: its configuration changed`)
	cachetest.Eventually(t, "b reported failed", func() bool { return fr.saw("b 503 failed") })
	sf.change(t, "b", 5)
	nb := New(sf.fx["b"].Cache, Options{ClusterName: "b", Shared: sf.shared, Logger: quiet()})
	sf.srv["b"] = nb
	sf.fleet.set([]string{"a", "b", "c"}, maps.Clone(sf.srv))
	fr.cluster("b").waitEqual(t, "b back", probe("b"))
	// Whatever b's part sent on its return (a SYNCED ends a replay) came
	// before the events of a change made now.
	sf.change(t, "b", 1)
	fr.cluster("b").waitEqual(t, "b streams on after its return", probe("b"))
	if got := fr.statesOf("b"); !slices.Equal(got, []string{"200 synced", "503 failed", "200 synced"}) {
		t.Errorf("b's CLUSTER messages %v; expect synced, failed, then synced again", got)
	}
	fr.mu.Lock()
	if len(fr.resyncs) > 0 {
		t.Errorf("told to resync %v; b came back from its position", fr.resyncs)
	}
	fr.mu.Unlock()

	// a is removed: it leaves with a reason; the others stream on.
	sf.fleet.set([]string{"b", "c"}, maps.Clone(sf.srv))
	cachetest.Eventually(t, "a removed", func() bool { return fr.saw("a 404 removed") })
	sf.change(t, "c", 4)
	fr.cluster("c").waitEqual(t, "c streams on", probe("c"))
	if err := fr.failed(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(other) != 1 || gjson.Get(other[0], "type").Str != "ERROR" || !strings.Contains(other[0], "per cluster") {
		t.Errorf("the window on the fleet's socket: %v; expect one ERROR saying windows are per cluster", other)
	}
	if tok := fr.token(); tok != "" {
		pos, err := decodeFleetPositions(tok, "pods")
		if err != nil || pos["a"] != "" || pos["b"] == "" || pos["c"] == "" {
			t.Errorf("the last token %v %v; expect b's and c's positions, not the removed a's", pos, err)
		}
	}
}

// TestFleetAddressStream: the address mirror across clusters: each
// cluster's owners beside its name, each cluster's SYNCED, then a change
// in one cluster named by it, and a token that resumes both.
func TestFleetAddressStream(t *testing.T) {
	sf := startStreamFleet(t, nil, AuthOptions{}, "a", "b")
	c := openSSE(t, sf.url+"/api/v1/ip:watch?kinds=pods", nil)
	if c.resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", c.resp.StatusCode)
	}
	synced, owners := map[string]bool{}, map[string]int{}
	token := ""
	for len(synced) < 2 {
		ev, ok := c.next(t)
		if !ok {
			t.Fatal("the stream ended")
		}
		m := gjson.Parse(ev.data)
		cl := m.Get("cluster").Str
		if cl != "a" && cl != "b" {
			t.Fatalf("a message of no cluster of the stream: %s", ev.data)
		}
		switch m.Get("type").Str {
		case "SYNCED":
			synced[cl] = true
			token = ev.id
		case "OWNERS":
			owners[cl]++
		}
	}
	if owners["a"] == 0 || owners["a"] != owners["b"] {
		t.Errorf("owners a %d, b %d; expect the same simulated cluster's, twice", owners["a"], owners["b"])
	}
	pos, err := decodeFleetPositions(token, cache.AddressStream)
	if err != nil || len(pos) != 2 {
		t.Fatalf("the last id %q: %v %v; expect a token of both clusters", token, pos, err)
	}
	c.close()
	p := probePod("probe", "addr-1", "node-1", "web")
	p = []byte(strings.Replace(string(p), `"status":{"phase":"Running"}`, `"status":{"phase":"Running","podIP":"10.250.0.9","podIPs":[{"ip":"10.250.0.9"}]}`, 1))
	if err := sf.fx["b"].Sim.Apply("pods", p); err != nil {
		t.Fatal(err)
	}
	c2 := openSSE(t, sf.url+"/api/v1/ip:watch?kinds=pods", http.Header{"Last-Event-ID": {token}})
	for {
		ev, ok := c2.next(t)
		if !ok {
			t.Fatal("the resumed stream ended")
		}
		m := gjson.Parse(ev.data)
		if m.Get("type").Str == "OWNERS" && m.Get("ip").Str == "10.250.0.9" {
			if m.Get("cluster").Str != "b" {
				t.Errorf("b's new address named %q", m.Get("cluster").Str)
			}
			break
		}
		if m.Get("type").Str == "RESET" || (m.Get("type").Str == "OWNERS" && !m.Get("resourceVersion").Exists()) {
			t.Fatalf("a resume the history covers sent a snapshot: %s", ev.data)
		}
	}
}

// TestFleetWatchAsOneWebSocket: a watch across clusters opened as a
// WebSocket of its own: untagged by id, each message beside its cluster,
// only the clusters asked.
func TestFleetWatchAsOneWebSocket(t *testing.T) {
	sf := startStreamFleet(t, nil, AuthOptions{}, "a", "b")
	conn := dialWS(t, strings.Replace(sf.url, "http", "ws", 1)+"/api/v1/pods?watch=true&cluster=b", nil)
	fr := newFleetReplica(nil)
	go func() {
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			if gjson.GetBytes(msg, "id").Exists() || gjson.GetBytes(msg, "cluster").Str != "b" {
				fr.mu.Lock()
				fr.err = fmt.Errorf("a message of one cluster's socket: %.200s", msg)
				fr.mu.Unlock()
			}
			fr.apply(msg)
		}
	}()
	fr.waitEqual(t, sf, "b's snapshot", "b")
	sf.change(t, "b", 2)
	fr.waitEqual(t, sf, "b's changes", "b")
}
