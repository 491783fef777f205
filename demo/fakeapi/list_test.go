package fakeapi

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/tidwall/gjson"
)

// names returns namespace/name of the items of a list body.
func names(body []byte) []string {
	var out []string
	for _, it := range gjson.GetBytes(body, "items").Array() {
		out = append(out, it.Get("metadata.namespace").Str+"/"+it.Get("metadata.name").Str)
	}
	return out
}

func objectNames(objs [][]byte, keep func(gjson.Result) bool) []string {
	var out []string
	for _, b := range objs {
		o := gjson.ParseBytes(b)
		if keep == nil || keep(o) {
			out = append(out, o.Get("metadata.namespace").Str+"/"+o.Get("metadata.name").Str)
		}
	}
	return out
}

func TestList(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 7})
	pods := c.Objects(Pods)
	pod := gjson.ParseBytes(pods[len(pods)-1])
	ns, node, ip := pod.Get("metadata.namespace").Str, pod.Get("spec.nodeName").Str, pod.Get("status.podIP").Str
	app := pod.Get("metadata.labels.app").Str
	tests := []struct {
		name, path string
		kind       string
		want       func(gjson.Result) bool
	}{
		{"all pods", "/api/v1/pods", "PodList", func(gjson.Result) bool { return true }},
		{"one namespace", "/api/v1/namespaces/" + ns + "/pods", "PodList",
			func(o gjson.Result) bool { return o.Get("metadata.namespace").Str == ns }},
		{"label selector", "/api/v1/pods?labelSelector=" + url.QueryEscape("app="+app+",tier!=x"), "PodList",
			func(o gjson.Result) bool { return o.Get("metadata.labels.app").Str == app }},
		{"label exists", "/api/v1/pods?labelSelector=k8s-app", "PodList",
			func(o gjson.Result) bool { return o.Get("metadata.labels.k8s-app").Exists() }},
		{"field podIP", "/api/v1/pods?fieldSelector=status.podIP%3D" + ip, "PodList",
			func(o gjson.Result) bool { return o.Get("status.podIP").Str == ip }},
		{"field nodeName and namespace", "/api/v1/pods?fieldSelector=" + url.QueryEscape("spec.nodeName="+node+",metadata.namespace!=kube-system"), "PodList",
			func(o gjson.Result) bool {
				return o.Get("spec.nodeName").Str == node && o.Get("metadata.namespace").Str != "kube-system"
			}},
		{"field hostNetwork default", "/api/v1/pods?fieldSelector=spec.hostNetwork%3Dfalse", "PodList",
			func(o gjson.Result) bool { return !o.Get("spec.hostNetwork").Bool() }},
		{"field name", "/api/v1/pods?fieldSelector=metadata.name%3D" + pod.Get("metadata.name").Str, "PodList",
			func(o gjson.Result) bool { return o.Get("metadata.name").Str == pod.Get("metadata.name").Str }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := mustGet(t, srv.URL+tt.path)
			l := gjson.ParseBytes(body)
			if l.Get("kind").Str != tt.kind || l.Get("apiVersion").Str != "v1" || l.Get("metadata.resourceVersion").Str != c.ResourceVersion() {
				t.Errorf("envelope = %s %s rv %s", l.Get("kind"), l.Get("apiVersion"), l.Get("metadata.resourceVersion"))
			}
			for _, it := range l.Get("items").Array() {
				if it.Get("kind").Exists() || it.Get("apiVersion").Exists() {
					t.Fatalf("list item carries kind/apiVersion: %.80s", it.Raw)
				}
			}
			got, want := names(body), objectNames(pods, tt.want)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Errorf("got %d items %v\nwant %d %v", len(got), got, len(want), want)
			}
		})
	}
}

