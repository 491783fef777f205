package server

import (
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/auth/authtest"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// The callers of the authorization tests. alice may read pods in team-a
// only; admins everything; prom only /metrics; nobody nothing.
var authUsers = map[string]auth.User{
	"alice-token":  {Name: "alice", UID: "1"},
	"admin-token":  {Name: "root", UID: "2", Groups: []string{"admins"}},
	"prom-token":   {Name: "prometheus", UID: "3"},
	"nobody-token": {Name: "nobody", UID: "4"},
}

func authRules() []authtest.Rule {
	read := []string{"get", "list", "watch"}
	rules := []authtest.Rule{
		{User: "alice", Verbs: read, Resource: "pods", Namespace: "team-a"},
		{User: "prometheus", Verbs: []string{"get"}, Path: "/metrics"},
		{Group: "admins", Verbs: []string{"get"}, Path: "/metrics"},
	}
	for _, r := range []string{"pods", "services", "nodes", "namespaces"} {
		rules = append(rules, authtest.Rule{Group: "admins", Verbs: read, Resource: r})
	}
	for _, r := range []string{"deployments", "replicasets"} {
		rules = append(rules, authtest.Rule{Group: "admins", Verbs: read, APIGroup: "apps", Resource: r})
	}
	return rules
}

// teamPod is a pod of ours, with addresses.
func teamPod(ns, name, ip string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q,"labels":{"app":"team"}},
		"spec":{"nodeName":"node-1","containers":[{"name":"c","image":"team:1"}]},
		"status":{"phase":"Running","podIP":%q,"podIPs":[{"ip":%q}]}}`, name, ns, ip, ip)
}

// authEnv is the whole stack over real HTTP with authentication and
// authorization against a fake API server.
type authEnv struct {
	api *authtest.Server
	ss  *streamServer
}

func startAuth(t *testing.T, opts Options) *authEnv {
	t.Helper()
	api := authtest.New(t, authUsers, authRules()...)
	tr, _ := auth.NewTokenReviewerForConfig(api.Config(), auth.TokenReviewOptions{})
	ar, _ := auth.NewAccessReviewerForConfig(api.Config(), auth.AccessReviewOptions{})
	if opts.Auth.Authenticator == nil {
		opts.Auth.Authenticator = tr
	}
	opts.Auth.Authorizer = ar
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ss := startStreams(t, opts)
	for _, p := range []struct{ ns, name, ip string }{
		{"team-a", "a-0", "10.77.0.1"}, {"team-a", "a-1", "10.77.0.3"}, {"team-b", "b-0", "10.77.0.2"},
		{"team-a", "a-shared", "10.77.0.9"}, {"team-b", "b-shared", "10.77.0.9"},
	} {
		if err := ss.f.Sim.Apply("pods", teamPod(p.ns, p.name, p.ip)); err != nil {
			t.Fatal(err)
		}
	}
	cachetest.Eventually(t, "the team pods are cached", func() bool {
		return len(cachetest.State(t, ss.f.Cache, "pods", cache.ListQuery{LabelSelector: "app=team"})) == 5
	})
	return &authEnv{api: api, ss: ss}
}

func (e *authEnv) get(t *testing.T, path, token string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.ss.url+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func itemKeys(body []byte) []string {
	var keys []string
	for _, it := range gjson.GetBytes(body, "items").Array() {
		keys = append(keys, it.Get("metadata.namespace").Str+"/"+it.Get("metadata.name").Str)
	}
	return keys
}

func TestAuthRESTAnswersWhatRBACAllows(t *testing.T) {
	e := startAuth(t, Options{})
	teamA := slices.Sorted(maps.Keys(cachetest.State(t, e.ss.f.Cache, "pods", cache.ListQuery{Namespace: "team-a"})))
	allPods := slices.Sorted(maps.Keys(cachetest.State(t, e.ss.f.Cache, "pods", cache.ListQuery{})))
	onNode1InA := slices.Sorted(maps.Keys(cachetest.State(t, e.ss.f.Cache, "pods", cache.ListQuery{Namespace: "team-a", Index: "node", Value: "node-1"})))
	tests := []struct {
		name, token, path string
		code              int
		items             []string // when set, exactly these items
	}{
		{"no token", "", "/api/v1/pods", 401, nil},
		{"a bad token", "forged", "/api/v1/pods", 401, nil},
		{"no token, unknown route", "", "/no/such/route", 401, nil},
		{"alice lists pods: team-a only", "alice-token", "/api/v1/pods", 200, teamA},
		{"alice lists pods in team-a", "alice-token", "/api/v1/pods?namespace=team-a", 200, teamA},
		{"alice pages through team-a", "alice-token", "/api/v1/pods?limit=1", 200, teamA[:1]},
		{"alice lists pods in team-b", "alice-token", "/api/v1/pods?namespace=team-b", 403, nil},
		{"alice looks pods up by node", "alice-token", "/api/v1/pods?index=node&value=node-1", 200, onNode1InA},
		{"alice asks a question of pods: team-a only", "alice-token", "/api/v1/pods?sort=-name&filter=name~-&fields=spec.nodeName", 200, reversed(teamA)},
		{"alice asks a question of team-b", "alice-token", "/api/v1/pods?namespace=team-b&sort=name", 403, nil},
		{"alice counts pods in team-b", "alice-token", "/api/v1/resources/pods/counts?namespace=team-b", 403, nil},
		{"alice gets a pod in team-a", "alice-token", "/api/v1/pods/team-a/a-0", 200, nil},
		{"alice gets a pod in team-b", "alice-token", "/api/v1/pods/team-b/b-0", 403, nil},
		{"alice gets a missing pod in team-b: 403, not 404", "alice-token", "/api/v1/pods/team-b/nope", 403, nil},
		{"alice gets a missing pod in team-a", "alice-token", "/api/v1/pods/team-a/nope", 404, nil},
		{"alice lists nodes", "alice-token", "/api/v1/nodes", 403, nil},
		{"alice gets a node", "alice-token", "/api/v1/nodes/node-1", 403, nil},
		{"alice lists index values", "alice-token", "/api/v1/resources/pods/indexes/node", 403, nil},
		{"alice looks up a team-a IP", "alice-token", "/api/v1/ip/10.77.0.1", 200, []string{"team-a/a-0"}},
		{"alice looks up a team-b IP", "alice-token", "/api/v1/ip/10.77.0.2", 404, nil},
		{"alice looks up a shared IP", "alice-token", "/api/v1/ip/10.77.0.9", 200, []string{"team-a/a-shared"}},
		{"alice reads the metrics", "alice-token", "/metrics", 403, nil},
		{"nobody lists pods", "nobody-token", "/api/v1/pods", 403, nil},
		{"an admin lists pods", "admin-token", "/api/v1/pods", 200, allPods},
		{"an admin looks up a shared IP", "admin-token", "/api/v1/ip/10.77.0.9", 200, []string{"team-a/a-shared", "team-b/b-shared"}},
		{"an admin lists index values", "admin-token", "/api/v1/resources/pods/indexes/node", 200, nil},
		{"prometheus reads the metrics", "prom-token", "/metrics", 200, nil},
		{"prometheus lists pods", "prom-token", "/api/v1/pods", 403, nil},
		{"a probe reads /healthz", "", "/healthz", 200, nil},
		{"a probe reads /readyz", "", "/readyz", 200, nil},
		{"anyone reads the spec", "", "/openapi.json", 200, nil},
		{"anyone loads the dashboard", "", "/", 200, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.get(t, tt.path, tt.token)
			if resp.StatusCode != tt.code {
				t.Fatalf("%s: %d %.300s; expect %d", tt.path, resp.StatusCode, body, tt.code)
			}
			if tt.code >= 400 {
				st := gjson.ParseBytes(body)
				if st.Get("kind").Str != "Status" || st.Get("code").Int() != int64(tt.code) || st.Get("message").Str == "" {
					t.Errorf("error body %s", body)
				}
			}
			if tt.code == 401 && resp.Header.Get("WWW-Authenticate") != `Bearer realm="kubeindex"` {
				t.Errorf("401 without WWW-Authenticate: %v", resp.Header)
			}
			// Who has not shown a token learns nothing of the cluster's activity.
			fresh := resp.Header.Get(HeaderLastEvent) + resp.Header.Get(HeaderResourceVersion) + resp.Header.Get(HeaderStale)
			if unauthenticated := tt.token == "" || tt.token == "forged"; unauthenticated && fresh != "" {
				t.Errorf("an unauthenticated answer carries freshness headers: %v", resp.Header)
			}
			if tt.items != nil && !slices.Equal(itemKeys(body), tt.items) {
				t.Errorf("items %v; expect %v", itemKeys(body), tt.items)
			}
		})
	}
	req, _ := http.NewRequest(http.MethodGet, e.ss.url+"/api/v1/pods", nil)
	req.Header.Add("Authorization", "Bearer forged")
	req.Header.Add("Authorization", "Bearer admin-token")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("two Authorization headers: %v %v; expect 401, not a guess at which counts", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	_, body := e.get(t, "/api/v1/ip/10.77.0.9", "alice-token")
	if m := gjson.GetBytes(body, "match").Str; m != "pod" {
		t.Errorf("alice sees one pod with the shared address: match %q; expect pod (classified from what she may see)", m)
	}
	_, body = e.get(t, "/api/v1/ip/10.77.0.9", "admin-token")
	if m := gjson.GetBytes(body, "match").Str; m != "ambiguous" {
		t.Errorf("an admin sees both pods: match %q; expect ambiguous", m)
	}
	_, body = e.get(t, "/api/v1/pods/team-b/b-0", "alice-token")
	if !strings.Contains(string(body), `User \"alice\" cannot get resource \"pods\" in API group \"\" in the namespace \"team-b\"`) {
		t.Errorf("403 message %s; expect the API server's wording", body)
	}
}

