package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// searchHits reads a search answer as "resource namespace/name rank match".
func searchHits(body []byte) []string {
	var out []string
	for _, it := range gjson.GetBytes(body, "items").Array() {
		out = append(out, fmt.Sprintf("%s %s/%s %s %s", it.Get("resource").Str, it.Get("namespace").Str, it.Get("name").Str,
			it.Get("rank").Str, it.Get("match").Str))
	}
	return out
}

// TestSearchAnswers: the answer's shape, pages that join to the whole
// with the same total, a projected object with its labels and nothing
// of its spec, and 400s that name the parameter.
func TestSearchAnswers(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	for i := range 5 {
		pod := fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"needle-%d","namespace":"hay","labels":{"app":"Needle"}},
			"spec":{"containers":[{"name":"c","image":"secret-image"}]},"status":{"phase":"Running","podIP":"10.66.0.%d","podIPs":[{"ip":"10.66.0.%d"}]}}`, i, i, i)
		if err := f.Sim.Apply("pods", pod); err != nil {
			t.Fatal(err)
		}
	}
	cachetest.Eventually(t, "the pods are cached", func() bool {
		return len(cachetest.State(t, f.Cache, "pods", cache.ListQuery{Namespace: "hay"})) == 5
	})
	h := New(f.Cache, Options{Logger: quiet()}).Handler()

	var got []string
	next := "/api/v1/search?q=NEEDLE&namespace=hay&limit=2"
	for pages := 0; next != ""; pages++ {
		rec := do(t, h, http.MethodGet, next)
		body := rec.Body.Bytes()
		if rec.Code != 200 || gjson.GetBytes(body, "kind").Str != "SearchResult" || gjson.GetBytes(body, "total").Int() != 5 {
			t.Fatalf("page %d: %d %s", pages, rec.Code, body)
		}
		got = append(got, searchHits(body)...)
		next = ""
		if tok := gjson.GetBytes(body, "continue").Str; tok != "" {
			next = "/api/v1/search?q=NEEDLE&namespace=hay&limit=2&continue=" + url.QueryEscape(tok)
		}
		if pages > 5 {
			t.Fatal("too many pages")
		}
	}
	expect := []string{"pods hay/needle-0 exact label", "pods hay/needle-1 exact label", "pods hay/needle-2 exact label",
		"pods hay/needle-3 exact label", "pods hay/needle-4 exact label"} // the label is exact, the name a prefix
	if !slices.Equal(got, expect) {
		t.Errorf("pages joined: %q; expect %q", got, expect)
	}

	rec := do(t, h, http.MethodGet, "/api/v1/search?q=10.66.0.3&resources=pods,services")
	item := gjson.GetBytes(rec.Body.Bytes(), "items.0")
	if rec.Code != 200 || item.Get("key").Str != "status.podIPs" || item.Get("value").Str != "10.66.0.3" || item.Get("match").Str != "ip" ||
		item.Get("object.metadata.labels.app").Str != "Needle" || item.Get("object.kind").Str != "Pod" || item.Get("object.spec").Exists() ||
		gjson.GetBytes(rec.Body.Bytes(), "total").Int() != 1 {
		t.Errorf("an address: %d %s", rec.Code, rec.Body)
	}

	for _, tc := range []struct{ target, expect string }{
		{"/api/v1/search", "q: the text to search for is required"},
		{"/api/v1/search?q=+", "q: the text to search for is required"},
		{"/api/v1/search?q=" + strings.Repeat("a", 254), "q: at most 253 bytes"},
		{"/api/v1/search?q=a&resources=pods,nope", `resources: resource is not cached: "nope"`},
		{"/api/v1/search?q=a&resources=pods,,services", "resources: item 2 is empty"},
		{"/api/v1/search?q=a&resources=pods,pods", "resources: pods is named twice"},
		{"/api/v1/search?q=a&limit=0", "limit: an integer from 1 to 1000"},
		{"/api/v1/search?q=a&namespace=hay&resources=pods,nodes", "resources: nodes is cluster-scoped: namespace does not apply"},
		{"/api/v1/search?q=a&limit=1001", "limit: an integer from 1 to 1000"},
		{"/api/v1/search?q=a&namespace=Not_Valid", `namespace "Not_Valid" is not a valid namespace name`},
		{"/api/v1/search?q=a&continue=xyz", "continue token is malformed"},
		{"/api/v1/search?q=a&sort=name", `unknown query parameter "sort"`},
	} {
		rec := do(t, h, http.MethodGet, tc.target)
		if msg := gjson.GetBytes(rec.Body.Bytes(), "message").Str; rec.Code != 400 || !strings.Contains(msg, tc.expect) {
			t.Errorf("%s: %d %q; expect 400 with %q", tc.target, rec.Code, msg, tc.expect)
		}
	}
	tok := gjson.GetBytes(do(t, h, http.MethodGet, "/api/v1/search?q=needle&limit=1").Body.Bytes(), "continue").Str
	if rec := do(t, h, http.MethodGet, "/api/v1/search?q=needle-&limit=1&continue="+url.QueryEscape(tok)); rec.Code != 400 {
		t.Errorf("a token of another search: %d %s; expect 400", rec.Code, rec.Body)
	}
}

// TestAuthSearchShowsOnlyWhatTheCallerMayList: a restricted caller's
// search reads each resource only where it may list it; what it may
// not read shows nowhere, not in the total either; a resource it names
// and may not list is a 403, as its list is; another caller's token is
// refused.
func TestAuthSearchShowsOnlyWhatTheCallerMayList(t *testing.T) {
	e := startAuth(t, Options{})
	for _, tc := range []struct {
		name, token, path string
		code              int
		hits              []string
	}{
		{"alice: team-a only", "alice-token", "/api/v1/search?q=shared", 200,
			[]string{"pods team-a/a-shared substring name"}},
		{"alice: an address shared with team-b", "alice-token", "/api/v1/search?q=10.77.0.9", 200,
			[]string{"pods team-a/a-shared exact ip"}},
		{"alice: an address only team-b holds", "alice-token", "/api/v1/search?q=10.77.0.2", 200, nil},
		{"alice: a label value", "alice-token", "/api/v1/search?q=TEAM&resources=pods", 200,
			[]string{"pods team-a/a-0 exact label", "pods team-a/a-1 exact label", "pods team-a/a-shared exact label"}},
		{"alice names nodes", "alice-token", "/api/v1/search?q=node&resources=nodes", 403, nil},
		{"alice asks in team-b", "alice-token", "/api/v1/search?q=b-0&namespace=team-b", 403, nil}, // may list nothing there
		{"admin: both", "admin-token", "/api/v1/search?q=shared&resources=pods", 200,
			[]string{"pods team-a/a-shared substring name", "pods team-b/b-shared substring name"}},
		{"nobody", "nobody-token", "/api/v1/search?q=shared", 403, nil},
		{"no token", "", "/api/v1/search?q=shared", 401, nil},
	} {
		resp, body := e.get(t, tc.path, tc.token)
		if resp.StatusCode != tc.code {
			t.Errorf("%s: %d %s; expect %d", tc.name, resp.StatusCode, body, tc.code)
			continue
		}
		if tc.code != 200 {
			continue
		}
		if got := searchHits(body); !slices.Equal(got, tc.hits) || gjson.GetBytes(body, "total").Int() != int64(len(tc.hits)) {
			t.Errorf("%s: %q (total %d); expect %q", tc.name, got, gjson.GetBytes(body, "total").Int(), tc.hits)
		}
	}
	_, body := e.get(t, "/api/v1/search?q=shared&resources=pods&limit=1", "admin-token")
	tok := gjson.GetBytes(body, "continue").Str
	if tok == "" {
		t.Fatalf("the admin's first page: %s", body)
	}
	if resp, body := e.get(t, "/api/v1/search?q=shared&resources=pods&limit=1&continue="+url.QueryEscape(tok), "alice-token"); resp.StatusCode != 400 {
		t.Errorf("alice continuing the admin's search: %d %s; expect 400", resp.StatusCode, body)
	}
}

// FuzzParseSearch: any parameters give a search or a 400, never a panic;
// what is accepted is within the bounds.
func FuzzParseSearch(f *testing.F) {
	f.Add("web", "pods,services", "50")
	f.Add(" ", "", "")
	f.Add("10.0.0.1", "pods,,nodes", "0")
	f.Add(strings.Repeat("x", 300), "PODS,pods", "1001")
	f.Fuzz(func(t *testing.T, text, resources, limit string) {
		q := url.Values{"q": {text}}
		if resources != "" {
			q.Set("resources", resources)
		}
		if limit != "" {
			q.Set("limit", limit)
		}
		resolve := func(name string) (cache.Resource, error) {
			if n := strings.ToLower(name); n == "pods" || n == "services" || n == "nodes" {
				return cache.Resource{Name: n, Plural: n, Namespaced: n != "nodes"}, nil
			}
			return cache.Resource{}, fmt.Errorf("%w: %q", cache.ErrUnknownResource, name)
		}
		p, err := parseSearch(q, resolve)
		if err != nil {
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("%v is not a 400", err)
			}
			return
		}
		if p.text == "" || len(p.text) > cache.MaxSearchText || p.limit < 1 || p.limit > maxSearchLimit {
			t.Fatalf("accepted %+v", p)
		}
		if resources != "" && len(p.resources) == 0 {
			t.Fatalf("resources %q read as none", resources)
		}
	})
}

// TestASearchWalkExpiresWith410: the searches pages come from are
// bounded in number; a token into one no longer kept is a 410 Expired
// Status, never a silently different page.
func TestASearchWalkExpiresWith410(t *testing.T) {
	h := New(cachetest.Start(t, cachetest.DefaultSpecs()...).Cache, Options{Logger: quiet()}).Handler()
	first := do(t, h, http.MethodGet, "/api/v1/search?q=node&limit=1")
	token := gjson.GetBytes(first.Body.Bytes(), "continue").Str
	if first.Code != 200 || token == "" {
		t.Fatalf("%d %s", first.Code, first.Body)
	}
	next := "/api/v1/search?q=node&limit=1&continue=" + url.QueryEscape(token)
	if rec := do(t, h, http.MethodGet, next); rec.Code != 200 {
		t.Fatalf("the next page: %d %s", rec.Code, rec.Body)
	}
	for range 100 { // more searches than are kept
		do(t, h, http.MethodGet, "/api/v1/search?q=e&limit=1")
	}
	rec := do(t, h, http.MethodGet, next)
	if st := gjson.ParseBytes(rec.Body.Bytes()); rec.Code != http.StatusGone || st.Get("reason").Str != "Expired" {
		t.Fatalf("an expired search: %d %s; expect 410 Expired", rec.Code, rec.Body)
	}
}
