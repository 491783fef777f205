package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// Tests of the Kubernetes read API under /k8s, against a demo-backed
// cache: every rule with the API server's wording.

func kubeDo(t *testing.T, h http.Handler, method, target, accept string) *httptest.ResponseRecorder {
	t.Helper()
	req := localRequest(method, target, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// aPod returns a pod of the fixture's cache.
func aPod(t *testing.T, c *cache.Cache) *cache.Object {
	t.Helper()
	res, err := c.List("pods", cache.ListQuery{Namespace: "kube-system", Limit: 1})
	if err != nil || len(res.Items) == 0 {
		t.Fatal("no pod", err)
	}
	return res.Items[0]
}

func TestKubeDiscovery(t *testing.T) {
	_, h := startServer(t)
	const aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	kubectlAccept := aggregated + ",application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
	tests := []struct {
		name, path, accept string
		// expect
		code        int
		contentType string
		check       func(t *testing.T, body gjson.Result)
	}{
		{name: "version", path: "/k8s/version", code: 200, contentType: "application/json",
			check: func(t *testing.T, b gjson.Result) { want(t, b.Get("gitVersion").Str != "", "a gitVersion") }},
		{name: "legacy core", path: "/k8s/api", code: 200, contentType: "application/json",
			check: func(t *testing.T, b gjson.Result) { want(t, b.Get("versions.0").Str == "v1", "versions [v1]") }},
		{name: "core resources", path: "/k8s/api/v1", code: 200, contentType: "application/json",
			check: func(t *testing.T, b gjson.Result) {
				pods := b.Get(`resources.#(name=="pods")`)
				want(t, pods.Get("kind").Str == "Pod" && pods.Get("namespaced").Bool() && pods.Get("singularName").Str == "pod",
					"pods described: "+pods.Raw)
				want(t, pods.Get("verbs").Raw == `["get","list","watch"]`, "verbs get, list, watch")
				want(t, pods.Get("shortNames.0").Str == "po" && pods.Get("categories.0").Str == "all", "short names and categories")
				want(t, b.Get(`resources.#(name=="nodes").namespaced`).Raw == "false", "nodes cluster-scoped")
				want(t, !b.Get(`resources.#(name=="deployments")`).Exists(), "only core resources")
			}},
		{name: "groups", path: "/k8s/apis", code: 200, contentType: "application/json",
			check: func(t *testing.T, b gjson.Result) {
				want(t, b.Get("kind").Str == "APIGroupList" && b.Get(`groups.#(name=="apps").preferredVersion.version`).Str == "v1", b.Raw)
			}},
		{name: "one group", path: "/k8s/apis/apps", code: 200,
			check: func(t *testing.T, b gjson.Result) { want(t, b.Get("kind").Str == "APIGroup", b.Raw) }},
		{name: "group version", path: "/k8s/apis/apps/v1", code: 200,
			check: func(t *testing.T, b gjson.Result) {
				want(t, b.Get("groupVersion").Str == "apps/v1" && b.Get(`resources.#(name=="deployments").shortNames.0`).Str == "deploy", b.Raw)
			}},
		{name: "unknown group", path: "/k8s/apis/batch", code: 404},
		{name: "unknown version", path: "/k8s/apis/apps/v2", code: 404},
		{name: "aggregated core", path: "/k8s/api", accept: kubectlAccept, code: 200, contentType: aggregated,
			check: func(t *testing.T, b gjson.Result) {
				want(t, b.Get("kind").Str == "APIGroupDiscoveryList" && b.Get("apiVersion").Str == "apidiscovery.k8s.io/v2", b.Raw)
				pods := b.Get(`items.0.versions.0.resources.#(resource=="pods")`)
				want(t, pods.Get("scope").Str == "Namespaced" && pods.Get("responseKind.kind").Str == "Pod" &&
					pods.Get("singularResource").Str == "pod" && pods.Get("categories.0").Str == "all", pods.Raw)
			}},
		{name: "aggregated groups", path: "/k8s/apis", accept: aggregated, code: 200, contentType: aggregated,
			check: func(t *testing.T, b gjson.Result) {
				want(t, b.Get(`items.#(metadata.name=="apps").versions.0.resources.#(resource=="replicasets").shortNames.0`).Str == "rs", b.Raw)
			}},
		// In protobuf: a 406 too, its Status in protobuf (TestKubeProtobufNegotiation).
		{name: "YAML only", path: "/k8s/apis", accept: "application/yaml", code: 406},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := kubeDo(t, h, "GET", tt.path, tt.accept)
			if rec.Code != tt.code {
				t.Fatalf("%d, want %d: %s", rec.Code, tt.code, rec.Body)
			}
			if tt.contentType != "" && rec.Header().Get("Content-Type") != tt.contentType {
				t.Errorf("Content-Type %q, want %q", rec.Header().Get("Content-Type"), tt.contentType)
			}
			body := gjson.ParseBytes(rec.Body.Bytes())
			if rec.Code >= 400 {
				wantStatus(t, body, tt.code)
			}
			if tt.check != nil {
				tt.check(t, body)
			}
		})
	}
}