func reversed(s []string) []string {
	s = slices.Clone(s)
	slices.Reverse(s)
	return s
}

// TestAuthCountsOnlyWhatTheCallerMayList: counts are over the namespaces
// a list would show the caller, groups included.
func TestAuthCountsOnlyWhatTheCallerMayList(t *testing.T) {
	e := startAuth(t, Options{})
	teamA := cachetest.State(t, e.ss.f.Cache, "pods", cache.ListQuery{Namespace: "team-a"})
	all := cachetest.State(t, e.ss.f.Cache, "pods", cache.ListQuery{})
	for _, tc := range []struct {
		token  string
		expect int
	}{{"alice-token", len(teamA)}, {"admin-token", len(all)}} {
		resp, body := e.get(t, "/api/v1/resources/pods/counts?groupBy=namespace", tc.token)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tc.token, resp.StatusCode, body)
		}
		if got := gjson.GetBytes(body, "total").Int(); int(got) != tc.expect || len(teamA) == len(all) {
			t.Errorf("%s counts %d pods; expect %d (%s)", tc.token, got, tc.expect, body)
		}
		if tc.token == "alice-token" && gjson.GetBytes(body, `groups.#(values.0!="team-a")`).Exists() {
			t.Errorf("alice sees a group outside team-a: %s", body)
		}
	}
}

