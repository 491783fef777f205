package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/indexers"
)

// Fuzz targets that drive the real handler over a demo-backed cache: the
// parsers of query parameters, selectors, index values and paths, end to
// end. Properties: never a 5xx, errors are Status JSON with the same code,
// security headers always, and a 200 is never wider than what was asked.

// fuzzServer starts a demo cache for one fuzz target (in each fuzzing
// process); the handler is built once.
func fuzzServer(f *testing.F) (http.Handler, *cache.Cache) {
	fx := cachetest.Start(f, cachetest.DefaultSpecs()...)
	return New(fx.Cache, Options{Logger: quiet()}).Handler(), fx.Cache
}

func fuzzGet(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	req := localRequest(http.MethodGet, "/", nil)
	u, err := url.ParseRequestURI(target)
	if err != nil {
		t.Skip() // not a request line a client could send
	}
	req.URL, req.RequestURI = u, target
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code >= 500 {
		t.Fatalf("%q: %d %s", target, rec.Code, rec.Body)
	}
	if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("%q: no security headers", target)
	}
	if rec.Code >= 400 {
		st := gjson.ParseBytes(rec.Body.Bytes())
		if st.Get("kind").Str != "Status" || st.Get("code").Int() != int64(rec.Code) {
			t.Fatalf("%q: error body %s", target, rec.Body)
		}
	}
	return rec
}

// FuzzListQuery: any query string on a list. A 200 never answers more than
// the namespace and selector asked for (a malformed or misspelt one is a
// 400, not "everything").
func FuzzListQuery(f *testing.F) {
	for _, q := range []string{"namespace=kube-system", "labelSelector=app%3Dweb&limit=2", "index=node&value=node-1",
		"index=ip&value=10.0.0.12", "limit=1&continue=x", "namespace=%zz", "labelselector=a", "a=1;b=2",
		"labelSelector=app+in+(a,b),tier!=db", "limit=99999999999", "namespace=a&namespace=b", "watch=false"} {
		f.Add(q)
	}
	h, _ := fuzzServer(f)
	f.Fuzz(func(t *testing.T, query string) {
		rec := fuzzGet(t, h, "/api/v1/pods?"+query)
		if rec.Code != 200 {
			return
		}
		q, err := url.ParseQuery(query)
		if err != nil {
			t.Fatalf("%q: a malformed query answered 200", query)
		}
		sel, err := labels.Parse(q.Get("labelSelector"))
		if err != nil {
			t.Fatalf("%q: a bad selector answered 200", query)
		}
		for _, it := range gjson.GetBytes(rec.Body.Bytes(), "items").Array() {
			if ns := q.Get("namespace"); ns != "" && it.Get("metadata.namespace").Str != ns {
				t.Fatalf("%q: an item of namespace %q", query, it.Get("metadata.namespace").Str)
			}
			if !sel.Matches(itemLabels(it)) {
				t.Fatalf("%q: an item not matching the selector: %s", query, it.Get("metadata.labels").Raw)
			}
		}
	})
}

func itemLabels(it gjson.Result) labels.Set {
	set := labels.Set{}
	it.Get("metadata.labels").ForEach(func(k, v gjson.Result) bool {
		set[k.Str] = v.Str
		return true
	})
	return set
}

// FuzzLabelSelector: exactly the pods the selector matches, by an oracle
// independent of the cache's byte-level matching; or a 400 when the
// selector does not parse.
func FuzzLabelSelector(f *testing.F) {
	for _, s := range []string{"app=web", "app in (web,auth),tier!=db", "!app", "k8s-app", "a=b\x00c", "app=",
		"app notin ()", "x=" + strings.Repeat("y", 100), "app==web", "a,b,c", "app in (web", "a=b,a!=b"} {
		f.Add(s)
	}
	h, c := fuzzServer(f)
	all, err := c.List("pods", cache.ListQuery{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rec := fuzzGet(t, h, "/api/v1/pods?labelSelector="+url.QueryEscape(s))
		sel, perr := labels.Parse(s)
		if rec.Code != 200 {
			if rec.Code != 400 {
				t.Fatalf("%q: %d", s, rec.Code)
			}
			return
		}
		if perr != nil || strings.ContainsRune(s, 0) {
			t.Fatalf("%q: an unparsable selector answered 200", s)
		}
		var want []string
		for _, o := range all.Items {
			if sel.Matches(itemLabels(gjson.ParseBytes(o.Raw()))) {
				want = append(want, o.Key())
			}
		}
		if got := itemKeys(rec.Body.Bytes()); !slices.Equal(got, want) {
			t.Fatalf("%q: %d items; the oracle says %d", s, len(got), len(want))
		}
	})
}

