package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/openapi"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// loadSpec parses the embedded document and validates it as OpenAPI 3.0:
// structure, $refs, path templates against their parameters, schemas.
func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec)
	if err != nil {
		t.Fatalf("openapi.json does not load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not valid OpenAPI: %v", err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Fatalf("openapi.json declares OpenAPI %q; expect 3.0.3", doc.OpenAPI)
	}
	return doc
}

// noCache is a Reader that configures nothing. Only Resources is
// implemented (the freshness middleware calls it); anything else panics,
// which is fine for tests that never reach a handler needing the cache.
type noCache struct{ Reader }

func (noCache) Resources() []cache.Status      { return nil }
func (noCache) Freshness() cache.Freshness     { return cache.Freshness{} }
func (noCache) APIResources() []cache.Resource { return nil }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// specPath turns an echo route path into an OpenAPI path template:
// /api/v1/:resource/:name becomes /api/v1/{resource}/{name}.
func specPath(t *testing.T, echoPath string) string {
	t.Helper()
	segs := strings.Split(echoPath, "/")
	for i, s := range segs {
		if strings.Contains(s, "*") {
			t.Fatalf("route %s: wildcard routes have no OpenAPI equivalent", echoPath)
		}
		if name, ok := strings.CutPrefix(s, ":"); ok {
			segs[i] = "{" + name + "}"
		}
	}
	return strings.ReplaceAll(strings.Join(segs, "/"), `\:`, ":") // an escaped colon is a colon
}

func TestOpenAPIIsValid(t *testing.T) {
	loadSpec(t)
}

// TestEveryRouteIsInTheSpecAndBack holds the route table and the document
// together: same paths, same methods, same summaries.
func TestEveryRouteIsInTheSpecAndBack(t *testing.T) {
	doc := loadSpec(t)
	inSpec := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			inSpec[method+" "+path] = op
		}
	}
	routes := New(noCache{}, Options{Logger: quiet()}).table()
	if len(routes) == 0 {
		t.Fatal("the route table is empty")
	}
	inTable := map[string]bool{}
	for _, rt := range routes {
		key := rt.method + " " + specPath(t, rt.path)
		if inTable[key] {
			t.Errorf("route %s is registered twice", key)
		}
		inTable[key] = true
		op, ok := inSpec[key]
		switch {
		case !ok:
			t.Errorf("route %s (%s) is not in openapi/openapi.json", key, rt.path)
		case op.Summary != rt.summary:
			t.Errorf("%s: summary in the spec %q; in the route table %q", key, op.Summary, rt.summary)
		}
	}
	for key := range inSpec {
		if !inTable[key] {
			t.Errorf("openapi/openapi.json documents %s, which no route serves", key)
		}
	}
}

func TestServesTheEmbeddedSpec(t *testing.T) {
	h := New(noCache{}, Options{Logger: quiet()}).Handler()
	rec := do(t, h, http.MethodGet, "/openapi.json")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q; expect application/json", ct)
	}
	if !bytes.Equal(rec.Body.Bytes(), openapi.Spec) {
		t.Error("the body is not the embedded openapi.json")
	}
}

// closeSchemas forbids properties the document does not name, in every
// schema that names its properties and does not say otherwise. The
// published document leaves them open so that adding a field is not a
// breaking change; in tests, closing them makes a field that is served but
// not documented fail. Kubernetes objects say additionalProperties: true
// and stay open.
func closeSchemas(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	var walk func(*openapi3.SchemaRef)
	walk = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
			s.AdditionalProperties.Has = new(false)
		}
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
	}
	for _, ref := range doc.Components.Schemas {
		walk(ref)
	}
}