func TestAuthHidesClusterWideFigures(t *testing.T) {
	e := startAuth(t, Options{})
	for _, tc := range []struct {
		token     string
		withCount bool
	}{{"alice-token", false}, {"admin-token", true}} {
		_, body := e.get(t, "/api/v1/resources", tc.token)
		pods := gjson.GetBytes(body, `resources.#(name=="pods")`)
		if !pods.Exists() || pods.Get("count").Exists() != tc.withCount || pods.Get("events").Exists() != tc.withCount {
			t.Errorf("%s: pods %s; expect count shown %v", tc.token, pods.Raw, tc.withCount)
		}
		if !pods.Get("synced").Bool() || !pods.Get("indexes").IsArray() {
			t.Errorf("%s: the rest of the status is missing: %s", tc.token, pods.Raw)
		}
		_, one := e.get(t, "/api/v1/resources/pods", tc.token)
		if gjson.GetBytes(one, "count").Exists() != tc.withCount {
			t.Errorf("%s: /api/v1/resources/pods %s", tc.token, one)
		}
	}
	_, body := e.get(t, "/readyz", "")
	if r := gjson.ParseBytes(body); !r.Get("ready").Bool() || r.Get("resources").Exists() {
		t.Errorf("public /readyz %s: expect the verdict without the per-resource detail", body)
	}
}

