package fakeapi

import (
	"net/http"
	"slices"
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

func TestDiscoveryWithClientGo(t *testing.T) {
	t.Parallel()
	_, srv := newTestCluster(t, Options{GitVersion: "v1.36.2-fake"})
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	groups, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("ServerGroupsAndResources: %v", err)
	}
	var names []string
	for _, g := range groups {
		names = append(names, g.Name+"/"+g.PreferredVersion.Version)
	}
	if !slices.Equal(names, []string{"/v1", "apps/v1"}) {
		t.Errorf("groups = %v, want [/v1 apps/v1]", names)
	}
	want := map[string]struct {
		gv, kind, short string
		namespaced      bool
	}{
		"pods":        {"v1", "Pod", "po", true},
		"services":    {"v1", "Service", "svc", true},
		"nodes":       {"v1", "Node", "no", false},
		"namespaces":  {"v1", "Namespace", "ns", false},
		"deployments": {"apps/v1", "Deployment", "deploy", true},
		"replicasets": {"apps/v1", "ReplicaSet", "rs", true},
	}
	found := 0
	for _, l := range lists {
		for _, r := range l.APIResources {
			w, ok := want[r.Name]
			if !ok {
				continue
			}
			found++
			if l.GroupVersion != w.gv || r.Kind != w.kind || r.Namespaced != w.namespaced ||
				!slices.Contains(r.ShortNames, w.short) || !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) ||
				r.SingularName == "" {
				t.Errorf("%s in %s: %+v, want %+v", r.Name, l.GroupVersion, r, w)
			}
		}
	}
	if found != len(want) {
		t.Errorf("found %d of %d resources", found, len(want))
	}
	v, err := dc.ServerVersion()
	if err != nil || v.GitVersion != "v1.36.2-fake" || v.Major != "1" || v.Minor != "36" {
		t.Errorf("ServerVersion = %v, %v", v, err)
	}
}

func TestDiscoveryAnswersLegacyJSONToAggregatedAccept(t *testing.T) {
	t.Parallel()
	_, srv := newTestCluster(t, Options{})
	for _, path := range []string{"/api", "/apis", "/api/v1", "/apis/apps/v1", "/apis/apps"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Accept", discovery.AcceptV2+","+discovery.AcceptV1)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/json" {
			t.Errorf("%s: %d %q, want 200 application/json", path, resp.StatusCode, ct)
		}
	}
}