// TestResponsesMatchTheSpec sends real requests to a server over the demo
// cluster and validates each response (status, headers, body) against the
// operation the document describes. Every status an operation documents,
// 500 apart, must be produced by some request here: the document invents
// none.
func TestResponsesMatchTheSpec(t *testing.T) {
	doc := loadSpec(t)
	closeSchemas(doc)
	synced := New(cachetest.Start(t, cachetest.DefaultSpecs()...).Cache, Options{Logger: quiet()}).Handler()
	unsynced := New(cachetest.New(t, cachetest.PodSpec()).Cache, Options{Logger: quiet()}).Handler()

	tests := []struct {
		path, target string // the operation's path template; the request
		h            http.Handler
		code         int
		revalidate   bool // send If-None-Match with the ETag of a first GET
	}{
		{"/", "/", synced, 200, false},
		{"/", "/", synced, 304, true},
		{"/ui/{file}", "/ui/app.js", synced, 200, false},
		{"/ui/{file}", "/ui/favicon.svg", synced, 200, false},
		{"/ui/{file}", "/ui/app.js", synced, 304, true},
		{"/ui/{file}", "/ui/no-such-file.js", synced, 404, false},
		{"/healthz", "/healthz", synced, 200, false},
		{"/readyz", "/readyz", synced, 200, false},
		{"/readyz", "/readyz", unsynced, 503, false},
		{"/metrics", "/metrics", synced, 200, false},
		{"/openapi.json", "/openapi.json", synced, 200, false},
		{"/api/v1/clusters", "/api/v1/clusters", synced, 200, false},
		{"/api/v1/clusters", "/api/v1/clusters?x=1", synced, 400, false},
		{"/api/v1/resources", "/api/v1/resources", synced, 200, false},
		{"/api/v1/resources", "/api/v1/resources?namespace=x", synced, 400, false},
		{"/api/v1/resources/{resource}", "/api/v1/resources/pods", synced, 200, false},
		{"/api/v1/resources/{resource}", "/api/v1/resources/deployment", synced, 200, false},
		{"/api/v1/resources/{resource}", "/api/v1/resources/widgets", synced, 404, false},
		{"/api/v1/resources/{resource}/indexes/{index}", "/api/v1/resources/pods/indexes/node", synced, 200, false},
		{"/api/v1/resources/{resource}/indexes/{index}", "/api/v1/resources/pods/indexes/node?limit=2", synced, 200, false},
		{"/api/v1/resources/{resource}/indexes/{index}", "/api/v1/resources/pods/indexes/image", synced, 200, false},
		{"/api/v1/resources/{resource}/indexes/{index}", "/api/v1/resources/pods/indexes/nope", synced, 400, false},
		{"/api/v1/resources/{resource}/indexes/{index}", "/api/v1/resources/widgets/indexes/node", synced, 404, false},
		{"/api/v1/resources/{resource}/indexes/{index}", "/api/v1/resources/pods/indexes/node", unsynced, 503, false},
		{"/api/v1/resources/{resource}/counts", "/api/v1/resources/pods/counts", synced, 200, false},
		{"/api/v1/resources/{resource}/counts", "/api/v1/resources/pods/counts?groupBy=status,node&filter=restarts%3C5", synced, 200, false},
		{"/api/v1/resources/{resource}/counts", "/api/v1/resources/pods/counts?groupBy=metadata.labels.app", synced, 200, false},
		{"/api/v1/resources/{resource}/counts", "/api/v1/resources/pods/counts?groupBy=a,b,c", synced, 400, false},
		{"/api/v1/resources/{resource}/counts", "/api/v1/resources/widgets/counts", synced, 404, false},
		{"/api/v1/resources/{resource}/counts", "/api/v1/resources/pods/counts", unsynced, 503, false},
		{"/api/v1/search", "/api/v1/search?q=node", synced, 200, false},
		{"/api/v1/search", "/api/v1/search?q=10.0.0.12&resources=pods,services&limit=1", synced, 200, false},
		{"/api/v1/search", "/api/v1/search?q=", synced, 400, false},
		{"/api/v1/search", "/api/v1/search?q=web", unsynced, 503, false},
		{"/api/v1/clusters/ip/{ip}", "/api/v1/clusters/ip/10.0.0.12", synced, 200, false},
		{"/api/v1/clusters/ip/{ip}", "/api/v1/clusters/ip/not-an-ip", synced, 400, false},
		{"/api/v1/ip/{ip}", "/api/v1/ip/10.0.0.12", synced, 200, false},
		{"/api/v1/ip/{ip}", "/api/v1/ip/192.0.2.1", synced, 404, false},
		{"/api/v1/ip/{ip}", "/api/v1/ip/not-an-ip", synced, 400, false},
		{"/api/v1/ip/{ip}", "/api/v1/ip/10.0.0.12", unsynced, 503, false},
		{"/api/v1/ip/{ip}", "/api/v1/ip/10.96.0.1", synced, 200, false},
		{"/api/v1/ip/{ip}", "/api/v1/ip/10.0.0.12?port=9100", synced, 200, false},
		{"/api/v1/ip/{ip}", "/api/v1/ip/10.0.0.12?port=9100&protocol=udp", synced, 200, false},
		{"/api/v1/ip/{ip}", "/api/v1/ip/10.0.0.12?port=0", synced, 400, false},
		{"/api/v1/ip/{ip}", "/api/v1/ip/10.0.0.12?at=" + strconv.FormatInt(time.Now().Unix()+1, 10), synced, 200, false},
		{"/api/v1/ip/{ip}", "/api/v1/ip/10.0.0.12?at=1", synced, 410, false},
		{"/api/v1/ip/{ip}", "/api/v1/ip/10.0.0.12?at=yesterday", synced, 400, false},
		{"/api/v1/{resource}", "/api/v1/pods", synced, 200, false},
		{"/api/v1/{resource}", "/api/v1/pods?namespace=kube-system&limit=2", synced, 200, false},
		{"/api/v1/{resource}", "/api/v1/pods?index=node&value=node-2&labelSelector=k8s-app%3Dkube-proxy", synced, 200, false},
		{"/api/v1/{resource}", "/api/v1/nodes", synced, 200, false},
		{"/api/v1/{resource}", "/api/v1/pods?filter=status=Running&filter=node+in+(node-1,node-2)&sort=-restarts,age&limit=3&fields=status.phase", synced, 200, false},
		{"/api/v1/{resource}", "/api/v1/pods?sort=-age&offset=2&limit=2", synced, 200, false},
		{"/api/v1/{resource}", "/api/v1/pods?limit=2&fields=restarts,ready,age,.status.phase", synced, 200, false},
		{"/api/v1/{resource}", "/api/v1/pods?filter=age%3Eabc", synced, 400, false},
		{"/api/v1/{resource}", "/api/v1/deployments", synced, 200, false},
		{"/api/v1/{resource}", "/api/v1/pods?labelSelector=app+in+(", synced, 400, false},
		{"/api/v1/{resource}", "/api/v1/widgets", synced, 404, false},
		{"/api/v1/{resource}", "/api/v1/pods", unsynced, 503, false},
		{"/api/v1/{resource}/{name}", "/api/v1/nodes/node-2", synced, 200, false},
		{"/api/v1/{resource}/{name}", "/api/v1/namespaces/kube-system", synced, 200, false},
		{"/api/v1/{resource}/{name}", "/api/v1/pods/web-0", synced, 400, false},
		{"/api/v1/{resource}/{name}", "/api/v1/nodes/no-such-node", synced, 404, false},
		{"/api/v1/{resource}/{name}", "/api/v1/pods/web-0", unsynced, 503, false},
		{"/api/v1/{resource}/{namespace}/{name}", "/api/v1/pods/kube-system/kube-proxy-zhstf", synced, 200, false},
		{"/api/v1/{resource}/{namespace}/{name}", "/api/v1/nodes/a/b", synced, 400, false},
		{"/api/v1/{resource}/{namespace}/{name}", "/api/v1/pods/kube-system/nope", synced, 404, false},
		{"/api/v1/{resource}/{namespace}/{name}", "/api/v1/pods/a/b", unsynced, 503, false},
		{"/api/v1/stream", "/api/v1/stream", synced, 400, false},
		{"/api/v1/ip:watch", "/api/v1/ip:watch", synced, 400, false},
		{"/k8s/version", "/k8s/version", synced, 200, false},
		{"/k8s/api", "/k8s/api", synced, 200, false},
		{"/k8s/api/v1", "/k8s/api/v1", synced, 200, false},
		{"/k8s/apis", "/k8s/apis", synced, 200, false},
		{"/k8s/apis/{group}", "/k8s/apis/apps", synced, 200, false},
		{"/k8s/apis/{group}/{version}", "/k8s/apis/apps/v1", synced, 200, false},
		{"/k8s/openapi/v2", "/k8s/openapi/v2", synced, 200, false},
		{"/k8s/openapi/v3", "/k8s/openapi/v3", synced, 200, false},
		{"/k8s/openapi/v3/api/v1", "/k8s/openapi/v3/api/v1", synced, 200, false},
		{"/k8s/openapi/v3/apis/{group}/{version}", "/k8s/openapi/v3/apis/apps/v1", synced, 200, false},
		{"/k8s/openapi/v3/apis/{group}/{version}", "/k8s/openapi/v3/apis/apps/v2", synced, 404, false},
		{"/k8s/api/v1/{resource}", "/k8s/api/v1/pods", synced, 200, false},
		{"/k8s/api/v1/{resource}/{name}", "/k8s/api/v1/nodes/node-2", synced, 200, false},
		{"/k8s/api/v1/namespaces/{namespace}", "/k8s/api/v1/namespaces/kube-system", synced, 200, false},
		{"/k8s/api/v1/namespaces/{namespace}/{resource}", "/k8s/api/v1/namespaces/kube-system/pods", synced, 200, false},
		{"/k8s/api/v1/namespaces/{namespace}/{resource}/{name}", "/k8s/api/v1/namespaces/kube-system/pods/kube-proxy-zhstf", synced, 200, false},
		{"/k8s/apis/{group}/{version}/{resource}", "/k8s/apis/apps/v1/deployments", synced, 200, false},
		// The demo has no cluster-scoped resource in a named group: a core one answers the same shape.
		{"/k8s/apis/{group}/{version}/{resource}/{name}", "/k8s/api/v1/nodes/node-1", synced, 200, false},
		{"/k8s/apis/{group}/{version}/namespaces/{namespace}/{resource}", "/k8s/apis/apps/v1/namespaces/kube-system/replicasets", synced, 200, false},
		{"/k8s/apis/{group}/{version}/namespaces/{namespace}/{resource}/{name}", "/k8s/apis/apps/v1/namespaces/kube-system/deployments/coredns", synced, 200, false},
		{"/k8s/api/v1/{resource}/{name}/{subresource}", "/k8s/api/v1/nodes/node-2/status", synced, 200, false},
		{"/k8s/api/v1/namespaces/{namespace}/{resource}/{name}/{subresource}", "/k8s/api/v1/namespaces/kube-system/pods/kube-proxy-zhstf/status", synced, 200, false},
		{"/k8s/apis/{group}/{version}/{resource}/{name}/{subresource}", "/k8s/api/v1/nodes/node-1/status", synced, 200, false},
		{"/k8s/apis/{group}/{version}/namespaces/{namespace}/{resource}/{name}/{subresource}", "/k8s/apis/apps/v1/namespaces/kube-system/deployments/coredns/status", synced, 200, false},
	}
	// Statuses a ResponseRecorder cannot produce; stream_test.go proves them
	// over real connections (upgrade, origin refusal, shutdown).
	provedElsewhere := map[string]bool{
		"GET /api/v1/stream Switching Protocols": true,
		"GET /api/v1/stream Forbidden":           true,
		"GET /api/v1/stream Service Unavailable": true,
		// stream_ip_test.go: the streams themselves, and refusals only a stream request meets
		"GET /api/v1/ip:watch Switching Protocols": true,
		"GET /api/v1/ip:watch OK":                  true,
		"GET /api/v1/ip:watch Not Found":           true,
		"GET /api/v1/ip:watch Service Unavailable": true,
		// query_test.go: a question's walk expired
		"GET /api/v1/{resource} Gone": true,
		// search_test.go: a search's walk expired
		"GET /api/v1/search Gone": true,
		// authorization unreachable: auth_test.go switches the API server off
		"GET /api/v1/resources Service Unavailable":            true,
		"GET /api/v1/resources/{resource} Service Unavailable": true,
	}
	authOrLimit := map[int]bool{http.StatusUnauthorized: true, http.StatusForbidden: true,
		http.StatusRequestEntityTooLarge: true, http.StatusTooManyRequests: true}
	produced := map[string]bool{} // "GET /path 404"
	for _, tt := range tests {
		item := doc.Paths.Value(tt.path)
		if item == nil || item.Get == nil {
			t.Errorf("test case for %s: no GET operation at that path in the spec", tt.path)
			continue
		}
		req := localRequest(http.MethodGet, tt.target, nil)
		if tt.revalidate {
			req.Header.Set("If-None-Match", do(t, tt.h, http.MethodGet, tt.target).Header().Get("ETag"))
		}
		rec := httptest.NewRecorder()
		tt.h.ServeHTTP(rec, req)
		if rec.Code != tt.code {
			t.Errorf("GET %s: %d; expect %d\n%s", tt.target, rec.Code, tt.code, rec.Body)
			continue
		}
		produced["GET "+tt.path+" "+http.StatusText(rec.Code)] = true
		err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{
				Request: req,
				Route:   &routers.Route{Spec: doc, Path: tt.path, PathItem: item, Method: http.MethodGet, Operation: item.Get},
			},
			Status:  rec.Code,
			Header:  rec.Header(),
			Body:    io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
		})
		if err != nil {
			t.Errorf("GET %s (%d) does not match the spec of GET %s:\n%v", tt.target, rec.Code, tt.path, err)
		}
	}
	// Batches: a POST with a body.
	for _, tt := range []struct {
		path, body string
		code       int
	}{
		{"/api/v1/ip:lookup", `{"queries":[{"ip":"10.0.0.12"},{"ip":"10.96.0.1","port":443},{"ip":"x"},{"ip":"10.0.0.12","at":"2000-01-01T00:00:00Z"},` +
			`{"ip":"10.0.0.12","port":9100,"at":` + strconv.FormatInt(time.Now().Unix()+1, 10) + `}]}`, 200},
		{"/api/v1/ip:lookup", `{"queries":3}`, 400},
		{"/api/v1/clusters/ip:lookup", `{"queries":[{"ip":"10.0.0.12"},{"ip":"x","cluster":"default"},{"ip":"10.0.0.12","port":9100}]}`, 200},
		{"/api/v1/clusters/ip:lookup", `{"queries":[{"ip":"10.0.0.12","cluster":"nope"}]}`, 400},
	} {
		path := tt.path
		item := doc.Paths.Value(path)
		req := localRequest(http.MethodPost, path, strings.NewReader(tt.body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		synced.ServeHTTP(rec, req)
		if rec.Code != tt.code {
			t.Errorf("POST %s %s: %d; expect %d\n%s", path, tt.body, rec.Code, tt.code, rec.Body)
			continue
		}
		produced["POST "+path+" "+http.StatusText(rec.Code)] = true
		req = localRequest(http.MethodPost, path, strings.NewReader(tt.body))
		req.Header.Set("Content-Type", "application/json")
		err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{
				Request: req,
				Route:   &routers.Route{Spec: doc, Path: path, PathItem: item, Method: http.MethodPost, Operation: item.Post},
			},
			Status:  rec.Code,
			Header:  rec.Header(),
			Body:    io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
		})
		if err != nil {
			t.Errorf("POST %s (%d) does not match the spec:\n%v\n%s", path, rec.Code, err, rec.Body)
		}
	}
	// The self reviews: a POST with a body, 201.
	for path, body := range map[string]string{ssarPath: ssar(`{"verb":"list","resource":"pods"}`), ssrrPath: `{"spec":{"namespace":"a"}}`, ssrPath: `{}`} {
		item := doc.Paths.Value(path)
		rec := kubePost(t, synced, path, "application/json", body)
		produced["POST "+path+" "+http.StatusText(rec.Code)] = true
		err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: localRequest(http.MethodPost, path, strings.NewReader(body)),
				Route: &routers.Route{Spec: doc, Path: path, PathItem: item, Method: http.MethodPost, Operation: item.Post}},
			Status: rec.Code, Header: rec.Header(), Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
		})
		if rec.Code != http.StatusCreated || err != nil {
			t.Errorf("POST %s: %d, %v\n%s", path, rec.Code, err, rec.Body)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code := range op.Responses.Map() {
				n, err := parseCode(code)
				if err != nil || n == http.StatusInternalServerError {
					continue
				}
				key := method + " " + path + " " + http.StatusText(n)
				if authOrLimit[n] {
					continue // produced with auth and limits on, in auth_test.go and limits_test.go
				}
				if !produced[key] && !provedElsewhere[key] {
					t.Errorf("%s %s documents %s, and no test request produced it", method, path, code)
				}
			}
		}
	}
}

