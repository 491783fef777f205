package cache_test

import (
	"encoding/json"
	"testing"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// TestDemoPodsAreStoredInPieces: the simulated cluster's pods, which the
// cache and server tests read, repeat their containers per workload
// around their token volume names, so those tests read objects held in
// pieces (object_chunks.go); each reads whole as valid JSON of its key.
func TestDemoPodsAreStoredInPieces(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	res, err := f.Cache.List("pods", cache.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	chunked := 0
	for _, o := range res.Items {
		if o.Chunked() {
			chunked++
		}
		var p struct {
			Metadata struct{ Namespace, Name string }
		}
		if err := json.Unmarshal(o.Raw(), &p); err != nil || p.Metadata.Namespace+"/"+p.Metadata.Name != o.Key() {
			t.Fatalf("%s reads as %+v, %v", o.Key(), p.Metadata, err)
		}
		if o.Len() != len(o.Raw()) {
			t.Fatalf("%s: Len %d, %d bytes", o.Key(), o.Len(), len(o.Raw()))
		}
	}
	if chunked*2 < len(res.Items) {
		t.Fatalf("%d of %d pods are stored in pieces, want most", chunked, len(res.Items))
	}
	t.Logf("%d of %d pods stored in pieces", chunked, len(res.Items))
}