func want(t *testing.T, ok bool, what string) {
	t.Helper()
	if !ok {
		t.Errorf("want %s", what)
	}
}

func wantStatus(t *testing.T, b gjson.Result, code int) {
	t.Helper()
	if b.Get("kind").Str != "Status" || b.Get("apiVersion").Str != "v1" || b.Get("code").Int() != int64(code) ||
		b.Get("status").Str != "Failure" || b.Get("reason").Str == "" {
		t.Errorf("not the API server's Status for %d: %s", code, b.Raw)
	}
}

func TestKubeReads(t *testing.T) {
	f, h := startServer(t)
	pod := aPod(t, f.Cache)
	node := gjson.GetBytes(pod.Raw(), "spec.nodeName").Str
	ns := pod.Namespace()
	tests := []struct {
		name   string
		method string
		target string
		accept string
		// expect
		code    int
		reason  string
		message string // a substring
		items   func(it gjson.Result) bool
	}{
		{name: "get pod", target: "/k8s/api/v1/namespaces/" + ns + "/pods/" + pod.Name(), code: 200},
		{name: "get node", target: "/k8s/api/v1/nodes/" + node, code: 200},
		{name: "get namespace", target: "/k8s/api/v1/namespaces/" + ns, code: 200},
		{name: "get deployment", target: "/k8s/apis/apps/v1/namespaces/kube-system/deployments/coredns", code: 200},
		{name: "missing pod", target: "/k8s/api/v1/namespaces/" + ns + "/pods/nope", code: 404, reason: "NotFound",
			message: `pods "nope" not found`},
		{name: "unknown resource", target: "/k8s/api/v1/widgets", code: 404, reason: "NotFound",
			message: "the server could not find the requested resource"},
		{name: "resource in the wrong group", target: "/k8s/apis/apps/v1/pods", code: 404, reason: "NotFound"},
		{name: "subresource", target: "/k8s/api/v1/namespaces/" + ns + "/pods/" + pod.Name() + "/log", code: 404, reason: "NotFound"},
		{name: "namespaced path of a cluster-scoped resource", target: "/k8s/api/v1/namespaces/x/nodes", code: 404},
		{name: "list pods", target: "/k8s/api/v1/pods", code: 200, items: func(gjson.Result) bool { return true }},
		{name: "list in a namespace", target: "/k8s/api/v1/namespaces/" + ns + "/pods", code: 200,
			items: func(it gjson.Result) bool { return it.Get("metadata.namespace").Str == ns }},
		{name: "labelSelector", target: "/k8s/api/v1/pods?labelSelector=k8s-app%3Dkube-dns", code: 200,
			items: func(it gjson.Result) bool { return it.Get(`metadata.labels.k8s-app`).Str == "kube-dns" }},
		{name: "fieldSelector node (index)", target: "/k8s/api/v1/pods?fieldSelector=spec.nodeName%3D" + node, code: 200,
			items: func(it gjson.Result) bool { return it.Get("spec.nodeName").Str == node }},
		{name: "fieldSelector ==", target: "/k8s/api/v1/pods?fieldSelector=spec.nodeName%3D%3D" + node, code: 200,
			items: func(it gjson.Result) bool { return it.Get("spec.nodeName").Str == node }},
		{name: "fieldSelector !=", target: "/k8s/api/v1/pods?fieldSelector=status.phase!%3DRunning", code: 200,
			items: func(it gjson.Result) bool { return it.Get("status.phase").Str != "Running" }},
		{name: "fieldSelector pod IP (index)", target: "/k8s/api/v1/pods?fieldSelector=status.podIP%3D" +
			gjson.GetBytes(pod.Raw(), "status.podIP").Str, code: 200,
			items: func(it gjson.Result) bool {
				return it.Get("status.podIP").Str == gjson.GetBytes(pod.Raw(), "status.podIP").Str
			}},
		{name: "fieldSelector spec.host is spec.nodeName", target: "/k8s/api/v1/pods?fieldSelector=spec.host%3D" + node, code: 200,
			items: func(it gjson.Result) bool { return it.Get("spec.nodeName").Str == node }},
		{name: "fieldSelector hostNetwork", target: "/k8s/api/v1/pods?fieldSelector=spec.hostNetwork%3Dfalse", code: 200,
			items: func(it gjson.Result) bool { return !it.Get("spec.hostNetwork").Bool() }},
		{name: "fieldSelector metadata.name", target: "/k8s/api/v1/pods?fieldSelector=metadata.name%3D" + pod.Name(), code: 200,
			items: func(it gjson.Result) bool { return it.Get("metadata.name").Str == pod.Name() }},
		{name: "fieldSelector metadata.namespace", target: "/k8s/apis/apps/v1/deployments?fieldSelector=metadata.namespace%3Dkube-system", code: 200,
			items: func(it gjson.Result) bool { return it.Get("metadata.namespace").Str == "kube-system" }},
		{name: "unsupported field", target: "/k8s/api/v1/pods?fieldSelector=spec.foo%3D1", code: 400, reason: "BadRequest",
			message: "field label not supported: spec.foo"},
		{name: "unsupported field of a kind without fields", target: "/k8s/apis/apps/v1/deployments?fieldSelector=spec.replicas%3D1",
			code: 400, reason: "BadRequest", message: `"spec.replicas" is not a known field selector: only "metadata.name", "metadata.namespace"`},
		{name: "namespace is no field of a node", target: "/k8s/api/v1/nodes?fieldSelector=metadata.namespace%3Dx", code: 400,
			message: "field label not supported: metadata.namespace"},
		{name: "malformed fieldSelector", target: "/k8s/api/v1/pods?fieldSelector=a", code: 400, reason: "BadRequest"},
		{name: "malformed labelSelector", target: "/k8s/api/v1/pods?labelSelector=a%3D%3D%3Db", code: 400, reason: "BadRequest"},
		{name: "get with another name selected", target: "/k8s/api/v1/namespaces/" + ns + "/pods/" + pod.Name() + "?fieldSelector=metadata.name%3Dx",
			code: 400, message: "fieldSelector metadata.name doesn't match requested name"},
		{name: "match without resourceVersion", target: "/k8s/api/v1/pods?resourceVersionMatch=NotOlderThan", code: 422, reason: "Invalid",
			message: "resourceVersionMatch is forbidden unless resourceVersion is provided"},
		{name: "exact 0", target: "/k8s/api/v1/pods?resourceVersion=0&resourceVersionMatch=Exact", code: 422,
			message: `resourceVersionMatch "exact" is forbidden for resourceVersion "0"`},
		{name: "unknown match", target: "/k8s/api/v1/pods?resourceVersion=1&resourceVersionMatch=Newest", code: 422, message: "Unsupported value"},
		{name: "sendInitialEvents on a list", target: "/k8s/api/v1/pods?sendInitialEvents=true", code: 422,
			message: "sendInitialEvents is forbidden for list"},
		{name: "exact expired", target: "/k8s/api/v1/pods?resourceVersion=1&resourceVersionMatch=Exact", code: 410, reason: "Expired",
			message: "too old resource version: 1"},
		{name: "not a resourceVersion", target: "/k8s/api/v1/pods?resourceVersion=abc", code: 422, reason: "Invalid"},
		{name: "older is fine", target: "/k8s/api/v1/pods?resourceVersion=1&resourceVersionMatch=NotOlderThan", code: 200,
			items: func(gjson.Result) bool { return true }},
		{name: "bad limit", target: "/k8s/api/v1/pods?limit=x", code: 400, reason: "BadRequest"},
		{name: "bad continue", target: "/k8s/api/v1/pods?limit=1&continue=garbage", code: 400, reason: "BadRequest",
			message: "invalid continue token"},
		{name: "continue with resourceVersion", target: "/k8s/api/v1/pods?limit=1&continue=x&resourceVersion=5", code: 400,
			message: "specifying resource version is not allowed when using continue"},
		// A Table is JSON only (protobuf answers: kube_protobuf_test.go).
		{name: "a Table in protobuf only", target: "/k8s/api/v1/pods", accept: "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1", code: 406, reason: "NotAcceptable"},
		{name: "a Table in protobuf or JSON", target: "/k8s/api/v1/pods", accept: "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1, application/json", code: 200,
			items: func(gjson.Result) bool { return true }},
		{name: "create", method: "POST", target: "/k8s/api/v1/namespaces/" + ns + "/pods", code: 405, reason: "MethodNotAllowed",
			message: "read-only"},
		{name: "delete", method: "DELETE", target: "/k8s/api/v1/namespaces/" + ns + "/pods/" + pod.Name(), code: 405, reason: "MethodNotAllowed"},
		{name: "patch", method: "PATCH", target: "/k8s/apis/apps/v1/namespaces/kube-system/deployments/coredns", code: 405},
		{name: "put", method: "PUT", target: "/k8s/api/v1/nodes/" + node, code: 405},
		{name: "unknown path", target: "/k8s/openapi/v4", code: 404, reason: "NotFound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = "GET"
			}
			rec := kubeDo(t, h, method, tt.target, tt.accept)
			body := gjson.ParseBytes(rec.Body.Bytes())
			if rec.Code != tt.code {
				t.Fatalf("%d, want %d: %.300s", rec.Code, tt.code, rec.Body)
			}
			if rec.Code >= 400 {
				wantStatus(t, body, tt.code)
				if tt.reason != "" && body.Get("reason").Str != tt.reason {
					t.Errorf("reason %q, want %q", body.Get("reason").Str, tt.reason)
				}
				if !strings.Contains(body.Get("message").Str, tt.message) {
					t.Errorf("message %q, want it to say %q", body.Get("message").Str, tt.message)
				}
				return
			}
			if tt.items == nil {
				want(t, body.Get("metadata.name").Exists(), "an object")
				return
			}
			items := body.Get("items").Array()
			want(t, strings.HasSuffix(body.Get("kind").Str, "List") && !body.Get("items.0.kind").Exists(), "a typed list, its items without kind as the API server's")
			want(t, body.Get("metadata.resourceVersion").Str != "", "the list's resourceVersion")
			if len(items) == 0 {
				t.Fatal("no items: the case proves nothing")
			}
			for _, it := range items {
				if !tt.items(it) {
					t.Fatalf("an item that should not be there: %.200s", it.Raw)
				}
			}
		})
	}
}