func TestAuthCachesReviews(t *testing.T) {
	e := startAuth(t, Options{})
	e.get(t, "/api/v1/pods", "alice-token")
	e.get(t, "/api/v1/ip/10.77.0.1", "alice-token")
	tokens, reviews := e.api.Reviews()
	for range 20 {
		for _, path := range []string{"/api/v1/pods", "/api/v1/pods/team-a/a-0", "/api/v1/pods/team-b/b-0", "/api/v1/ip/10.77.0.9"} {
			e.get(t, path, "alice-token")
		}
	}
	tokens2, reviews2 := e.api.Reviews()
	if tokens2 != tokens {
		t.Errorf("%d TokenReviews for 80 requests with one known token; expect none", tokens2-tokens)
	}
	// get in team-a (which answers for a-0), get in team-b, refused, then
	// get b-0, and nothing else: the list and lookup questions were all
	// asked by the first list.
	if reviews2-reviews != 3 {
		t.Errorf("%d SubjectAccessReviews for 80 requests asking 4 new questions... expect 3", reviews2-reviews)
	}
	var scrape string
	cachetest.Eventually(t, "auth metrics", func() bool {
		_, b := e.get(t, "/metrics", "prom-token")
		scrape = string(b)
		return strings.Contains(scrape, `kubeindex_auth_cache_total{result="hit",stage="authorization"}`)
	})
	for _, want := range []string{`kubeindex_auth_decisions_total{result="denied",stage="authorization"}`,
		`kubeindex_auth_cache_total{result="hit",stage="authentication"}`, `kubeindex_open_connections`} {
		if !strings.Contains(scrape, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestAuthOutage(t *testing.T) {
	e := startAuth(t, Options{})
	if resp, _ := e.get(t, "/api/v1/pods?namespace=team-a", "alice-token"); resp.StatusCode != 200 {
		t.Fatalf("alice: %d", resp.StatusCode)
	}
	e.api.SetDown(true)
	// Known answers are still used; a new caller cannot be checked: 503, not 401.
	if resp, _ := e.get(t, "/api/v1/pods?namespace=team-a", "alice-token"); resp.StatusCode != 200 {
		t.Errorf("alice during an outage: %d; expect 200 from the cached answers", resp.StatusCode)
	}
	resp, body := e.get(t, "/api/v1/pods", "admin-token")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || strings.Contains(string(body), "down") {
		t.Errorf("a new caller during an outage: %d %v %s; expect 503 with Retry-After, no internals", resp.StatusCode, resp.Header, body)
	}
}

// openMuxWith is openMux with request headers.
func openMuxWith(t *testing.T, url string, header http.Header) (*muxClient, *http.Response) {
	t.Helper()
	conn, resp, err := websocket.DefaultDialer.Dial(url, header)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	m := &muxClient{conn: conn, subs: map[string]*replica{}, other: make(chan []byte, 1024), done: make(chan error, 1)}
	go func() {
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				m.done <- err
				return
			}
			m.mu.Lock()
			r := m.subs[gjson.GetBytes(msg, "id").Str]
			m.mu.Unlock()
			if typ := gjson.GetBytes(msg, "type").Str; r == nil || typ == "ERROR" || typ == "UNSUBSCRIBED" {
				m.other <- msg
				continue
			}
			r.apply(msg)
		}
	}()
	return m, resp
}

func TestAuthStreamsAreRestrictedLikeLists(t *testing.T) {
	e := startAuth(t, Options{})
	inA := func() map[string]string {
		return cachetest.State(t, e.ss.f.Cache, "pods", cache.ListQuery{Namespace: "team-a"})
	}
	bearer := http.Header{"Authorization": {"Bearer alice-token"}}

	sse := newReplica(nil)
	openSSE(t, e.ss.url+"/api/v1/pods?watch=true", bearer).follow(sse)
	sseByParam := newReplica(nil)
	openSSE(t, e.ss.url+"/api/v1/pods?watch=true&access_token=alice-token", nil).follow(sseByParam)

	wsSingle := newReplica(nil)
	followWS(dialWS(t, e.ss.wsURL("/api/v1/pods?watch=true&access_token=alice-token"), nil), wsSingle)

	// A browser: the token in a subprotocol entry, next to the protocol the
	// server selects.
	proto := http.Header{"Sec-WebSocket-Protocol": {WebSocketProtocol + ", " + WebSocketTokenProtocol +
		base64.RawURLEncoding.EncodeToString([]byte("alice-token"))}}
	mux, resp := openMuxWith(t, e.ss.wsURL("/api/v1/stream"), proto)
	if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != WebSocketProtocol {
		t.Errorf("selected subprotocol %q; expect %q (never the token)", got, WebSocketProtocol)
	}
	muxPods := mux.subscribe(t, "pods", `,"resource":"pods"`, nil)
	mux.subscribe(t, "nodes", `,"resource":"nodes"`, nil)
	if m := mux.expectOther(t); m.Get("id").Str != "nodes" || m.Get("code").Int() != 403 || m.Get("reason").Str != "Forbidden" {
		t.Errorf("subscribing to nodes: %s; expect a 403 ERROR", m.Raw)
	}
	mux.subscribe(t, "b", `,"resource":"pods","namespace":"team-b"`, nil)
	if m := mux.expectOther(t); m.Get("id").Str != "b" || m.Get("code").Int() != 403 {
		t.Errorf("subscribing to team-b: %s; expect a 403 ERROR", m.Raw)
	}

	all := map[string]*replica{"SSE": sse, "SSE access_token": sseByParam, "WebSocket": wsSingle, "mux": muxPods}
	for name, r := range all {
		r.waitEqual(t, name+" snapshot is team-a's pods", inA)
	}
	// Changes in team-b are not seen; those in team-a are.
	e.ss.f.Sim.Apply("pods", teamPod("team-b", "b-new", "10.77.1.2"))
	e.ss.f.Sim.Delete("pods", "team-b", "b-0")
	e.ss.f.Sim.Apply("pods", teamPod("team-a", "a-new", "10.77.1.1"))
	cachetest.Eventually(t, "a-new cached", func() bool { return inA()["team-a/a-new"] != "" })
	for name, r := range all {
		r.waitEqual(t, name+" follows team-a", inA)
		r.mu.Lock()
		for _, ev := range r.events {
			if strings.Contains(ev, "team-b/") {
				t.Errorf("%s saw %s", name, ev)
			}
		}
		r.mu.Unlock()
	}
}

func TestAuthStreamRefusals(t *testing.T) {
	e := startAuth(t, Options{})
	for _, tc := range []struct {
		name   string
		url    string
		header http.Header
		code   int
	}{
		{"SSE without a token", e.ss.url + "/api/v1/pods?watch=true", nil, 401},
		{"SSE with a bad access_token", e.ss.url + "/api/v1/pods?watch=true&access_token=forged", nil, 401},
		{"SSE in a forbidden namespace", e.ss.url + "/api/v1/pods?watch=true&namespace=team-b",
			http.Header{"Authorization": {"Bearer alice-token"}}, 403},
		{"SSE on nodes", e.ss.url + "/api/v1/nodes?watch=true", http.Header{"Authorization": {"Bearer alice-token"}}, 403},
		{"two tokens", e.ss.url + "/api/v1/pods?watch=true&access_token=alice-token",
			http.Header{"Authorization": {"Bearer admin-token"}}, 401},
		{"access_token is for streams only", e.ss.url + "/api/v1/pods?access_token=alice-token", nil, 401},
	} {
		c := openSSE(t, tc.url, tc.header)
		if c.resp.StatusCode != tc.code {
			t.Errorf("%s: %d; expect %d", tc.name, c.resp.StatusCode, tc.code)
		}
	}
	_, resp, err := websocket.DefaultDialer.Dial(e.ss.wsURL("/api/v1/stream"), nil)
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("WebSocket without a token: %v %v; expect 401", err, resp)
	}
	bad := http.Header{"Sec-WebSocket-Protocol": {WebSocketProtocol + ", " + WebSocketTokenProtocol + "!!"}}
	_, resp, err = websocket.DefaultDialer.Dial(e.ss.wsURL("/api/v1/stream"), bad)
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("WebSocket with a malformed token entry: %v %v; expect 401", err, resp)
	}
}