func TestListOtherResources(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 7})
	for _, tt := range []struct{ path, kind, apiVersion, resource string }{
		{"/api/v1/nodes", "NodeList", "v1", Nodes},
		{"/api/v1/namespaces", "NamespaceList", "v1", Namespaces},
		{"/api/v1/services", "ServiceList", "v1", Services},
		{"/apis/apps/v1/deployments", "DeploymentList", "apps/v1", Deployments},
		{"/apis/apps/v1/replicasets", "ReplicaSetList", "apps/v1", ReplicaSets},
	} {
		body := mustGet(t, srv.URL+tt.path)
		if k, v := gjson.GetBytes(body, "kind").Str, gjson.GetBytes(body, "apiVersion").Str; k != tt.kind || v != tt.apiVersion {
			t.Errorf("%s: %s %s", tt.path, v, k)
		}
		if got, want := names(body), objectNames(c.Objects(tt.resource), nil); !slices.Equal(got, want) || len(got) == 0 {
			t.Errorf("%s: %v, want %v", tt.path, got, want)
		}
	}
	body := mustGet(t, srv.URL+"/apis/apps/v1/namespaces/kube-system/deployments")
	if got := names(body); !slices.Equal(got, []string{"kube-system/coredns"}) {
		t.Errorf("kube-system deployments = %v", got)
	}
}

func TestGetOne(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 3})
	pod := gjson.ParseBytes(c.Objects(Pods)[0])
	ns, name := pod.Get("metadata.namespace").Str, pod.Get("metadata.name").Str
	for _, path := range []string{"/api/v1/namespaces/" + ns + "/pods/" + name, "/api/v1/namespaces/" + ns + "/pods/" + name + "/status"} {
		if body := mustGet(t, srv.URL+path); string(body) != pod.Raw {
			t.Errorf("%s = %.100s, want the stored pod", path, body)
		}
	}
	for path, kind := range map[string]string{
		"/api/v1/nodes/node-1": "Node", "/api/v1/namespaces/kube-system": "Namespace",
		"/api/v1/namespaces/kube-system/status": "Namespace", "/apis/apps/v1/namespaces/kube-system/deployments/coredns": "Deployment",
	} {
		if k := gjson.GetBytes(mustGet(t, srv.URL+path), "kind").Str; k != kind {
			t.Errorf("%s: kind %q, want %s", path, k, kind)
		}
	}
}

func TestRequestErrors(t *testing.T) {
	t.Parallel()
	_, srv := newTestCluster(t, Options{Seed: 3})
	for _, tt := range []struct {
		path   string
		code   int
		reason string
	}{
		{"/api/v1/namespaces/default/pods/nope", 404, "NotFound"},
		{"/api/v1/nodes/nope", 404, "NotFound"},
		{"/api/v1/pods/nope", 404, "NotFound"},
		{"/api/v1/widgets", 404, "NotFound"},
		{"/apis/apps/v1/pods", 404, "NotFound"},
		{"/apis/batch/v1/jobs", 404, "NotFound"},
		{"/api/v1/namespaces/default/nodes", 404, "NotFound"},
		{"/api/v1/namespaces/default/pods/x/log", 404, "NotFound"},
		{"/api/v1/namespaces//pods", 404, "NotFound"},
		{"/api/v1/pods?labelSelector=" + url.QueryEscape("a in (b"), 400, "BadRequest"},
		{"/api/v1/pods?fieldSelector=spec.foo%3Dbar", 400, "BadRequest"},
		{"/api/v1/nodes?fieldSelector=status.podIP%3D1.2.3.4", 400, "BadRequest"},
		{"/api/v1/pods?limit=x", 400, "BadRequest"},
		{"/api/v1/pods?continue=garbage", 400, "BadRequest"},
		{"/api/v1/pods?resourceVersion=abc", 400, "BadRequest"},
		{"/api/v1/pods?resourceVersion=999999999", 504, "Timeout"},
	} {
		code, body := get(t, srv.URL+tt.path)
		st := gjson.ParseBytes(body)
		if code != tt.code || st.Get("kind").Str != "Status" || st.Get("reason").Str != tt.reason || st.Get("code").Int() != int64(tt.code) {
			t.Errorf("%s: %d %s, want %d %s", tt.path, code, body, tt.code, tt.reason)
		}
	}
	resp, err := http.Post(srv.URL+"/api/v1/namespaces/default/pods", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST = %d, want 405", resp.StatusCode)
	}
}

