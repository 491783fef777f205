package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeindex/kubeindex/auth/authtest"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// withSubresources is a cache whose discovery lists the subresources the
// API server lists for pods and deployments; the demo's lists only status.
type withSubresources struct{ *cache.Cache }

func (r withSubresources) APIResources() []cache.Resource {
	rs := r.Cache.APIResources()
	for i := range rs {
		switch rs[i].Plural {
		case "pods":
			rs[i].Subresources = []string{"attach", "binding", "ephemeralcontainers", "eviction", "exec", "log", "portforward", "proxy", "status"}
		case "deployments":
			rs[i].Subresources = []string{"scale", "status"}
		}
	}
	return rs
}

func TestKubeSubresources(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	h := New(withSubresources{f.Cache}, Options{}).Handler()
	pod := aPod(t, f.Cache)
	podPath := "/k8s/api/v1/namespaces/" + pod.Namespace() + "/pods/" + pod.Name()
	tests := []struct {
		name, path, accept string
		// expect
		code  int
		check func(t *testing.T, b gjson.Result)
	}{
		{name: "a pod's status is the pod", path: podPath + "/status", code: 200, check: func(t *testing.T, b gjson.Result) {
			want(t, b.Raw == string(pod.Raw()), "the pod's bytes: "+b.Raw)
		}},
		{name: "a node's status", path: "/k8s/api/v1/nodes/node-2/status", code: 200, check: func(t *testing.T, b gjson.Result) {
			want(t, b.Get("kind").Str == "Node" && b.Get("metadata.name").Str == "node-2", b.Raw)
		}},
		{name: "a namespace's status", path: "/k8s/api/v1/namespaces/kube-system/status", code: 200, check: func(t *testing.T, b gjson.Result) {
			want(t, b.Get("kind").Str == "Namespace" && b.Get("metadata.name").Str == "kube-system", b.Raw)
		}},
		{name: "status as a Table", path: podPath + "/status", accept: kubeTableMediaType, code: 200, check: func(t *testing.T, b gjson.Result) {
			want(t, b.Get("kind").Str == "Table" && b.Get("columnDefinitions.#(name==\"Status\")").Exists() &&
				b.Get("rows.0.cells.0").Str == pod.Name(), "the pod's columns: "+b.Raw)
		}},
		{name: "a missing pod's status", path: "/k8s/api/v1/namespaces/kube-system/pods/no-such-pod/status", code: 404, check: func(t *testing.T, b gjson.Result) {
			want(t, b.Get("message").Str == `pods "no-such-pod" not found`, b.Raw)
		}},
		{name: "a pod's log", path: podPath + "/log?container=c", code: 405, check: func(t *testing.T, b gjson.Result) {
			want(t, b.Get("reason").Str == "MethodNotAllowed" && strings.Contains(b.Get("message").Str, `does not serve the subresource "log"`) &&
				strings.Contains(b.Get("message").Str, "Kubernetes API server itself") && b.Get("details.name").Str == pod.Name(), b.Raw)
		}},
		{name: "a missing pod's log: never not found", path: "/k8s/api/v1/namespaces/kube-system/pods/no-such-pod/log", code: 405},
		{name: "exec", path: podPath + "/exec?command=sh", code: 405},
		{name: "proxy with a path", path: podPath + "/proxy/metrics/x", code: 405, check: func(t *testing.T, b gjson.Result) {
			want(t, strings.Contains(b.Get("message").Str, `subresource "proxy"`), b.Raw)
		}},
		{name: "a subresource of nothing", path: podPath + "/nonsense", code: 404, check: func(t *testing.T, b gjson.Result) {
			want(t, b.Get("message").Str == "the server could not find the requested resource", b.Raw)
		}},
		{name: "status of a watch", path: podPath + "/status?watch=true", code: 405},
		{name: "a service's scale: it has none", path: "/k8s/api/v1/namespaces/kube-system/services/kube-dns/scale", code: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := kubeDo(t, h, http.MethodGet, tt.path, tt.accept)
			if rec.Code != tt.code {
				t.Fatalf("%d, want %d: %s", rec.Code, tt.code, rec.Body)
			}
			b := gjson.ParseBytes(rec.Body.Bytes())
			if tt.code >= 400 {
				wantStatus(t, b, tt.code)
			}
			if tt.check != nil {
				tt.check(t, b)
			}
		})
	}

	t.Run("a deployment's scale, as its registry builds it", func(t *testing.T) {
		d, _, err := f.Cache.Get("deployments", "kube-system", "coredns")
		if err != nil {
			t.Fatal(err)
		}
		var dep appsv1.Deployment
		if err := json.Unmarshal(d.Raw(), &dep); err != nil {
			t.Fatal(err)
		}
		sel, _ := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
		rec := kubeDo(t, h, http.MethodGet, "/k8s/apis/apps/v1/namespaces/kube-system/deployments/coredns/scale", "")
		b := gjson.ParseBytes(rec.Body.Bytes())
		want(t, rec.Code == 200 && b.Get("kind").Str == "Scale" && b.Get("apiVersion").Str == "autoscaling/v1", rec.Body.String())
		want(t, b.Get("metadata.name").Str == "coredns" && b.Get("metadata.uid").Str == string(dep.UID) &&
			b.Get("metadata.resourceVersion").Str == dep.ResourceVersion && !b.Get("metadata.labels").Exists(), "the metadata the registry keeps: "+b.Raw)
		want(t, b.Get("spec.replicas").Int() == int64(*dep.Spec.Replicas) && b.Get("status.replicas").Int() == int64(dep.Status.Replicas) &&
			b.Get("status.selector").Str == sel.String() && sel.String() != "", "replicas and selector: "+b.Raw)
		rec = kubeDo(t, h, http.MethodGet, "/k8s/apis/apps/v1/namespaces/kube-system/deployments/coredns/scale", kubeTableMediaType)
		b = gjson.ParseBytes(rec.Body.Bytes())
		cols := slices.Collect(func(yield func(string) bool) {
			for _, c := range b.Get("columnDefinitions.#.name").Array() {
				yield(c.Str)
			}
		})
		want(t, slices.Equal(cols, []string{"Name", "Desired", "Available", "Age"}), "the Scale's columns: "+b.Raw)
	})

	t.Run("writes to a subresource name it", func(t *testing.T) {
		rec := kubeDo(t, h, http.MethodPost, podPath+"/eviction", "")
		b := gjson.ParseBytes(rec.Body.Bytes())
		want(t, rec.Code == 405 && strings.Contains(b.Get("message").Str, `POST of the subresource "eviction" is not allowed`) &&
			strings.Contains(b.Get("message").Str, "read-only"), rec.Body.String())
	})
}

// TestKubeSubresourceAuthorization: status is authorized as the API server
// authorizes it, on pods/status; alice may read pods, not their status.
func TestKubeSubresourceAuthorization(t *testing.T) {
	e := startAuth(t, Options{})
	e.api.SetRules(append(authRules(), authtest.Rule{Group: "admins", Verbs: []string{"get"}, Resource: "pods/status"})...)
	resp, body := e.get(t, "/k8s/api/v1/namespaces/team-a/pods/a-0/status", "alice-token")
	b := gjson.ParseBytes(body)
	want(t, resp.StatusCode == 403 && b.Get("message").Str ==
		`pods "a-0" is forbidden: User "alice" cannot get resource "pods/status" in API group "" in the namespace "team-a"`, string(body))
	resp, body = e.get(t, "/k8s/api/v1/namespaces/team-a/pods/a-0/status", "admin-token")
	want(t, resp.StatusCode == 200 && gjson.GetBytes(body, "metadata.name").Str == "a-0", "the admin may get pods/status: "+string(body))
}