func TestStaticTokensWithoutAuthorization(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	st, err := auth.ParseStaticTokens([]byte("s3cret,alice,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := New(f.Cache, Options{Auth: AuthOptions{Authenticator: st}}).Handler()
	for _, tc := range []struct {
		auth string
		code int
	}{{"", 401}, {"Bearer s3cret", 200}, {"bearer   s3cret ", 200}, {"Bearer s3cre", 401}, {"Basic czNjcmV0", 401}} {
		req := localRequest("GET", "/api/v1/pods?limit=1", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("Authorization %q: %d; expect %d", tc.auth, rec.Code, tc.code)
		}
		if rec.Code == 200 && rec.Header().Get("Cache-Control") != "no-store" {
			t.Error("an authenticated answer may be cached by proxies")
		}
	}
	// Without an authorizer, /metrics needs a token only.
	req := localRequest("GET", "/metrics", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("/metrics with a token: %d", rec.Code)
	}
}

// TestAuthTokenFloodIsRefusedNotReviewed: an address that sends new bearer
// tokens beyond its review budget gets 429 without a review, while a known
// token from that same address is still answered from the cache.
func TestAuthTokenFloodIsRefusedNotReviewed(t *testing.T) {
	e := startAuth(t, Options{})
	if resp, _ := e.get(t, "/api/v1/pods", "alice-token"); resp.StatusCode != http.StatusOK {
		t.Fatalf("alice before the flood: %d", resp.StatusCode)
	}
	before, _ := e.api.Reviews()
	codes := map[int]int{}
	for i := range 60 {
		resp, _ := e.get(t, "/api/v1/pods", fmt.Sprintf("random-%d", i))
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Fatal("a 429 without Retry-After")
		}
		if i%10 == 9 {
			if resp, body := e.get(t, "/api/v1/pods", "alice-token"); resp.StatusCode != http.StatusOK {
				t.Fatalf("alice during the flood: %d %s", resp.StatusCode, body)
			}
		}
	}
	after, _ := e.api.Reviews()
	// The budget is 20 at once, plus 5/s for however long this took.
	if codes[http.StatusTooManyRequests] == 0 || after-before > 40 || codes[http.StatusUnauthorized] != int(after-before) {
		t.Fatalf("60 random tokens: answers %v, %d TokenReviews; want 429s beyond the budget, a review per 401", codes, after-before)
	}
}

// TestAuthIPOwnersOfEveryKind: Services and nodes are shown to those who
// may list them, each answer of a batch is filtered as a single lookup is.
func TestAuthIPOwnersOfEveryKind(t *testing.T) {
	e := startAuth(t, Options{})
	for _, tt := range []struct {
		name, token, ip string
		code            int
		match           string
	}{
		{"alice looks up a ClusterIP", "alice-token", "10.96.0.1", 404, ""},
		{"an admin looks up a ClusterIP", "admin-token", "10.96.0.1", 200, "service"},
		{"alice looks up a node address", "alice-token", "10.0.0.11", 404, ""},
		{"an admin looks up a node address", "admin-token", "10.0.0.11", 200, "hostNetwork"},
	} {
		resp, body := e.get(t, "/api/v1/ip/"+tt.ip, tt.token)
		if resp.StatusCode != tt.code || gjson.GetBytes(body, "match").Str != tt.match {
			t.Errorf("%s: %d %.200s; expect %d match %q", tt.name, resp.StatusCode, body, tt.code, tt.match)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, e.ss.url+"/api/v1/ip:lookup",
		strings.NewReader(`{"queries":[{"ip":"10.77.0.9"},{"ip":"10.96.0.1"},{"ip":"10.77.0.2"},{"ip":"10.77.0.1"}]}`))
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got []string
	for _, r := range gjson.GetBytes(body, "results").Array() {
		got = append(got, r.Get("match").Str+r.Get("error.code").Raw)
	}
	if want := []string{"pod", "404", "404", "pod"}; resp.StatusCode != 200 || !slices.Equal(got, want) {
		t.Errorf("alice's batch: %d %v; expect %v\n%s", resp.StatusCode, got, want, body)
	}
}

// TestAuthAWalkIsNotAnotherCallers: a question's kept walk is answered
// only to a caller confined to the same namespaces: alice, who may read
// team-a only, presenting an admin's continue token gets a 400, not the
// admin's rows.
func TestAuthAWalkIsNotAnotherCallers(t *testing.T) {
	e := startAuth(t, Options{})
	resp, body := e.get(t, "/api/v1/pods?sort=-name&limit=1", "admin-token")
	token := gjson.GetBytes(body, "metadata.continue").Str
	if resp.StatusCode != 200 || token == "" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if resp, body := e.get(t, "/api/v1/pods?sort=-name&limit=1&continue="+url.QueryEscape(token), "admin-token"); resp.StatusCode != 200 {
		t.Fatalf("the admin's next page: %d %s", resp.StatusCode, body)
	}
	resp, body = e.get(t, "/api/v1/pods?sort=-name&limit=100&continue="+url.QueryEscape(token), "alice-token")
	if resp.StatusCode != 400 || !strings.Contains(string(body), "another question") {
		t.Fatalf("alice continuing the admin's walk: %d %s; expect 400", resp.StatusCode, body)
	}
}
