package server

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/ipowner"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var update = flag.Bool("update", false, "rewrite golden files")

func do(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, localRequest(method, target, nil))
	return rec
}

func startServer(t *testing.T) (*cachetest.Fixture, http.Handler) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	return f, New(f.Cache, Options{}).Handler()
}

// TestGolden pins the exact bytes of responses a user pipes to jq. The demo
// runs with a fixed seed and clock and no churn, so they are reproducible.
// Run with -update to accept a change.
func TestGolden(t *testing.T) {
	_, h := startServer(t)
	tests := []struct{ name, target string }{
		{"get_pod", "/api/v1/pods/kube-system/kube-proxy-zhstf"},
		{"get_node", "/api/v1/nodes/node-2"},
		{"list_namespace_paged", "/api/v1/pods?namespace=kube-system&limit=2"},
		{"list_by_index", "/api/v1/pods?index=node&value=node-2&labelSelector=k8s-app%3Dkube-proxy"},
		{"list_query", "/api/v1/pods?filter=namespace=kube-system&filter=node+in+(node-1,node-2)&filter=status=Running&sort=node,-name&offset=1&fields=spec.nodeName,status.podIP"},
		{"counts_grouped", "/api/v1/resources/pods/counts?groupBy=namespace,status"},
		{"ip_hostnetwork", "/api/v1/ip/10.0.0.12"},
		{"index_values", "/api/v1/resources/pods/indexes/node"},
		{"error_unknown_resource", "/api/v1/widgets"},
		{"error_bad_selector", "/api/v1/pods?labelSelector=app+in+("},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := do(t, h, http.MethodGet, tt.target)
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, rec.Body.Bytes(), "", "  "); err != nil {
				t.Fatalf("response is not JSON: %v\n%s", err, rec.Body)
			}
			got := append([]byte(http.StatusText(rec.Code)+"\n"), pretty.Bytes()...)
			path := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./server -run TestGolden -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s:\n%s", tt.target, path, got)
			}
		})
	}
}

func TestErrorsAreStatusJSON(t *testing.T) {
	_, h := startServer(t)
	tests := []struct {
		method, target string
		code           int
		reason         string
	}{
		{"GET", "/api/v1/widgets", 404, "NotFound"},
		{"GET", "/api/v1/pods/ns/nope", 404, "NotFound"},
		{"GET", "/api/v1/pods/nope", 400, "BadRequest"},
		{"GET", "/api/v1/nodes/ns/nope", 400, "BadRequest"},
		{"GET", "/api/v1/pods?index=nope&value=1", 400, "BadRequest"},
		{"GET", "/api/v1/pods?index=ip", 400, "BadRequest"},
		{"GET", "/api/v1/pods?labelSelector=a%20in%20(", 400, "BadRequest"},
		{"GET", "/api/v1/pods?labelselector=app%3Dweb", 400, "BadRequest"},
		{"GET", "/api/v1/pods?limit=-1", 400, "BadRequest"},
		{"GET", "/api/v1/pods?limit=ten", 400, "BadRequest"},
		{"GET", "/api/v1/pods?limit=99999999999", 400, "BadRequest"},
		{"GET", "/api/v1/pods?limit=1&limit=2", 400, "BadRequest"},
		{"GET", "/api/v1/pods?continue=garbage", 400, "BadRequest"},
		{"GET", "/api/v1/ip/not-an-ip", 400, "BadRequest"},
		{"GET", "/api/v1/ip/10.255.0.1", 404, "NotFound"},
		{"GET", "/api/v1/resources/pods/indexes/nope", 400, "BadRequest"},
		{"GET", "/api/v1/resources/widgets", 404, "NotFound"},
		{"GET", "/no/such/route", 404, "NotFound"},
		{"POST", "/api/v1/pods", 405, "MethodNotAllowed"},
		{"DELETE", "/api/v1/pods/ns/name", 405, "MethodNotAllowed"},
	}
	for _, tt := range tests {
		rec := do(t, h, tt.method, tt.target)
		var st metav1.Status
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Errorf("%s %s: body is not JSON: %q", tt.method, tt.target, rec.Body)
			continue
		}
		if rec.Code != tt.code || int(st.Code) != tt.code || string(st.Reason) != tt.reason || st.Kind != "Status" || st.Message == "" {
			t.Errorf("%s %s: %d %+v; expect %d %s", tt.method, tt.target, rec.Code, st, tt.code, tt.reason)
		}
		if rec.Header().Get(HeaderStale) == "" {
			t.Errorf("%s %s: no freshness headers on an error", tt.method, tt.target)
		}
	}
}

