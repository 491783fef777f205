package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// TestRouteTableIsTheOnlyPlaceThatKnowsPaths fails when a file other than
// routes.go names a route's path or asks echo for the matched path: the
// facts of a route are read from its entry, never re-derived from strings.
func TestRouteTableIsTheOnlyPlaceThatKnowsPaths(t *testing.T) {
	paths := map[string]bool{}
	for _, rt := range New(noCache{}, Options{Logger: quiet()}).table() {
		paths[rt.path] = rt.path != "/" // "/" is every URL's first byte, not a route name
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if name == "routes.go" || strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING && paths[s] {
					t.Errorf("%s: names the route path %q: read the route's entry instead", fset.Position(n.Pos()), s)
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Path" && len(n.Args) == 0 {
					t.Errorf("%s: asks for the matched path: use routeOf", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
}

// TestRouteFactsDecideAuthentication walks the table: a public route
// answers without credentials, every other one asks for them; only a
// stream may carry its token in the URL.
func TestRouteFactsDecideAuthentication(t *testing.T) {
	tokens, err := auth.ParseStaticTokens([]byte("good-token,alice,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	s := New(f.Cache, Options{Logger: quiet(), Auth: AuthOptions{Authenticator: tokens}})
	h := s.Handler()
	for _, rt := range s.table() {
		target := samplePath(rt.path)
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			rec := do(t, h, rt.method, target)
			if got := rec.Code == http.StatusUnauthorized; got != (rt.authz != public) {
				t.Errorf("without a token: %d; the route is declared authz=%d", rec.Code, rt.authz)
			}
			inURL := do(t, h, rt.method, target+"?access_token=good-token")
			if rt.authz != public && (inURL.Code == http.StatusUnauthorized) == (rt.kind == streamKind) {
				t.Errorf("token in the URL: %d; only a stream takes it there (kind=%d)", inURL.Code, rt.kind)
			}
		})
	}
}

// TestRouteFactsDecideLatencySamples: a REST answer is a latency sample
// whatever the request's headers say; a stream, whatever they say, is not.
func TestRouteFactsDecideLatencySamples(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	h := New(f.Cache, Options{Logger: quiet()}).Handler()
	req := func(target string, header ...string) {
		r := localRequest(http.MethodGet, target, nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	req("/api/v1/pods?limit=1", "Accept", "text/event-stream") // a list, whatever it accepts
	req("/api/v1/pods?watch=false")                            // refused (400), not a stream
	req("/api/v1/pods?watch=true")                             // a stream: refused without a transport, still a stream
	metrics := do(t, h, http.MethodGet, "/metrics").Body.String()
	const list = `route="/api/v1/:resource"`
	for _, want := range []string{
		`kubeindex_http_request_duration_seconds_count{` + list + `} 2`,
		`kubeindex_http_requests_total{code="400",method="GET",` + list + `} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// samplePath fills a route's parameters with values that exist in the
// default test cluster, or at least parse.
func samplePath(path string) string {
	r := strings.NewReplacer(":resource", "pods", ":namespace", "kube-system", ":name", "kube-proxy-zhstf",
		":index", "node", ":ip", "10.0.0.12", ":file", "app.js", `\:`, ":")
	return r.Replace(path)
}

// TestWrongMethodIsA405WithAllow walks the table: on every path, every
// method no route serves is a 405 whose Allow header names the methods
// the path does serve, whichever less specific path has the method
// (GET /api/v1/ip:lookup is no list of a resource "ip:lookup"); OPTIONS
// is a 204 with the same header; the Kubernetes API's refused writes are
// 405s too, and are not in Allow.
func TestWrongMethodIsA405WithAllow(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	s := New(f.Cache, Options{Logger: quiet()})
	h := s.Handler()
	serves := map[string][]string{}
	for _, rt := range s.table() {
		if !rt.refusal {
			serves[rt.path] = append(serves[rt.path], rt.method)
		}
	}
	methods := []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodTrace, "PROPFIND", "FOO"}
	for path, served := range serves {
		target := strings.ReplaceAll(samplePath(path), `\:`, ":")
		want := strings.Join(slices.Sorted(slices.Values(append(slices.Clone(served), http.MethodOptions))), ",")
		allow := func(rec *httptest.ResponseRecorder) string {
			var got []string
			for m := range strings.SplitSeq(rec.Header().Get("Allow"), ",") {
				got = append(got, strings.TrimSpace(m))
			}
			slices.Sort(got)
			return strings.Join(got, ",")
		}
		for _, m := range methods {
			if slices.Contains(served, m) {
				continue
			}
			rec := do(t, h, m, target)
			if rec.Code != http.StatusMethodNotAllowed || allow(rec) != want {
				t.Errorf("%s %s: %d, Allow %q; expect 405, Allow %s (%s)", m, target, rec.Code, rec.Header().Get("Allow"), want,
					strings.TrimSpace(rec.Body.String()))
			}
		}
		rec := do(t, h, http.MethodOptions, target)
		if rec.Code != http.StatusNoContent || allow(rec) != want {
			t.Errorf("OPTIONS %s: %d, Allow %q; expect 204, Allow %s", target, rec.Code, rec.Header().Get("Allow"), want)
		}
	}
}
