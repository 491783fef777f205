package kubespec

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// upstreamV3 is an API server's OpenAPI v3 document for the core group: a
// served resource (pods: reads, writes, status, log, the deprecated watch
// path) and one that is not (configmaps), with schemas reached from each.
const upstreamV3 = `{"openapi":"3.0.0","info":{"title":"Kubernetes","version":"v1.36.3"},
"paths":{
 "/api/v1/pods":{"get":{"operationId":"listPodForAllNamespaces","responses":{"200":{"description":"OK","content":{"application/json":{"schema":{"$ref":"#/components/schemas/io.k8s.api.core.v1.PodList"}}}}}}},
 "/api/v1/namespaces/{namespace}/pods/{name}":{
  "get":{"operationId":"readNamespacedPod","responses":{"200":{"description":"OK","content":{"application/json":{"schema":{"$ref":"#/components/schemas/io.k8s.api.core.v1.Pod"}}}}},"x-kubernetes-group-version-kind":{"group":"","version":"v1","kind":"Pod"}},
  "patch":{"operationId":"patchNamespacedPod","parameters":[{"name":"fieldValidation","in":"query","schema":{"type":"string"}}],"requestBody":{"content":{"application/apply-patch+yaml":{"schema":{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}}}},"responses":{"200":{"description":"OK","content":{"application/json":{"schema":{"$ref":"#/components/schemas/io.k8s.api.core.v1.Pod"}}}}},"x-kubernetes-group-version-kind":{"group":"","version":"v1","kind":"Pod"}},
  "delete":{"operationId":"deleteNamespacedPod","requestBody":{"content":{"*/*":{"schema":{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"}}}},"responses":{"200":{"description":"OK","content":{"application/json":{"schema":{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Status"}}}}}}},
 "/api/v1/namespaces/{namespace}/pods/{name}/status":{"get":{"operationId":"readNamespacedPodStatus","responses":{"200":{"description":"OK","content":{"application/json":{"schema":{"$ref":"#/components/schemas/io.k8s.api.core.v1.Pod"}}}}}}},
 "/api/v1/namespaces/{namespace}/pods/{name}/log":{"get":{"operationId":"readNamespacedPodLog","responses":{"200":{"description":"OK"}}}},
 "/api/v1/watch/pods":{"get":{"operationId":"watchPodListForAllNamespaces","responses":{"200":{"description":"OK","content":{"application/json":{"schema":{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"}}}}}}},
 "/api/v1/namespaces/{namespace}/configmaps/{name}":{"get":{"operationId":"readNamespacedConfigMap","responses":{"200":{"description":"OK","content":{"application/json":{"schema":{"$ref":"#/components/schemas/io.k8s.api.core.v1.ConfigMap"}}}}}}}
},
"components":{"schemas":{
 "io.k8s.api.core.v1.Pod":{"description":"Pod is a collection of containers that can run on a host.","type":"object","properties":{"spec":{"description":"Specification of the desired behavior of the pod.","allOf":[{"$ref":"#/components/schemas/io.k8s.api.core.v1.PodSpec"}]}},"x-kubernetes-group-version-kind":[{"group":"","kind":"Pod","version":"v1"}]},
 "io.k8s.api.core.v1.PodList":{"type":"object","properties":{"items":{"type":"array","items":{"allOf":[{"$ref":"#/components/schemas/io.k8s.api.core.v1.Pod"}]}}},"x-kubernetes-group-version-kind":[{"group":"","kind":"PodList","version":"v1"}]},
 "io.k8s.api.core.v1.PodSpec":{"description":"PodSpec is a description of a pod.","type":"object","properties":{"nodeName":{"description":"NodeName indicates in which node this pod is scheduled.","type":"string"}}},
 "io.k8s.api.core.v1.ConfigMap":{"type":"object","x-kubernetes-group-version-kind":[{"group":"","kind":"ConfigMap","version":"v1"}]},
 "io.k8s.apimachinery.pkg.apis.meta.v1.Patch":{"type":"object"},
 "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions":{"type":"object"},
 "io.k8s.apimachinery.pkg.apis.meta.v1.Status":{"type":"object"},
 "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent":{"type":"object"}
},"securitySchemes":{"BearerToken":{"type":"apiKey","name":"authorization","in":"header"}}}}`

