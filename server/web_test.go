package server

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/kubeindex/kubeindex/web"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDashboardResponses(t *testing.T) {
	h := New(noCache{}, Options{Logger: quiet()}).Handler()
	index, err := fs.ReadFile(web.Files, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		target, contentType string
		code                int
	}{
		{"/", "text/html; charset=utf-8", 200},
		{"/?anything=1", "text/html; charset=utf-8", 200},
		{"/ui/app.js", "text/javascript; charset=utf-8", 200},
		{"/ui/style.css", "text/css; charset=utf-8", 200},
		{"/ui/favicon.svg", "image/svg+xml", 200},
		{"/ui/nope.js", "application/json", 404},
		{"/ui/..%2Findex.html", "application/json", 404},
		{"/ui/web.go", "application/json", 404},
	}
	for _, tt := range tests {
		rec := do(t, h, http.MethodGet, tt.target)
		if rec.Code != tt.code {
			t.Errorf("GET %s: %d; expect %d", tt.target, rec.Code, tt.code)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tt.contentType) {
			t.Errorf("GET %s: Content-Type %q; expect %q", tt.target, ct, tt.contentType)
		}
		for k, v := range dashboardHeaders {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("GET %s: %s %q; expect %q", tt.target, k, got, v)
			}
		}
		if tt.code == 404 {
			var st metav1.Status
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || st.Reason != "NotFound" {
				t.Errorf("GET %s: body %s; expect a NotFound Status", tt.target, rec.Body)
			}
		}
	}
	if rec := do(t, h, http.MethodGet, "/"); rec.Body.String() != string(index) {
		t.Error("GET / is not web/index.html")
	}
}

func TestDashboardRevalidates(t *testing.T) {
	h := New(noCache{}, Options{Logger: quiet()}).Handler()
	first := do(t, h, http.MethodGet, "/ui/app.js")
	etag := first.Header().Get("ETag")
	if etag == "" || first.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q; expect an ETag and no-cache", etag, first.Header().Get("Cache-Control"))
	}
	req := localRequest(http.MethodGet, "/ui/app.js", nil)
	req.Header.Set("If-None-Match", etag)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Errorf("GET with If-None-Match %s: %d with %d bytes; expect 304 and no body", etag, rec.Code, rec.Body.Len())
	}
	if other := do(t, h, http.MethodGet, "/ui/style.css").Header().Get("ETag"); other == etag {
		t.Error("two different files have the same ETag")
	}
}

var (
	htmlRef      = regexp.MustCompile(`(?:src|href)="([^"#]+)"`)
	jsImport     = regexp.MustCompile(`(?:from|import\()\s*'([^']+)'`)
	externalRef  = regexp.MustCompile(`(?i)(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	inlineScript = regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|\son[a-z]+=|\sstyle=|<style`)
)

// TestDashboardFilesAreComplete checks the dashboard's files against its
// Content-Security-Policy and its promise to work offline: every file that
// index.html or a module refers to is embedded and served, nothing is loaded
// from another host, and nothing inline (which the policy would block).
func TestDashboardFilesAreComplete(t *testing.T) {
	assets, err := loadWebAssets(web.Files)
	if err != nil {
		t.Fatal(err)
	}
	for urlPath, a := range assets {
		body := string(a.body)
		var refs []string
		switch path.Ext(urlPath) {
		case ".js":
			for _, m := range jsImport.FindAllStringSubmatch(body, -1) {
				refs = append(refs, path.Join(path.Dir(urlPath), m[1]))
			}
		case "", ".html":
			for _, m := range htmlRef.FindAllStringSubmatch(body, -1) {
				refs = append(refs, m[1])
			}
			if m := inlineScript.FindString(body); m != "" {
				t.Errorf("%s has inline script or style (%q), which the Content-Security-Policy blocks", urlPath, m)
			}
		}
		for _, ref := range refs {
			if _, ok := assets[ref]; !ok {
				t.Errorf("%s refers to %s, which is not embedded", urlPath, ref)
			}
		}
		for _, m := range externalRef.FindAllString(body, -1) {
			if m != "http://www.w3.org" { // the SVG namespace, not a fetch
				t.Errorf("%s refers to another host (%s): the dashboard must work offline", urlPath, m)
			}
		}
	}
	if _, ok := assets["/ui/app.js"]; !ok {
		t.Error("no /ui/app.js")
	}
}
