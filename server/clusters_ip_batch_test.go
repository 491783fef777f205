package server

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// TestIPBatchAcrossClusters: each query of a batch across clusters is
// asked of its cluster, or of every cluster without one; each slot is the
// cluster's own batch answer for it, an address held in two clusters is
// held in both, a cluster not serving has its slot, a bad query its error.
func TestIPBatchAcrossClusters(t *testing.T) {
	fa, fb := cachetest.Start(t, cachetest.DefaultSpecs()...), cachetest.Start(t, cachetest.DefaultSpecs()...)
	shared := NewShared(LimitOptions{}, StreamOptions{})
	a := New(fa.Cache, Options{ClusterName: "a", Shared: shared, Logger: quiet()})
	b := New(fb.Cache, Options{ClusterName: "b", Shared: shared, Logger: quiet()})
	fleet := &fakeFleet{names: []string{"a", "b", "c"}, servers: map[string]*Server{"a": a, "b": b, "c": nil}}
	h := New(noCache{}, Options{Clusters: fleet, Shared: shared, Logger: quiet()}).Handler()

	post := func(path, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := localRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		return rec
	}
	own := httptest.NewRecorder()
	req := localRequest("POST", "/api/v1/ip:lookup", strings.NewReader(`{"queries":[{"ip":"10.0.0.12"}]}`))
	req.Header.Set("Content-Type", "application/json")
	a.Handler().ServeHTTP(own, req)
	var ownBatch struct{ Results []json.RawMessage }
	if err := json.Unmarshal(own.Body.Bytes(), &ownBatch); err != nil || len(ownBatch.Results) != 1 {
		t.Fatalf("a's own batch: %d %s", own.Code, own.Body)
	}

	rec := post("/api/v1/clusters/ip:lookup",
		`{"queries":[{"ip":"10.0.0.12"},{"ip":"10.0.0.12","cluster":"b"},{"ip":"192.0.2.1"},{"ip":"nope","cluster":"a"}]}`)
	var got struct {
		Kind    string
		Results []ClusterBatchResult
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 || got.Kind != "ClusterIPLookupBatch" || len(got.Results) != 4 {
		t.Fatalf("batch across clusters: %d %s", rec.Code, rec.Body)
	}
	r := got.Results
	if strings.Join(r[0].HeldIn, ",") != "a,b" || len(r[0].Clusters) != 3 || string(r[0].Clusters[0].Answer) != string(ownBatch.Results[0]) {
		t.Errorf("every cluster asked: %+v; expect held in a and b, a's slot its own answer %s", r[0], ownBatch.Results[0])
	}
	if c := r[0].Clusters[2]; c.Cluster != "c" || c.Status != 503 {
		t.Errorf("the slot of a cluster not serving: %+v", c)
	}
	if strings.Join(r[1].HeldIn, ",") != "b" || len(r[1].Clusters) != 1 || r[1].Clusters[0].Cluster != "b" {
		t.Errorf("a query of cluster b: %+v", r[1])
	}
	if len(r[2].HeldIn) != 0 || r[2].Clusters[0].Status != 404 {
		t.Errorf("an address nobody holds: %+v", r[2])
	}
	if len(r[3].Clusters) != 1 || r[3].Clusters[0].Status != 400 {
		t.Errorf("a bad address asked of a: %+v", r[3])
	}
	for _, body := range []string{`{"queries":[{"ip":"10.0.0.12","cluster":"zz"}]}`, `{"queries":[{"ip":"10.0.0.12","x":1}]}`, `nope`} {
		if rec := post("/api/v1/clusters/ip:lookup", body); rec.Code != 400 {
			t.Errorf("%s: %d %s; expect 400", body, rec.Code, rec.Body)
		}
	}
}