func TestPagination(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 11})
	want := objectNames(c.Objects(Pods), nil)
	walk := func(t *testing.T, query string, between func()) (got []string, pages int) {
		next := ""
		for {
			body := mustGet(t, srv.URL+"/api/v1/pods?limit=7"+query+"&continue="+url.QueryEscape(next))
			got = append(got, names(body)...)
			pages++
			if next = gjson.GetBytes(body, "metadata.continue").Str; next == "" {
				return got, pages
			}
			if rest := gjson.GetBytes(body, "metadata.remainingItemCount"); query == "" && rest.Int() != int64(len(want)-len(got)) {
				t.Errorf("remainingItemCount = %s after %d of %d", rest.Raw, len(got), len(want))
			}
			between()
		}
	}
	t.Run("all pages", func(t *testing.T) {
		got, pages := walk(t, "", func() {})
		if !slices.Equal(got, want) || pages != (len(want)+6)/7 {
			t.Errorf("%d pages %v\nwant %v", pages, got, want)
		}
	})
	t.Run("consistent snapshot under churn", func(t *testing.T) {
		rv := c.ResourceVersion()
		snapshot := map[string]string{} // namespace/name -> resourceVersion
		for _, b := range c.Objects(Pods) {
			o := gjson.ParseBytes(b)
			snapshot[o.Get("metadata.namespace").Str+"/"+o.Get("metadata.name").Str] = o.Get("metadata.resourceVersion").Str
		}
		got := map[string]string{}
		next := ""
		for {
			body := mustGet(t, srv.URL+"/api/v1/pods?limit=7&continue="+url.QueryEscape(next))
			if r := gjson.GetBytes(body, "metadata.resourceVersion").Str; r != rv {
				t.Fatalf("page at resourceVersion %s, want %s", r, rv)
			}
			for _, it := range gjson.GetBytes(body, "items").Array() {
				got[it.Get("metadata.namespace").Str+"/"+it.Get("metadata.name").Str] = it.Get("metadata.resourceVersion").Str
			}
			if next = gjson.GetBytes(body, "metadata.continue").Str; next == "" {
				break
			}
			for range 5 {
				c.Step()
			}
			_ = c.Delete(Pods, "kube-system", gjson.GetBytes(c.Objects(Pods)[0], "metadata.name").Str)
		}
		if !maps.Equal(got, snapshot) {
			t.Errorf("paged list under churn:\n%v\nwant snapshot at %s:\n%v", got, rv, snapshot)
		}
	})
	t.Run("selector", func(t *testing.T) {
		got, _ := walk(t, "&labelSelector=tier%3Dbackend", func() {})
		want := objectNames(c.Objects(Pods), func(o gjson.Result) bool { return o.Get("metadata.labels.tier").Str == "backend" })
		if !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("expired continue", func(t *testing.T) {
		body := mustGet(t, srv.URL+"/api/v1/pods?limit=3")
		c.Step()
		c.CompactHistory()
		code, st := get(t, srv.URL+"/api/v1/pods?limit=3&continue="+url.QueryEscape(gjson.GetBytes(body, "metadata.continue").Str))
		if code != http.StatusGone || gjson.GetBytes(st, "reason").Str != "Expired" {
			t.Errorf("continue after compaction: %d %s", code, st)
		}
	})
}

func TestListExactResourceVersion(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 5})
	rv := c.ResourceVersion()
	want := objectNames(c.Objects(Pods), nil)
	for range 20 {
		c.Step()
	}
	body := mustGet(t, srv.URL+"/api/v1/pods?resourceVersionMatch=Exact&resourceVersion="+rv)
	if got := names(body); !slices.Equal(got, want) || gjson.GetBytes(body, "metadata.resourceVersion").Str != rv {
		t.Errorf("exact list at %s = %v\nwant %v", rv, got, want)
	}
}
