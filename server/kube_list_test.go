package server

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/tidwall/gjson"
)

func TestTypeMetaEnd(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"}}`, `{"metadata":{"name":"a"}}`},
		{`{"apiVersion":"v1","kind":"Pod","metadata":{}}`, `{"metadata":{}}`},
		{`{"kind":"Pod","metadata":{},"apiVersion":"v1"}`, `{"metadata":{},"apiVersion":"v1"}`},
		{`{"metadata":{},"kind":"Pod"}`, `{"metadata":{},"kind":"Pod"}`},
		{`{"kind":"Pod","apiVersion":"v1"}`, `{}`},
		{`{ "kind" : "Pod" , "spec" : 1 }`, `{"spec" : 1 }`},
		{`{}`, `{}`},
		{`{"kind":`, `{"kind":`},
	}
	for _, tt := range tests {
		end := typeMetaEnd([]byte(tt.raw))
		got := tt.raw
		if end > 1 {
			got = "{" + tt.raw[end:]
		}
		if got != tt.want {
			t.Errorf("%s: %s, want %s", tt.raw, got, tt.want)
		}
	}
}

// FuzzTypeMetaEnd: what is left out is exactly the leading kind and
// apiVersion; the rest decodes as the object did.
func FuzzTypeMetaEnd(f *testing.F) {
	for _, s := range []string{`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"}}`, `{"apiVersion":"v1"}`, `{"a":1}`, `{"kind":1,"kind":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var before map[string]any
		if json.Unmarshal([]byte(raw), &before) != nil || before == nil {
			return
		}
		end := typeMetaEnd([]byte(raw))
		if end <= 1 {
			return
		}
		var after map[string]any
		if err := json.Unmarshal([]byte("{"+raw[end:]), &after); err != nil {
			t.Fatalf("%q less its type: %v", raw, err)
		}
		for k := range before {
			if _, kept := after[k]; !kept && k != "kind" && k != "apiVersion" {
				t.Fatalf("%q: lost %q", raw, k)
			}
		}
	})
}

// TestKubeListItemsAreTheAPIServers: a /k8s list's items of a built-in
// kind carry no kind and apiVersion, as the API server's; each is the
// object as a get answers it less those two; kubeindex's own list keeps
// them.
func TestKubeListItemsAreTheAPIServers(t *testing.T) {
	_, h := startServer(t)
	rec := kubeDo(t, h, http.MethodGet, "/k8s/api/v1/namespaces/kube-system/pods", "")
	items := gjson.GetBytes(rec.Body.Bytes(), "items").Array()
	if rec.Code != 200 || len(items) == 0 {
		t.Fatalf("%d: %s", rec.Code, rec.Body)
	}
	if !json.Valid(rec.Body.Bytes()) {
		t.Fatal("the list is not JSON")
	}
	if n := rec.Header().Get("Content-Length"); n != "" && n != itoa(rec.Body.Len()) {
		t.Errorf("Content-Length %s, body %d bytes", n, rec.Body.Len())
	}
	for _, it := range items {
		want(t, !it.Get("kind").Exists() && !it.Get("apiVersion").Exists(), "no kind, no apiVersion: "+it.Raw[:min(80, len(it.Raw))])
		one := kubeDo(t, h, http.MethodGet, "/k8s/api/v1/namespaces/kube-system/pods/"+it.Get("metadata.name").Str, "")
		var got, obj map[string]any
		_ = json.Unmarshal([]byte(it.Raw), &got)
		_ = json.Unmarshal(one.Body.Bytes(), &obj)
		want(t, obj["kind"] == "Pod" && obj["apiVersion"] == "v1", "a get keeps them")
		delete(obj, "kind")
		delete(obj, "apiVersion")
		want(t, reflect.DeepEqual(got, obj), "the item is the object less kind and apiVersion")
	}
	rec = kubeDo(t, h, http.MethodGet, "/api/v1/pods?namespace=kube-system", "")
	want(t, gjson.GetBytes(rec.Body.Bytes(), "items.0.kind").Str == "Pod", "kubeindex's REST API unchanged")
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