// TestKubeListMatchesCache: every field selector answers exactly the
// objects whose field matches, index or not.
func TestKubeFieldSelectorsAreExact(t *testing.T) {
	f, h := startServer(t)
	all, _ := f.Cache.List("pods", cache.ListQuery{})
	pod := aPod(t, f.Cache)
	node := gjson.GetBytes(pod.Raw(), "spec.nodeName").Str
	for _, sel := range []struct {
		query string
		match func(raw []byte) bool
	}{
		{"spec.nodeName=" + node, func(r []byte) bool { return gjson.GetBytes(r, "spec.nodeName").Str == node }},
		{"spec.nodeName!=" + node, func(r []byte) bool { return gjson.GetBytes(r, "spec.nodeName").Str != node }},
		{"spec.nodeName=" + node + ",status.phase=Running", func(r []byte) bool {
			return gjson.GetBytes(r, "spec.nodeName").Str == node && gjson.GetBytes(r, "status.phase").Str == "Running"
		}},
		{"spec.nodeName=", func(r []byte) bool { return gjson.GetBytes(r, "spec.nodeName").Str == "" }},
		{"status.podIP=10.255.255.255", func([]byte) bool { return false }},
		{"status.podIP=not-an-ip", func([]byte) bool { return false }},
	} {
		var wantNames []string
		for _, o := range all.Items {
			if sel.match(o.Raw()) {
				wantNames = append(wantNames, o.Key())
			}
		}
		rec := kubeDo(t, h, "GET", "/k8s/api/v1/pods?fieldSelector="+strings.ReplaceAll(sel.query, "=", "%3D"), "")
		var got []string
		for _, it := range gjson.GetBytes(rec.Body.Bytes(), "items").Array() {
			got = append(got, it.Get("metadata.namespace").Str+"/"+it.Get("metadata.name").Str)
		}
		if rec.Code != 200 || !slices.Equal(got, wantNames) {
			t.Errorf("%s: %d, %d items, want %d", sel.query, rec.Code, len(got), len(wantNames))
		}
	}
}

