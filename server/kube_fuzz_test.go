package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzKubeQuery: any query on the Kubernetes API's list, get and watch
// paths. Properties: never a 5xx or a panic; errors are the API server's
// Status with the same code. Watches stream until their timeout, so the fuzzer
// gives them one of a second.
func FuzzKubeQuery(f *testing.F) {
	for _, q := range []string{"labelSelector=app%3Dweb&limit=2", "fieldSelector=spec.nodeName%3Dnode-1",
		"fieldSelector=status.phase!%3DRunning,spec.nodeName%3D%3Dnode-2", "fieldSelector=spec.foo%3D1",
		"resourceVersion=0&resourceVersionMatch=Exact", "resourceVersion=abc", "resourceVersionMatch=NotOlderThan",
		"limit=1&continue=x", "limit=-1", "limit=99999999999999999999", "watch=1&resourceVersion=1",
		"watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
		"watch=true&sendInitialEvents=true", "includeObject=Object", "timeoutSeconds=-5&watch=1",
		"fieldSelector=metadata.name%3D%3Dx%2Cmetadata.namespace!%3Dy", "labelSelector=a+in+(b", "%zz=1"} {
		f.Add("/k8s/api/v1/namespaces/kube-system/pods", q)
	}
	f.Add("/k8s/api/v1/nodes/node-1", "fieldSelector=metadata.name%3Dnode-2")
	f.Add("/k8s/apis/apps/v1/deployments", "fieldSelector=spec.replicas%3D1")
	h, _ := fuzzServer(f)
	f.Fuzz(func(t *testing.T, path, query string) {
		u, err := url.Parse("http://x" + path)
		if err != nil || u.RawQuery != "" || u.Fragment != "" {
			t.Skip()
		}
		q, err := url.ParseQuery(query)
		if err != nil && strings.Contains(query, "watch") {
			t.Skip() // a watch whose timeout cannot be set would stream on
		}
		if err == nil && q.Has("watch") {
			// A watch streams until its timeout: keep it short.
			q.Set("timeoutSeconds", "1")
			query = q.Encode()
		}
		req := localRequest(http.MethodGet, "/", nil)
		target := path + "?" + query
		if req.URL, err = url.ParseRequestURI(target); err != nil {
			t.Skip()
		}
		req.RequestURI = target
		req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%q: %d %s", target, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			st := gjson.ParseBytes(rec.Body.Bytes())
			if st.Get("kind").Str != "Status" || st.Get("code").Int() != int64(rec.Code) || st.Get("reason").Str == "" {
				t.Fatalf("%q: error body %s", target, rec.Body)
			}
		}
	})
}
