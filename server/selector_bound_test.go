package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/kubeindex/kubeindex/cache"
)

// A selector of more than cache.MaxSelectorTerms terms is a 400 naming
// the bound, on every path that takes one: REST lists, streams (SSE and a
// multiplexed socket's subscribe) and /k8s lists and watches. At the bound
// it is served.
func TestSelectorTermsAreBounded(t *testing.T) {
	ss := startStreams(t, Options{})
	selector := func(n int) string {
		terms := make([]string, n)
		for i := range terms {
			terms[i] = fmt.Sprintf("k%d!=x", i)
		}
		return url.QueryEscape(strings.Join(terms, ","))
	}
	long, atBound := selector(cache.MaxSelectorTerms+1), selector(cache.MaxSelectorTerms)
	bound := fmt.Sprint(cache.MaxSelectorTerms)
	get := func(path string) (int, string) {
		resp, err := http.Get(ss.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf) // a watch served goes on: its first bytes are enough
		b.Write(buf[:n])
		return resp.StatusCode, b.String()
	}
	for _, path := range []string{
		"/api/v1/pods?labelSelector=",
		"/k8s/api/v1/pods?labelSelector=",
		"/k8s/api/v1/pods?watch=true&labelSelector=",
	} {
		if code, body := get(path + long); code != 400 || !strings.Contains(body, "at most "+bound) {
			t.Errorf("%s<%d terms>: %d %.200s; expect 400 naming the bound", path, cache.MaxSelectorTerms+1, code, body)
		}
		if code, body := get(path + atBound); code != 200 {
			t.Errorf("%s<%d terms>: %d %.200s; expect 200", path, cache.MaxSelectorTerms, code, body)
		}
	}
	// Set values count one each; with a field selector the terms add up.
	values := make([]string, cache.MaxSelectorTerms)
	for i := range values {
		values[i] = fmt.Sprint("v", i)
	}
	set := url.QueryEscape("app in (" + strings.Join(values, ",") + ")")
	if code, _ := get("/k8s/api/v1/pods?labelSelector=" + set); code != 200 {
		t.Errorf("a set of %d values: %d; expect 200", cache.MaxSelectorTerms, code)
	}
	if code, body := get("/k8s/api/v1/pods?fieldSelector=spec.nodeName%3Dn&labelSelector=" + set); code != 400 || !strings.Contains(body, "at most "+bound) {
		t.Errorf("a set of %d values and a field: %d %.200s; expect 400", cache.MaxSelectorTerms, code, body)
	}

	sse := openSSE(t, ss.url+"/api/v1/pods?watch=true&labelSelector="+long, nil)
	if sse.resp.StatusCode != 400 {
		t.Errorf("SSE: %d; expect 400", sse.resp.StatusCode)
	}
	mux := openMux(t, ss)
	sel, _ := url.QueryUnescape(long)
	mux.send(t, fmt.Sprintf(`{"op":"subscribe","id":"long","resource":"pods","labelSelector":%q}`, sel))
	if m := mux.expectOther(t); m.Get("code").Int() != 400 || !strings.Contains(m.Get("message").Str, "at most "+bound) {
		t.Errorf("subscribe: %s; expect a 400 ERROR naming the bound", m.Raw)
	}
}