// TestKubeChunkedList: pages of limit objects whose union is the list.
func TestKubeChunkedList(t *testing.T) {
	f, h := startServer(t)
	all, _ := f.Cache.List("pods", cache.ListQuery{})
	var got []string
	next := ""
	for pages := 0; ; pages++ {
		if pages > len(all.Items) {
			t.Fatal("pages never end")
		}
		rec := kubeDo(t, h, "GET", "/k8s/api/v1/pods?limit=7&continue="+next, "")
		b := gjson.ParseBytes(rec.Body.Bytes())
		if rec.Code != 200 || len(b.Get("items").Array()) > 7 {
			t.Fatalf("%d %.200s", rec.Code, rec.Body)
		}
		for _, it := range b.Get("items").Array() {
			got = append(got, it.Get("metadata.namespace").Str+"/"+it.Get("metadata.name").Str)
		}
		if next = b.Get("metadata.continue").Str; next == "" {
			break
		}
		if b.Get("metadata.remainingItemCount").Int() != int64(len(all.Items)-len(got)) {
			t.Errorf("remainingItemCount %d, want %d", b.Get("metadata.remainingItemCount").Int(), len(all.Items)-len(got))
		}
	}
	if len(got) != len(all.Items) {
		t.Fatalf("%d objects in pages, %d in the list", len(got), len(all.Items))
	}
}

