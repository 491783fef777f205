package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// BenchmarkHotPaths measures the handlers in process (no network), to keep
// per-request work visible in profiles. The side-by-side figures against the
// API server live in test/ (make bench).
func BenchmarkHotPaths(b *testing.B) {
	f := cachetest.Start(b, cachetest.DefaultSpecs()...)
	h := New(f.Cache, Options{}).Handler()
	web, err := f.Cache.List("pods", cache.ListQuery{Namespace: "media", Limit: 1})
	if err != nil || len(web.Items) == 0 {
		b.Fatalf("no pod to look up: %v", err)
	}
	podIP := gjson.GetBytes(web.Items[0].Raw(), "status.podIP").Str
	for _, bc := range []struct{ name, target, accept string }{
		{"ip_pod", "/api/v1/ip/" + podIP, ""},
		{"ip_hostnetwork", "/api/v1/ip/10.0.0.12", ""},
		{"get_pod", "/api/v1/pods/kube-system/kube-proxy-zhstf", ""},
		{"list_namespace", "/api/v1/pods?namespace=kube-system", ""},
		// what a metadata-only informer lists: every pod's metadata
		{"list_metadata", "/k8s/api/v1/pods", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := localRequest(http.MethodGet, bc.target, nil)
			if bc.accept != "" {
				req.Header.Set("Accept", bc.accept)
			}
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d", bc.target, rec.Code)
				}
			}
		})
	}
}
