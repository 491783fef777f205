package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// TestOneClusterAnswersUnderItsName: a server of one cluster answers under
// /clusters/default/ exactly what it answers at the root, lists itself on
// /api/v1/clusters, and refuses another name with 404.
func TestOneClusterAnswersUnderItsName(t *testing.T) {
	_, h := startServer(t)
	for _, path := range []string{"/api/v1/pods?limit=3", "/api/v1/resources/pods", "/k8s/api/v1/namespaces/default/pods", "/api/v1/pods/nope/nope"} {
		root, prefixed := do(t, h, "GET", path), do(t, h, "GET", "/clusters/default"+path)
		if root.Code != prefixed.Code || root.Body.String() != prefixed.Body.String() {
			t.Errorf("%s: root %d %.80s; under /clusters/default %d %.80s", path, root.Code, root.Body, prefixed.Code, prefixed.Body)
		}
	}
	rec := do(t, h, "GET", "/clusters/east/api/v1/pods")
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `no such cluster \"east\"`) {
		t.Errorf("an unknown cluster: %d %s; expect 404 naming it", rec.Code, rec.Body)
	}
	var list struct {
		Kind     string         `json:"kind"`
		Clusters []ClusterState `json:"clusters"`
	}
	rec = do(t, h, "GET", "/api/v1/clusters")
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || rec.Code != 200 {
		t.Fatalf("/api/v1/clusters: %d %s %v", rec.Code, rec.Body, err)
	}
	if len(list.Clusters) != 1 || list.Clusters[0].Name != DefaultClusterName || list.Clusters[0].State != ClusterSynced ||
		list.Clusters[0].Objects == 0 || list.Kind != "ClusterList" {
		t.Errorf("/api/v1/clusters: %+v; expect the one synced cluster, default", list)
	}
}

// fakeFleet is a Clusters of fixed servers; a nil server is a cluster
// not serving.
type fakeFleet struct {
	names   []string
	servers map[string]*Server
}

func (f *fakeFleet) Cluster(name string) (*Server, error) {
	s, ok := f.servers[name]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w %q", ErrUnknownCluster, name)
	case s == nil:
		return nil, fmt.Errorf("%w: %q: connection refused", ErrClusterUnavailable, name)
	}
	return s, nil
}

func (f *fakeFleet) Names() []string { return f.names }

func (f *fakeFleet) States() []ClusterState {
	var out []ClusterState
	for _, n := range f.names {
		if s := f.servers[n]; s != nil {
			out = append(out, StateOf(n, s.r))
		} else {
			out = append(out, ClusterState{Name: n, State: ClusterFailed, Reason: "connection refused"})
		}
	}
	return out
}

func (f *fakeFleet) Ready() bool { return f.servers["b"] != nil }

// TestFleetFrontRoutesEachCluster: a fleet's front sends /clusters/{name}/
// to that cluster's server, answers a cluster not serving 503 with its
// reason, an unknown one 404, and a cluster's route asked at its root 404
// with the way to ask (a list is across clusters: clusters_list_test.go);
// every server shares the process's stream bound.
func TestFleetFrontRoutesEachCluster(t *testing.T) {
	fa := cachetest.Start(t, cachetest.PodSpec())
	shared := NewShared(LimitOptions{MaxStreamsPerClient: 1}, StreamOptions{})
	a := New(fa.Cache, Options{ClusterName: "a", Shared: shared, Logger: quiet()})
	fleet := &fakeFleet{names: []string{"a", "b"}, servers: map[string]*Server{"a": a, "b": nil}}
	h := New(noCache{}, Options{Clusters: fleet, Shared: shared, Logger: quiet()}).Handler()

	direct := do(t, a.Handler(), "GET", "/api/v1/pods?limit=2")
	if rec := do(t, h, "GET", "/clusters/a/api/v1/pods?limit=2"); rec.Code != 200 || rec.Body.String() != direct.Body.String() {
		t.Errorf("/clusters/a/api/v1/pods: %d %.100s; expect cluster a's own answer", rec.Code, rec.Body)
	}
	for _, tc := range []struct {
		path string
		code int
		says string
	}{
		{"/clusters/b/api/v1/pods", 503, "connection refused"},
		{"/clusters/c/k8s/api/v1/pods", 404, `no such cluster \"c\"`},
		{"/api/v1/pods/default/x", 404, "/clusters/{name}/"},
		{"/api/v1/resources", 404, "/clusters/{name}/"},
		{"/k8s/api/v1/pods", 404, "/clusters/{name}/"},
		{"/readyz", 503, `"state":"failed"`},
		{"/api/v1/clusters", 200, `{"name":"b","state":"failed","reason":"connection refused","resources":0,"objects":0}`},
	} {
		rec := do(t, h, "GET", tc.path)
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.says) {
			t.Errorf("%s: %d %s; expect %d saying %s", tc.path, rec.Code, rec.Body, tc.code, tc.says)
		}
	}
	// The bound on a client's streams is the process's, not a cluster's.
	if !shared.limits.openStream("ip:192.0.2.1") {
		t.Fatal("the first stream was refused")
	}
	if a.limits.openStream("ip:192.0.2.1") {
		t.Error("a cluster's server opened a stream beyond the client's bound, counted apart from the front's")
	}
}