// TestKubeListAtZeroIsOnePage: a first page at resourceVersion=0 is the
// whole list, as the API server's watch cache answers it; limit pages
// otherwise, and a continued page keeps its limit.
func TestKubeListAtZeroIsOnePage(t *testing.T) {
	f, h := startServer(t)
	all, _ := f.Cache.List("pods", cache.ListQuery{})
	if len(all.Items) <= 2 {
		t.Fatalf("only %d pods", len(all.Items))
	}
	for target, want := range map[string]int{
		"/k8s/api/v1/pods?limit=2&resourceVersion=0":                                   len(all.Items),
		"/k8s/api/v1/pods?limit=2":                                                     2,
		"/k8s/api/v1/pods?limit=2&resourceVersion=0&resourceVersionMatch=NotOlderThan": len(all.Items),
	} {
		rec := kubeDo(t, h, "GET", target, "")
		b := gjson.ParseBytes(rec.Body.Bytes())
		if got := len(b.Get("items").Array()); rec.Code != 200 || got != want || (got == len(all.Items)) != (b.Get("metadata.continue").Str == "") {
			t.Errorf("%s: %d, %d items (continue %q), want %d", target, rec.Code, got, b.Get("metadata.continue").Str, want)
		}
		if want == 2 {
			next := b.Get("metadata.continue").Str
			rec = kubeDo(t, h, "GET", "/k8s/api/v1/pods?limit=2&resourceVersion=0&continue="+next, "")
			if got := len(gjson.ParseBytes(rec.Body.Bytes()).Get("items").Array()); rec.Code != 200 || got != 2 {
				t.Errorf("continued at resourceVersion=0: %d, %d items, want 2", rec.Code, got)
			}
		}
	}
}