func TestNotSyncedIs503(t *testing.T) {
	f := cachetest.New(t, cachetest.PodSpec()) // never started
	h := New(f.Cache, Options{}).Handler()
	for _, target := range []string{"/api/v1/pods", "/api/v1/pods/a/b", "/api/v1/ip/10.0.0.1", "/readyz"} {
		rec := do(t, h, "GET", target)
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("%s before sync: %d; expect 503", target, rec.Code)
		}
		if rec.Header().Get(HeaderSynced) != "false" || rec.Header().Get(HeaderStale) != "true" {
			t.Errorf("%s before sync: headers %v", target, rec.Header())
		}
	}
	if rec := do(t, h, "GET", "/api/v1/pods"); rec.Header().Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
}

func TestFreshnessHeaders(t *testing.T) {
	f, h := startServer(t)
	rec := do(t, h, "GET", "/api/v1/pods?limit=1")
	var body struct {
		Metadata struct{ ResourceVersion string }
	}
	json.Unmarshal(rec.Body.Bytes(), &body)
	st, _ := f.Cache.ResourceStatus("pods")
	if rv := rec.Header().Get(HeaderResourceVersion); rv == "" || rv != body.Metadata.ResourceVersion || rv != st.ResourceVersion {
		t.Errorf("resourceVersion header %q, body %q, status %q: expect all equal", rv, body.Metadata.ResourceVersion, st.ResourceVersion)
	}
	for _, target := range []string{"/healthz", "/readyz", "/api/v1/resources", "/api/v1/nodes/node-1"} {
		rec := do(t, h, "GET", target)
		if rec.Header().Get(HeaderSynced) != "true" || rec.Header().Get(HeaderWatch) != "connected" || rec.Header().Get(HeaderStale) != "false" {
			t.Errorf("%s: freshness headers %v", target, rec.Header())
		}
	}
}

func TestCountsMatchLists(t *testing.T) {
	_, h := startServer(t)
	var resources struct{ Resources []cache.Status }
	json.Unmarshal(do(t, h, "GET", "/api/v1/resources").Body.Bytes(), &resources)
	if len(resources.Resources) != 6 {
		t.Fatalf("%d resources; expect 6", len(resources.Resources))
	}
	for _, r := range resources.Resources {
		var list struct{ Items []json.RawMessage }
		json.Unmarshal(do(t, h, "GET", "/api/v1/"+r.Name).Body.Bytes(), &list)
		if int(r.Count) != len(list.Items) || r.Count == 0 {
			t.Errorf("%s: count %d, list has %d", r.Name, r.Count, len(list.Items))
		}
	}
}

// panicky makes every read panic, to prove a panic costs one request only.
type panicky struct{ Reader }

func (panicky) LookupAddress(ipowner.Query) (cache.IPLookup, error) { panic("boom") }

func TestPanicIsA500AndServingContinues(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	srv := New(panicky{f.Cache}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	h := srv.Handler()
	rec := do(t, h, "GET", "/api/v1/ip/10.0.0.1")
	if rec.Code != 500 || strings.Contains(rec.Body.String(), "boom") {
		t.Errorf("panic answered %d %q; expect 500 without internals", rec.Code, rec.Body)
	}
	if rec := do(t, h, "GET", "/api/v1/pods?limit=1"); rec.Code != 200 {
		t.Errorf("after a panic: %d", rec.Code)
	}
}

func TestListBodyIsTheStoredBytes(t *testing.T) {
	f, h := startServer(t)
	var list struct{ Items []json.RawMessage }
	json.Unmarshal(do(t, h, "GET", "/api/v1/pods").Body.Bytes(), &list)
	res, _ := f.Cache.List("pods", cache.ListQuery{})
	if len(list.Items) != len(res.Items) {
		t.Fatalf("%d items; cache has %d", len(list.Items), len(res.Items))
	}
	for i, o := range res.Items {
		if !bytes.Equal(list.Items[i], o.Raw()) {
			t.Fatalf("item %d was re-encoded", i)
		}
	}
	rec := do(t, h, "GET", "/api/v1/pods/"+res.Items[0].Key())
	if !bytes.Equal(rec.Body.Bytes(), res.Items[0].Raw()) {
		t.Error("GET does not answer the stored bytes")
	}
}

// localRequest is httptest.NewRequest as a local client sends it: to
// 127.0.0.1, which a server without authentication serves (host.go).
func localRequest(method, target string, body io.Reader) *http.Request {
	r := httptest.NewRequest(method, target, body)
	r.Host = "127.0.0.1:8080"
	return r
}