// upstreamV2 is the same as an OpenAPI v2 document, with a global body
// parameter as the API server writes them.
const upstreamV2 = `{"swagger":"2.0","info":{"title":"Kubernetes","version":"v1.36.3"},
"paths":{
 "/api/v1/namespaces/{namespace}/pods/{name}":{
  "get":{"operationId":"readCoreV1NamespacedPod","responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/io.k8s.api.core.v1.Pod"}}},"x-kubernetes-group-version-kind":{"group":"","version":"v1","kind":"Pod"}},
  "patch":{"operationId":"patchCoreV1NamespacedPod","parameters":[{"$ref":"#/parameters/body-78PwaGsr"},{"uniqueItems":true,"type":"string","name":"fieldValidation","in":"query"}],"responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/io.k8s.api.core.v1.Pod"}}},"x-kubernetes-group-version-kind":{"group":"","version":"v1","kind":"Pod"}},
  "delete":{"operationId":"deleteCoreV1NamespacedPod","parameters":[{"name":"body","in":"body","schema":{"$ref":"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"}}],"responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Status"}}}}},
 "/api/v1/namespaces/{namespace}/configmaps/{name}":{"get":{"operationId":"readCoreV1NamespacedConfigMap","responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/io.k8s.api.core.v1.ConfigMap"}}}}}
},
"definitions":{
 "io.k8s.api.core.v1.Pod":{"description":"Pod is a collection of containers that can run on a host.","type":"object","properties":{"spec":{"$ref":"#/definitions/io.k8s.api.core.v1.PodSpec"}},"x-kubernetes-group-version-kind":[{"group":"","kind":"Pod","version":"v1"}]},
 "io.k8s.api.core.v1.PodSpec":{"description":"PodSpec is a description of a pod.","type":"object"},
 "io.k8s.api.core.v1.ConfigMap":{"type":"object"},
 "io.k8s.apimachinery.pkg.apis.meta.v1.Patch":{"type":"object"},
 "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions":{"type":"object"},
 "io.k8s.apimachinery.pkg.apis.meta.v1.Status":{"type":"object"}
},
"parameters":{"body-78PwaGsr":{"name":"body","in":"body","required":true,"schema":{"$ref":"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}}}}`

var served = []Served{
	{Version: "v1", Plural: "pods", Kind: "Pod", Namespaced: true, Subresources: []string{"status"}},
	{Group: "authorization.k8s.io", Version: "v1", Plural: "selfsubjectaccessreviews", Kind: "SelfSubjectAccessReview", Create: true},
}

// fakeAPIServer serves upstreamV3 as "api/v1" under a hash it can change,
// and upstreamV2, and counts the requests.
type fakeAPIServer struct {
	mu   sync.Mutex
	hash string
	down bool
	gets map[string]int
}

func (f *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets[r.URL.Path]++
	if f.down {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/openapi/v3":
		_, _ = w.Write([]byte(`{"paths":{"api/v1":{"serverRelativeURL":"/openapi/v3/api/v1?hash=` + f.hash + `"},"apis":{"serverRelativeURL":"/openapi/v3/apis"}}}`))
	case "/openapi/v3/api/v1":
		_, _ = w.Write([]byte(upstreamV3))
	case "/openapi/v2":
		_, _ = w.Write([]byte(upstreamV2))
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeAPIServer) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets[path]
}

// kubeindexWith serves d under /k8s as the server package does.
func kubeindexWith(t *testing.T, d *Docs) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/k8s/openapi/v2", d.ServeV2)
	mux.HandleFunc("/k8s/openapi/v3", d.ServeV3Index)
	mux.HandleFunc("/k8s/openapi/v3/", func(w http.ResponseWriter, r *http.Request) {
		gv := strings.TrimPrefix(r.URL.Path, "/k8s/openapi/v3/")
		if !d.Serves(gv) {
			http.NotFound(w, r)
			return
		}
		d.ServeV3(w, r, gv)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func newDocs(t *testing.T, f *fakeAPIServer) (*Docs, *time.Time) {
	up := httptest.NewServer(f)
	t.Cleanup(up.Close)
	client := discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: up.URL}).RESTClient()
	d := New(client, served, Options{Prefix: "/k8s"})
	now := time.Now()
	d.now = func() time.Time { return now }
	return d, &now
}