// TestKubeTooLargeResourceVersion: NotOlderThan a version the cache does
// not reach answers 504 with the watch cache's cause and Retry-After.
func TestKubeTooLargeResourceVersion(t *testing.T) {
	_, h := startServer(t)
	for _, target := range []string{
		"/k8s/api/v1/pods?resourceVersion=999999999&resourceVersionMatch=NotOlderThan",
		"/k8s/api/v1/pods?resourceVersion=999999999",
		"/k8s/api/v1/pods?watch=1&resourceVersion=999999999",
	} {
		rec := kubeDo(t, h, "GET", target, "")
		b := gjson.ParseBytes(rec.Body.Bytes())
		if rec.Code != 504 || b.Get("reason").Str != "Timeout" || b.Get("details.causes.0.reason").Str != "ResourceVersionTooLarge" ||
			!strings.HasPrefix(b.Get("message").Str, "Timeout: Too large resource version: 999999999, current: ") ||
			rec.Header().Get("Retry-After") != "1" {
			t.Errorf("%s: %d %s %v", target, rec.Code, rec.Body, rec.Header())
		}
	}
}

// watchStream is a watch read line by line from a real HTTP server.
type watchStream struct {
	resp   *http.Response
	lines  chan gjson.Result
	cancel context.CancelFunc
}

func openWatch(t *testing.T, url string) *watchStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ws := &watchStream{resp: resp, lines: make(chan gjson.Result, 4096), cancel: cancel}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	go func() {
		defer close(ws.lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			ws.lines <- gjson.Parse(sc.Text())
		}
	}()
	return ws
}

// next returns the next event, failing after 10s.
func (w *watchStream) next(t *testing.T) gjson.Result {
	t.Helper()
	select {
	case ev, ok := <-w.lines:
		if !ok {
			t.Fatal("the watch ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event in 10s")
	}
	return gjson.Result{}
}

// until reads events until one satisfies cond, and returns it.
func (w *watchStream) until(t *testing.T, what string, cond func(gjson.Result) bool) gjson.Result {
	t.Helper()
	for range 100000 {
		if ev := w.next(t); cond(ev) {
			return ev
		}
	}
	t.Fatalf("never saw %s", what)
	return gjson.Result{}
}

func startKube(t *testing.T) (*cachetest.Fixture, *httptest.Server) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	srv := httptest.NewServer(New(f.Cache, Options{Logger: quiet()}).Handler())
	t.Cleanup(srv.Close)
	return f, srv
}

func applyPod(t *testing.T, f *cachetest.Fixture, ns, name, node string, labels map[string]string) {
	t.Helper()
	obj, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"namespace": ns, "name": name, "labels": labels},
		"spec":     map[string]any{"nodeName": node, "containers": []any{map[string]any{"name": "c", "image": "busybox"}}},
		"status":   map[string]any{"phase": "Running"},
	})
	if err := f.Sim.Apply("pods", obj); err != nil {
		t.Fatal(err)
	}
}