// FuzzIndexValue: a lookup by any index name and value, the IP lookup and
// the index values' pages. A 200 holds only objects with that value.
func FuzzIndexValue(f *testing.F) {
	for _, s := range [][2]string{{"ip", "10.0.0.12"}, {"ip", "fd00:10:0:0:0:0:0:b"}, {"ip", "::ffff:10.0.0.12"},
		{"node", "node-1"}, {"owner", "ReplicaSet/x"}, {"image", "registry.k8s.io/pause:3.10"}, {"nope", "1"},
		{"ip", "999.1.1.1"}, {"ip", ""}, {"app", "%"}, {"", "x"}} {
		f.Add(s[0], s[1])
	}
	h, _ := fuzzServer(f)
	f.Fuzz(func(t *testing.T, index, value string) {
		rec := fuzzGet(t, h, "/api/v1/pods?index="+url.QueryEscape(index)+"&value="+url.QueryEscape(value))
		if rec.Code == 200 && index == "ip" {
			norm, _ := indexers.NormalizeIP(value)
			for _, it := range gjson.GetBytes(rec.Body.Bytes(), "items").Array() {
				if !slices.ContainsFunc(it.Get("status.podIPs.#.ip").Array(), func(r gjson.Result) bool { return r.Str == norm }) &&
					it.Get("status.podIP").Str != norm {
					t.Fatalf("ip %q: a pod without it", value)
				}
			}
		}
		rec = fuzzGet(t, h, "/api/v1/ip/"+url.PathEscape(value))
		if rec.Code == 200 && len(gjson.GetBytes(rec.Body.Bytes(), "pods").Array()) == 0 {
			t.Fatalf("ip %q: 200 with no pod", value)
		}
		fuzzGet(t, h, "/api/v1/resources/pods/indexes/"+url.PathEscape(index)+"?continue="+url.QueryEscape(value)+"&limit=3")
	})
}

// FuzzRoutes: any path and query on any route: never a 5xx.
func FuzzRoutes(f *testing.F) {
	for _, p := range []string{"/api/v1/pods/kube-system/x", "/api/v1/nodes/node-1", "/ui/app.js", "/ui/..%2f..",
		"/api/v1/resources/pods", "/readyz", "/api/v1/%ff", "/api/v1/pods?watch=1", "/api/v1/stream?x=1", "/metrics",
		"/api/v1/pods/a/b/c/d", "//api//v1//pods", "/api/v1/ip/%00"} {
		f.Add(p)
	}
	h, _ := fuzzServer(f)
	f.Fuzz(func(t *testing.T, target string) {
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		fuzzGet(t, h, target)
	})
}

// FuzzTakeToken: wherever a token is put, takeToken never panics, and a
// stream request leaves no token in its protocol header or query.
func FuzzTakeToken(f *testing.F) {
	f.Add("Bearer abc", "kubeindex, base64url.bearer.authorization.k8s.io.YWJj", "access_token=abc&x=1")
	f.Add("", "base64url.bearer.authorization.k8s.io.!!", "access_token=a&access_token=b")
	f.Add("Basic x", "", "access_token=%zz")
	f.Fuzz(func(t *testing.T, authz, protocols, query string) {
		r := localRequest(http.MethodGet, "/api/v1/stream", nil)
		r.Header.Set("Authorization", authz)
		r.Header.Set("Sec-WebSocket-Protocol", protocols)
		r.URL.RawQuery = query
		tok, err := takeToken(r, true)
		if err != nil || tok == "" {
			return
		}
		if strings.Contains(r.Header.Get("Sec-WebSocket-Protocol"), WebSocketTokenProtocol) {
			t.Fatalf("the token entry is still in the header: %q", r.Header.Get("Sec-WebSocket-Protocol"))
		}
		if q, err := url.ParseQuery(r.URL.RawQuery); err == nil && q.Has(accessTokenParam) {
			t.Fatalf("access_token is still in the query: %q", r.URL.RawQuery)
		}
	})
}