func parseCode(s string) (int, error) {
	var n int
	err := json.Unmarshal([]byte(s), &n)
	return n, err
}

// strictQuery is the extension marking operations that reject query
// parameters they do not declare.
const strictQuery = "x-kubeindex-unknown-query-parameters"

// TestQueryParametersAreTheDocumentedOnes checks every operation's query
// parameters against the handler: each declared one is known to it, and an
// undeclared one is refused with 400 exactly where the spec says so.
func TestQueryParametersAreTheDocumentedOnes(t *testing.T) {
	doc := loadSpec(t)
	h := New(cachetest.Start(t, cachetest.DefaultSpecs()...).Cache, Options{Logger: quiet()}).Handler()
	isUnknownParam := func(rec *httptest.ResponseRecorder) bool {
		var st metav1.Status
		json.Unmarshal(rec.Body.Bytes(), &st)
		return rec.Code == http.StatusBadRequest && strings.Contains(st.Message, "unknown query parameter")
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			base := path
			var declared []string
			for _, p := range op.Parameters {
				switch p.Value.In {
				case openapi3.ParameterInPath:
					example, ok := p.Value.Example.(string)
					if !ok {
						t.Fatalf("%s %s: path parameter %s needs a string example to build a request", method, path, p.Value.Name)
					}
					base = strings.ReplaceAll(base, "{"+p.Value.Name+"}", url.PathEscape(example))
				case openapi3.ParameterInQuery:
					declared = append(declared, p.Value.Name)
				}
			}
			strict := op.Extensions[strictQuery] == "reject"
			rec := do(t, h, method, base+"?undocumented=1")
			if got := isUnknownParam(rec); got != strict {
				t.Errorf("%s %s?undocumented=1: %d %s; spec says %s is %q", method, base, rec.Code, rec.Body, strictQuery, op.Extensions[strictQuery])
			}
			for _, name := range declared {
				if rec := do(t, h, method, base+"?"+name+"=x"); isUnknownParam(rec) {
					t.Errorf("%s %s: the spec declares query parameter %q; the handler refuses it: %s", method, path, name, rec.Body)
				}
			}
			if strict && len(declared) > 0 {
				name := declared[0]
				rec := do(t, h, method, base+"?"+name+"=1&"+name+"=2")
				if rec.Code != http.StatusBadRequest {
					t.Errorf("%s %s with %s given twice: %d; expect 400", method, path, name, rec.Code)
				}
			}
			if !strict && slices.ContainsFunc(op.Parameters, func(p *openapi3.ParameterRef) bool { return p.Value.In == openapi3.ParameterInQuery }) {
				t.Errorf("%s %s declares query parameters but does not reject unknown ones", method, path)
			}
		}
	}
}