func TestKubeWatch(t *testing.T) {
	f, srv := startKube(t)
	base := srv.URL + "/k8s/api/v1"
	count := len(cachetest.State(t, f.Cache, "pods", cache.ListQuery{Namespace: "kube-system"}))

	t.Run("current state first, then changes", func(t *testing.T) {
		w := openWatch(t, base+"/namespaces/kube-system/pods?watch=1")
		if ct := w.resp.Header.Get("Content-Type"); w.resp.StatusCode != 200 || ct != "application/json" {
			t.Fatalf("%d %q", w.resp.StatusCode, ct)
		}
		for range count {
			if ev := w.next(t); ev.Get("type").Str != "ADDED" || ev.Get("object.kind").Str != "Pod" {
				t.Fatalf("initial event %.200s", ev.Raw)
			}
		}
		applyPod(t, f, "kube-system", "watched", "node-1", nil)
		ev := w.next(t)
		want(t, ev.Get("type").Str == "ADDED" && ev.Get("object.metadata.name").Str == "watched", "the new pod ADDED: "+ev.Raw)
		want(t, len(ev.Map()) == 2, "only type and object")
		f.Sim.Delete("pods", "kube-system", "watched")
		ev = w.next(t)
		want(t, ev.Get("type").Str == "DELETED" && ev.Get("object.metadata.name").Str == "watched", "DELETED: "+ev.Raw)
	})

	t.Run("resume from a list's resourceVersion", func(t *testing.T) {
		rv := gjson.GetBytes(kubeDo(t, srv.Config.Handler, "GET", "/k8s/api/v1/pods", "").Body.Bytes(), "metadata.resourceVersion").Str
		applyPod(t, f, "default", "after-list", "node-1", nil)
		w := openWatch(t, base+"/pods?watch=true&resourceVersion="+rv)
		ev := w.next(t)
		want(t, ev.Get("type").Str == "ADDED" && ev.Get("object.metadata.name").Str == "after-list", "the change after the list: "+ev.Raw)
	})

	t.Run("too old", func(t *testing.T) {
		w := openWatch(t, base+"/pods?watch=true&resourceVersion=1")
		ev := w.next(t)
		if ev.Get("type").Str != "ERROR" || ev.Get("object.code").Int() != 410 || ev.Get("object.reason").Str != "Expired" ||
			!strings.HasPrefix(ev.Get("object.message").Str, "too old resource version: 1 (") {
			t.Fatalf("%s", ev.Raw)
		}
		if _, ok := <-w.lines; ok {
			t.Fatal("the watch goes on after its ERROR")
		}
	})

	t.Run("watch list: initial events, then the bookmark, then changes", func(t *testing.T) {
		w := openWatch(t, base+"/namespaces/kube-system/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
		for range count + 1 { // the pod added above is there too: count was taken before
			if ev := w.next(t); ev.Get("type").Str == "BOOKMARK" {
				want(t, ev.Get(`object.metadata.annotations.k8s\.io/initial-events-end`).Str == "true", "the end annotation")
				want(t, ev.Get("object.kind").Str == "Pod" && ev.Get("object.apiVersion").Str == "v1" &&
					ev.Get("object.metadata.resourceVersion").Str != "", "a bookmark object: "+ev.Raw)
				return
			}
		}
		t.Fatal("no bookmark after the initial events")
	})

	t.Run("field selector: entering is ADDED, leaving is DELETED", func(t *testing.T) {
		applyPod(t, f, "default", "mover", "node-2", nil)
		w := openWatch(t, base+"/pods?watch=1&fieldSelector=spec.nodeName%3Dnode-9")
		applyPod(t, f, "default", "mover", "node-9", nil)
		ev := w.until(t, "mover entering", func(ev gjson.Result) bool { return ev.Get("object.metadata.name").Str == "mover" })
		want(t, ev.Get("type").Str == "ADDED", "ADDED on entering: "+ev.Get("type").Str)
		applyPod(t, f, "default", "mover", "node-3", nil)
		ev = w.next(t)
		want(t, ev.Get("type").Str == "DELETED" && ev.Get("object.metadata.name").Str == "mover", "DELETED on leaving: "+ev.Raw)
	})

	t.Run("label selector: relabel leaves", func(t *testing.T) {
		applyPod(t, f, "default", "labelled", "node-1", map[string]string{"team": "a"})
		w := openWatch(t, base+"/namespaces/default/pods?watch=1&labelSelector=team%3Da")
		w.until(t, "the labelled pod", func(ev gjson.Result) bool { return ev.Get("object.metadata.name").Str == "labelled" })
		applyPod(t, f, "default", "labelled", "node-1", map[string]string{"team": "b"})
		ev := w.next(t)
		want(t, ev.Get("type").Str == "DELETED", "DELETED on relabel: "+ev.Raw)
	})

	t.Run("timeoutSeconds ends the watch", func(t *testing.T) {
		w := openWatch(t, base+"/namespaces/kube-system/pods?watch=1&timeoutSeconds=1")
		deadline := time.After(10 * time.Second)
		for {
			select {
			case _, ok := <-w.lines:
				if !ok {
					return
				}
			case <-deadline:
				t.Fatal("the watch outlived its timeoutSeconds")
			}
		}
	})
}

// TestKubeTable: kubectl's Accept gets the API server's Table: the pod
// printer's columns, one row per object, includeObject honoured.
func TestKubeTable(t *testing.T) {
	f, h := startServer(t)
	const kubectlAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
	pods := cachetest.State(t, f.Cache, "pods", cache.ListQuery{Namespace: "kube-system"})
	tests := []struct {
		name, target string
		// expect
		code  int
		check func(t *testing.T, b gjson.Result)
	}{
		{"list", "/k8s/api/v1/namespaces/kube-system/pods", 200, func(t *testing.T, b gjson.Result) {
			var cols []string
			for _, c := range b.Get("columnDefinitions.#.name").Array() {
				cols = append(cols, c.Str)
			}
			want(t, slices.Equal(cols[:5], []string{"Name", "Ready", "Status", "Restarts", "Age"}) &&
				slices.Contains(cols, "IP") && slices.Contains(cols, "Node"), fmt.Sprint("the pod printer's columns, got ", cols))
			want(t, len(b.Get("rows").Array()) == len(pods), "a row per pod")
			want(t, b.Get("rows.0.object.kind").Str == "PartialObjectMetadata", "metadata by default: "+b.Get("rows.0.object.kind").Str)
			want(t, b.Get("metadata.resourceVersion").Str != "", "the list's resourceVersion")
		}},
		{"whole objects", "/k8s/api/v1/namespaces/kube-system/pods?includeObject=Object", 200, func(t *testing.T, b gjson.Result) {
			want(t, b.Get("rows.0.object.kind").Str == "Pod" && b.Get("rows.0.object.spec").Exists(), "the pod in the row")
		}},
		{"no objects", "/k8s/api/v1/namespaces/kube-system/pods?includeObject=None", 200, func(t *testing.T, b gjson.Result) {
			want(t, b.Get("rows.0.object").Type == gjson.Null, "no object")
		}},
		{"one object", "/k8s/apis/apps/v1/namespaces/kube-system/deployments/coredns", 200, func(t *testing.T, b gjson.Result) {
			want(t, b.Get("kind").Str == "Table" && len(b.Get("rows").Array()) == 1 && b.Get("rows.0.cells.0").Str == "coredns", b.Raw)
		}},
		{"chunked", "/k8s/api/v1/pods?limit=3", 200, func(t *testing.T, b gjson.Result) {
			want(t, len(b.Get("rows").Array()) == 3 && b.Get("metadata.continue").Str != "", "a page with its token")
		}},
		{"bad includeObject", "/k8s/api/v1/pods?includeObject=All", 400, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := kubeDo(t, h, "GET", tt.target, kubectlAccept)
			if rec.Code != tt.code {
				t.Fatalf("%d, want %d: %.300s", rec.Code, tt.code, rec.Body)
			}
			b := gjson.ParseBytes(rec.Body.Bytes())
			if rec.Code >= 400 {
				wantStatus(t, b, tt.code)
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json;as=Table;v=v1;g=meta.k8s.io" {
				t.Errorf("Content-Type %q", ct)
			}
			want(t, b.Get("kind").Str == "Table" && b.Get("apiVersion").Str == "meta.k8s.io/v1", "a Table")
			tt.check(t, b)
		})
	}
}

// TestKubeWatchTable: kubectl get -w asks for Table events.
func TestKubeWatchTable(t *testing.T) {
	f, srv := startKube(t)
	req, _ := http.NewRequest("GET", srv.URL+"/k8s/api/v1/namespaces/default/pods?watch=1&resourceVersion="+
		gjson.GetBytes(kubeDo(t, srv.Config.Handler, "GET", "/k8s/api/v1/pods", "").Body.Bytes(), "metadata.resourceVersion").Str, nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	applyPod(t, f, "default", "tabled", "node-1", nil)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	if !sc.Scan() {
		t.Fatal("no event")
	}
	ev := gjson.Parse(sc.Text())
	if ev.Get("type").Str != "ADDED" || ev.Get("object.kind").Str != "Table" || ev.Get("object.rows.0.cells.0").Str != "tabled" {
		t.Fatalf("%s", sc.Text())
	}
}
