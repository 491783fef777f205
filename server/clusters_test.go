package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kubeindex/kubeindex/auth"
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
// with the way to ask; every server shares the process's stream bound.
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
		{"/api/v1/pods", 404, "/clusters/{name}/"},
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