func coreV1(t *testing.T, base string) *spec3.OpenAPI {
	t.Helper()
	dc := discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: base + "/k8s"})
	doc, err := openapi3.NewRoot(dc.OpenAPIV3()).GVSpec(schema.GroupVersion{Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestTrimmedToWhatIsServed reads the v3 document as kubectl does: the
// served paths only, the API server's schemas that they reach (its text,
// which kubectl explain prints), and writes that keep their parameters but
// answer only the read-only 405.
func TestTrimmedToWhatIsServed(t *testing.T) {
	f := &fakeAPIServer{hash: "A", gets: map[string]int{}}
	d, _ := newDocs(t, f)
	doc := coreV1(t, kubeindexWith(t, d).URL)

	var paths []string
	for p := range doc.Paths.Paths {
		paths = append(paths, p)
	}
	want := "/api/v1/namespaces/{namespace}/pods/{name} /api/v1/namespaces/{namespace}/pods/{name}/status /api/v1/pods"
	if got := strings.Join(sorted(paths), " "); got != want {
		t.Errorf("paths %s, want %s", got, want)
	}
	var schemas []string
	for s := range doc.Components.Schemas {
		schemas = append(schemas, s)
	}
	// DeleteOptions and Patch were reached only by the refused writes'
	// bodies; Status by the refusal.
	wantSchemas := "io.k8s.api.core.v1.Pod io.k8s.api.core.v1.PodList io.k8s.api.core.v1.PodSpec io.k8s.apimachinery.pkg.apis.meta.v1.Status"
	if got := strings.Join(sorted(schemas), " "); got != wantSchemas {
		t.Errorf("schemas %s, want %s", got, wantSchemas)
	}
	if got := doc.Components.Schemas["io.k8s.api.core.v1.PodSpec"].Properties["nodeName"].Description; got != "NodeName indicates in which node this pod is scheduled." {
		t.Errorf("the API server's description is not kept: %q", got)
	}
	obj := doc.Paths.Paths["/api/v1/namespaces/{namespace}/pods/{name}"]
	for name, op := range map[string]*spec3.Operation{"patch": obj.Patch, "delete": obj.Delete} {
		if op == nil || op.RequestBody != nil || len(op.Responses.StatusCodeResponses) != 1 || op.Responses.StatusCodeResponses[405] == nil {
			t.Errorf("%s is not declared as refused: %+v", name, op)
		}
	}
	if len(obj.Patch.Parameters) != 1 || obj.Patch.Parameters[0].Name != "fieldValidation" {
		t.Errorf("the refused patch lost its parameters: %+v", obj.Patch.Parameters)
	}
	if obj.Get.Responses.StatusCodeResponses[200] == nil {
		t.Error("the get lost its answer")
	}
	if _, ok := doc.Components.SecuritySchemes["BearerToken"]; !ok {
		t.Error("the security schemes are gone")
	}
}

// TestReadAgainWhenTheHashChanges: the API server's discovery is read at
// most once per Recheck, and a document only when its hash changed.
func TestReadAgainWhenTheHashChanges(t *testing.T) {
	f := &fakeAPIServer{hash: "A", gets: map[string]int{}}
	d, now := newDocs(t, f)
	base := kubeindexWith(t, d).URL
	coreV1(t, base)
	coreV1(t, base)
	if n, m := f.count("/openapi/v3"), f.count("/openapi/v3/api/v1"); n != 1 || m != 1 {
		t.Fatalf("within Recheck: %d reads of the discovery, %d of the document; want 1, 1", n, m)
	}
	*now = now.Add(DefaultRecheck)
	coreV1(t, base)
	if n, m := f.count("/openapi/v3"), f.count("/openapi/v3/api/v1"); n != 2 || m != 1 {
		t.Fatalf("after Recheck, same hash: %d reads of the discovery, %d of the document; want 2, 1", n, m)
	}
	f.mu.Lock()
	f.hash = "B"
	f.mu.Unlock()
	d.Recheck()
	coreV1(t, base)
	if n, m := f.count("/openapi/v3"), f.count("/openapi/v3/api/v1"); n != 3 || m != 2 {
		t.Fatalf("a new hash: %d reads of the discovery, %d of the document; want 3, 2", n, m)
	}
}

// TestWithoutTheAPIServersDocuments: documents without schemas that still
// declare the patch with fieldValidation (kubectl then sends the write and
// shows the 405), and an API server that refuses is asked again only after
// Recheck.
func TestWithoutTheAPIServersDocuments(t *testing.T) {
	f := &fakeAPIServer{hash: "A", down: true, gets: map[string]int{}}
	d, _ := newDocs(t, f)
	base := kubeindexWith(t, d).URL
	for range 2 {
		doc := coreV1(t, base)
		obj := doc.Paths.Paths["/api/v1/namespaces/{namespace}/pods/{name}"]
		if obj == nil || obj.Patch == nil || obj.Patch.Parameters[0].Name != "fieldValidation" || doc.Components != nil {
			t.Fatalf("fallback document: %+v", doc)
		}
	}
	if n := f.count("/openapi/v3"); n != 1 {
		t.Errorf("the refusing API server was asked %d times within Recheck", n)
	}
}

// TestV2AsJSONAndProtobuf: kubectl asks for v2 as protobuf only.
func TestV2AsJSONAndProtobuf(t *testing.T) {
	f := &fakeAPIServer{hash: "A", gets: map[string]int{}}
	d, _ := newDocs(t, f)
	dc := discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: kubeindexWith(t, d).URL + "/k8s"})
	pb, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, p := range pb.GetPaths().GetPath() {
		paths = append(paths, p.GetName())
	}
	if got := strings.Join(paths, " "); got != "/api/v1/namespaces/{namespace}/pods/{name}" {
		t.Errorf("v2 paths %s", got)
	}
	var defs []string
	for _, p := range pb.GetDefinitions().GetAdditionalProperties() {
		defs = append(defs, p.GetName())
	}
	// Patch stays: the global body parameter stays, and references it.
	want := "io.k8s.api.core.v1.Pod io.k8s.api.core.v1.PodSpec io.k8s.apimachinery.pkg.apis.meta.v1.Patch io.k8s.apimachinery.pkg.apis.meta.v1.Status"
	if got := strings.Join(sorted(defs), " "); got != want {
		t.Errorf("v2 definitions %s, want %s", got, want)
	}
	b, err := dc.RESTClient().Get().AbsPath("/openapi/v2").SetHeader("Accept", "application/json").Do(t.Context()).Raw()
	if err != nil {
		t.Fatal(err)
	}
	var sw spec.Swagger
	if err := json.Unmarshal(b, &sw); err != nil {
		t.Fatal(err)
	}
	del := sw.Paths.Paths["/api/v1/namespaces/{namespace}/pods/{name}"].Delete
	if len(del.Parameters) != 0 || del.Responses.StatusCodeResponses[405].Description != refusal {
		t.Errorf("the delete is not declared refused: %+v", del)
	}
	// The protobuf is the JSON's, as the API server's handler makes it.
	var fromJSON openapi_v2.Document
	doc, err := openapi_v2.ParseDocument(b)
	if err != nil {
		t.Fatal(err)
	}
	proto.Merge(&fromJSON, doc)
	if !proto.Equal(&fromJSON, pb) {
		t.Error("the protobuf and the JSON documents differ")
	}
}

// TestStaleHashRedirectsUnderThePrefix: a document asked for by an old
// hash redirects to the current one, under /k8s.
func TestStaleHashRedirectsUnderThePrefix(t *testing.T) {
	f := &fakeAPIServer{hash: "A", gets: map[string]int{}}
	d, _ := newDocs(t, f)
	base := kubeindexWith(t, d).URL
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + "/k8s/openapi/v3/api/v1?hash=stale")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusMovedPermanently || !strings.HasPrefix(loc, "/k8s/openapi/v3/api/v1?hash=") {
		t.Errorf("%d %q; want a 301 to /k8s/openapi/v3/api/v1?hash=…", resp.StatusCode, loc)
	}
	resp, err = http.Get(base + "/k8s/openapi/v3/api/v1?hash=stale")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "public, immutable" {
		t.Errorf("following the redirect: %d, Cache-Control %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