// TestClusterMissNeedsAuthentication: with authentication on, whether a
// cluster exists or serves is told to authenticated callers only.
func TestClusterMissNeedsAuthentication(t *testing.T) {
	st, err := auth.ParseStaticTokens([]byte("s3cret,alice,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	fleet := &fakeFleet{names: []string{"b"}, servers: map[string]*Server{"b": nil}}
	h := New(noCache{}, Options{Clusters: fleet, Auth: AuthOptions{Authenticator: st}, Logger: quiet()}).Handler()
	for _, path := range []string{"/clusters/b/api/v1/pods", "/clusters/zz/api/v1/pods", "/api/v1/clusters"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, localRequest("GET", path, nil))
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d; expect 401", path, rec.Code)
		}
	}
	req := localRequest("GET", "/clusters/b/api/v1/pods", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("a cluster not serving, with a token: %d; expect 503", rec.Code)
	}
}

// TestReservedNamesCoverTheRoutes: every first segment a route of the
// REST API takes under /api/v1/ is reserved, so that no resource is named
// by it (a Cluster API "clusters" is clusters.cluster.x-k8s.io).
func TestReservedNamesCoverTheRoutes(t *testing.T) {
	s := New(noCache{}, Options{Logger: quiet()})
	for _, rt := range s.table() {
		rest, ok := strings.CutPrefix(rt.path, "/api/v1/")
		if !ok {
			continue
		}
		seg, _, _ := strings.Cut(rest, "/")
		if strings.HasPrefix(seg, ":") || strings.Contains(seg, `\:`) {
			continue // a parameter; ip\:lookup is no resource name
		}
		if !slices.Contains(cache.ReservedNames, seg) {
			t.Errorf("route %s takes /api/v1/%s, which cache.ReservedNames does not reserve", rt.path, seg)
		}
	}
	rs := []cache.Resource{{Plural: "clusters", Group: "cluster.x-k8s.io"}, {Plural: "pods"}}
	cache.NameResources(rs)
	if rs[0].Name != "clusters.cluster.x-k8s.io" || rs[1].Name != "pods" {
		t.Errorf("names %q %q; expect clusters.cluster.x-k8s.io and pods", rs[0].Name, rs[1].Name)
	}
}

// TestLookupIPAcrossClusters: an address held in two clusters (the same
// simulated cluster twice: every pod CIDR overlaps) is answered by both,
// each slot its cluster's own answer; a cluster not serving has its slot;
// ?cluster= narrows.
func TestLookupIPAcrossClusters(t *testing.T) {
	fa, fb := cachetest.Start(t, cachetest.DefaultSpecs()...), cachetest.Start(t, cachetest.DefaultSpecs()...)
	shared := NewShared(LimitOptions{}, StreamOptions{})
	a := New(fa.Cache, Options{ClusterName: "a", Shared: shared, Logger: quiet()})
	b := New(fb.Cache, Options{ClusterName: "b", Shared: shared, Logger: quiet()})
	fleet := &fakeFleet{names: []string{"a", "b", "c"}, servers: map[string]*Server{"a": a, "b": b, "c": nil}}
	h := New(noCache{}, Options{Clusters: fleet, Shared: shared, Logger: quiet()}).Handler()
	own := do(t, a.Handler(), "GET", "/api/v1/ip/10.0.0.12")
	if own.Code != 200 {
		t.Fatalf("cluster a's own lookup: %d %s", own.Code, own.Body)
	}
	var got struct {
		Kind     string
		HeldIn   []string
		Clusters []ClusterIPAnswer
	}
	rec := do(t, h, "GET", "/api/v1/clusters/ip/10.0.0.12")
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 {
		t.Fatalf("across clusters: %d %s %v", rec.Code, rec.Body, err)
	}
	if strings.Join(got.HeldIn, ",") != "a,b" || len(got.Clusters) != 3 || got.Kind != "ClusterIPLookup" {
		t.Fatalf("across clusters: %+v; expect held in a and b, three slots", got)
	}
	if got.Clusters[0].Cluster != "a" || got.Clusters[0].Status != 200 || string(got.Clusters[0].Answer) != strings.TrimSpace(own.Body.String()) {
		t.Errorf("a's slot %s %d %s; expect its own answer %s", got.Clusters[0].Cluster, got.Clusters[0].Status, got.Clusters[0].Answer, own.Body)
	}
	if c := got.Clusters[2]; c.Cluster != "c" || c.Status != 503 || !strings.Contains(string(c.Answer), "connection refused") {
		t.Errorf("the slot of a cluster not serving: %+v", c)
	}
	rec = do(t, h, "GET", "/api/v1/clusters/ip/10.0.0.12?cluster=b")
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || len(got.Clusters) != 1 || got.Clusters[0].Cluster != "b" {
		t.Errorf("?cluster=b: %s", rec.Body)
	}
	rec = do(t, h, "GET", "/api/v1/clusters/ip/192.0.2.1")
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || len(got.HeldIn) != 0 || got.Clusters[0].Status != 404 {
		t.Errorf("an address nobody holds: %s", rec.Body)
	}
	for _, path := range []string{"/api/v1/clusters/ip/10.0.0.12?cluster=zz", "/api/v1/clusters/ip/nope", "/api/v1/clusters/ip/10.0.0.12?x=1"} {
		if rec := do(t, h, "GET", path); rec.Code != 400 {
			t.Errorf("%s: %d %s; expect 400", path, rec.Code, rec.Body)
		}
	}
}
