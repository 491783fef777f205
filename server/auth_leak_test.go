package server

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/auth/authtest"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// answer is what a caller can observe of one request: status, headers
// (but the date) and body, with the address asked about written "IP".
type answer struct {
	code   int
	header http.Header
	body   string
}

func (e *authEnv) ask(t *testing.T, method, path, body, token, ip string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, e.ss.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	resp.Header.Del("Date")
	if ip != "" {
		b = []byte(strings.ReplaceAll(string(b), ip, "IP"))
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// startTwins is startAuth with static tokens (so that only access reviews
// reach the fake API server) for n users twin-0… with alice's rights: read
// pods in team-a.
func startTwins(t *testing.T, n int) *authEnv {
	t.Helper()
	var file strings.Builder
	file.WriteString("admin-token,root,2,admins\nnobody-token,nobody,4\n")
	rules := authRules()
	for i := range n {
		fmt.Fprintf(&file, "twin-%d,twin-%d,t%d\n", i, i, i)
		rules = append(rules, authtest.Rule{User: fmt.Sprintf("twin-%d", i), Verbs: []string{"get", "list", "watch"}, Resource: "pods", Namespace: "team-a"})
	}
	tokens, err := auth.ParseStaticTokens([]byte(file.String()))
	if err != nil {
		t.Fatal(err)
	}
	e := startAuth(t, Options{Auth: AuthOptions{Authenticator: tokens}})
	e.api.SetRules(rules...)
	return e
}

// TestAuthIPLookupHidesWhetherAnAddressIsHeld: an address nobody holds and
// one held only by a pod the caller may not see are told apart by nothing
// (status, headers, body, the reviews they cost), now, at a moment, in a
// batch, and while the authorizer is down. Each question is asked by a
// caller nothing is cached for.
func TestAuthIPLookupHidesWhetherAnAddressIsHeld(t *testing.T) {
	e := startTwins(t, 24)
	const free, hidden = "10.77.0.5", "10.77.0.2" // nobody; team-b/b-0 (same length: same Content-Length)
	now := time.Now()                             // after the pods were cached, so inside the history
	at := fmt.Sprintf("%d.%09d", now.Unix(), now.Nanosecond())
	probes := []struct{ name, method, path, body string }{
		{"now", http.MethodGet, "/api/v1/ip/%s", ""},
		{"at a moment", http.MethodGet, "/api/v1/ip/%s?at=" + at, ""},
		{"with a port", http.MethodGet, "/api/v1/ip/%s?port=80", ""},
		{"batch", http.MethodPost, "/api/v1/ip:lookup", `{"queries":[{"ip":"%[1]s"},{"ip":"%[1]s","at":` + at + `}]}`},
	}
	twin := 0
	observe := func(p struct{ name, method, path, body string }, ip string) (answer, int64) {
		token := fmt.Sprintf("twin-%d", twin)
		twin++
		path, body := p.path, p.body
		if strings.Contains(path, "%s") {
			path = fmt.Sprintf(path, ip)
		}
		if body != "" {
			body = fmt.Sprintf(body, ip)
		}
		_, before := e.api.Reviews()
		a := e.ask(t, p.method, path, body, token, ip)
		_, after := e.api.Reviews()
		return a, after - before
	}
	for _, down := range []bool{false, true} {
		e.api.SetDown(down)
		for _, p := range probes {
			a, reviews := observe(p, free)
			b, reviewsB := observe(p, hidden)
			if a.code != b.code || a.body != b.body || !maps.EqualFunc(a.header, b.header, slices.Equal) || reviews != reviewsB {
				t.Errorf("down %v, %s: a free address and a hidden pod's are told apart:\nfree:   %d %v %d reviews %s\nhidden: %d %v %d reviews %s",
					down, p.name, a.code, a.header, reviews, a.body, b.code, b.header, reviewsB, b.body)
			}
			want := http.StatusNotFound
			if p.method == http.MethodPost {
				want = http.StatusOK
			}
			if down {
				want = http.StatusServiceUnavailable
			}
			if a.code != want {
				t.Errorf("down %v, %s: %d %s; expect %d", down, p.name, a.code, a.body, want)
			}
		}
	}
	e.api.SetDown(false)

	// A port only a hidden pod declares picks nothing: the answer is the
	// visible holders', as for a port nobody declares.
	hostPod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a-host","namespace":"team-a"},
		"spec":{"nodeName":"node-2","hostNetwork":true,"containers":[{"name":"c","image":"team:1","ports":[{"containerPort":7000}]}]},
		"status":{"phase":"Running","podIP":"10.0.0.12","podIPs":[{"ip":"10.0.0.12"}]}}`
	if err := e.ss.f.Sim.Apply("pods", []byte(hostPod)); err != nil {
		t.Fatal(err)
	}
	cachetest.Eventually(t, "the team-a hostNetwork pod is cached", func() bool {
		return e.ask(t, http.MethodGet, "/api/v1/pods/team-a/a-host", "", "admin-token", "").code == http.StatusOK
	})
	if all := e.ask(t, http.MethodGet, "/api/v1/ip/10.0.0.12?port=9100", "", "admin-token", ""); gjson.Get(all.body, "via").Str != "port" {
		t.Fatalf("the admin's answer: %s; expect the node exporter picked by its port", all.body)
	}
	declared := e.ask(t, http.MethodGet, "/api/v1/ip/10.0.0.12?port=9100", "", "twin-0", "")
	nobody := e.ask(t, http.MethodGet, "/api/v1/ip/10.0.0.12?port=9101", "", "twin-0", "")
	if declared.code != 200 || strings.Replace(declared.body, "9100", "9101", 1) != nobody.body {
		t.Errorf("port 9100, declared by a hidden pod only: %d %s\nport 9101, declared by nobody: %d %s", declared.code, declared.body, nobody.code, nobody.body)
	}

	// Who may list no holder anywhere is refused, whatever the address.
	for _, ip := range []string{free, hidden, "10.77.0.1"} {
		if a := e.ask(t, http.MethodGet, "/api/v1/ip/"+ip, "", "nobody-token", ip); a.code != http.StatusForbidden {
			t.Errorf("nobody looks up %s: %d %s", ip, a.code, a.body)
		}
	}
}

// TestAuthFreshnessOnlyForClusterWideReaders: a caller who may read pods in
// one namespace sees nothing move when a pod elsewhere changes: no
// resourceVersion or last event in headers, resource status or IP answers.
// One who may list pods cluster-wide sees them.
func TestAuthFreshnessOnlyForClusterWideReaders(t *testing.T) {
	e := startAuth(t, Options{})
	paths := []string{"/api/v1/resources/pods", "/api/v1/resources", "/api/v1/pods?namespace=team-a&limit=1",
		"/api/v1/pods/team-a/a-0", "/api/v1/ip/10.77.0.1", "/api/v1/pods/team-b/b-0", "/healthz",
		"/k8s/api/v1/namespaces/team-a/pods/a-0"}
	look := func(token string) map[string]answer {
		out := map[string]answer{}
		for _, p := range paths {
			out[p] = e.ask(t, http.MethodGet, p, "", token, "")
		}
		return out
	}
	podsRV := func(token string) string {
		return gjson.Get(e.ask(t, http.MethodGet, "/api/v1/resources/pods", "", token, "").body, "resourceVersion").Str
	}
	before := look("alice-token")
	adminRV := podsRV("admin-token")
	if adminRV == "" {
		t.Fatal("the admin is not told the pods' resourceVersion")
	}
	if admin := e.ask(t, http.MethodGet, "/api/v1/pods/team-a/a-0", "", "admin-token", ""); admin.header.Get(HeaderResourceVersion) == "" || admin.header.Get(HeaderLastEvent) == "" {
		t.Errorf("the admin's answer lacks the freshness details: %v", admin.header)
	}
	for p, a := range before {
		if a.header.Get(HeaderResourceVersion) != "" || a.header.Get(HeaderLastEvent) != "" || a.header.Get(HeaderStale) == "" && p != "/healthz" {
			t.Errorf("alice %s: headers %v; expect stale/synced, no version or last event", p, a.header)
		}
	}
	if st := gjson.Get(before["/api/v1/resources/pods"].body, "@this"); st.Get("resourceVersion").Exists() || st.Get("lastEvent").Exists() || !st.Get("synced").Bool() {
		t.Errorf("alice's pods status %s; expect synced, no version or last event", st.Raw)
	}
	if rv := gjson.Get(before["/api/v1/ip/10.77.0.1"].body, "metadata.resourceVersion"); rv.Str != "" {
		t.Errorf("alice's IP answer carries the pods' resourceVersion %s", rv.Raw)
	}

	// A pod alice may not read changes.
	if err := e.ss.f.Sim.Apply("pods", teamPod("team-b", "b-0", "10.77.0.4")); err != nil {
		t.Fatal(err)
	}
	cachetest.Eventually(t, "the admin sees the pods move", func() bool { return podsRV("admin-token") != adminRV })
	after := look("alice-token")
	for _, p := range paths {
		if p == "/api/v1/pods?namespace=team-a&limit=1" {
			continue // the list's resourceVersion is the API's (docs/security.md)
		}
		a, b := before[p], after[p]
		if a.code != b.code || a.body != b.body || !maps.EqualFunc(a.header, b.header, slices.Equal) {
			t.Errorf("alice %s moved when a pod in team-b changed:\nbefore %d %v %s\nafter  %d %v %s", p, a.code, a.header, a.body, b.code, b.header, b.body)
		}
	}
}
