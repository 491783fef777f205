package table

import (
	"bytes"
	"encoding/json"
	randv1 "math/rand"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	apitesting "k8s.io/kubernetes/pkg/api/testing"
	api "k8s.io/kubernetes/pkg/apis/core"

	"github.com/kubeindex/kubeindex/internal/table"
)

// TestBuildMetadataRows: a row's object under includeObject=Metadata (the
// default) is what the API server's asTable puts there,
// meta.AsPartialObjectMetadata with the Table's group version, for fuzzed
// pods (every metadata field filled).
func TestBuildMetadataRows(t *testing.T) {
	f := fuzzer.FuzzerFor(apitesting.FuzzerFuncs, randv1.NewSource(14), legacyscheme.Codecs)
	var raws [][]byte
	var want [][]byte
	for range 300 {
		internal := &api.Pod{}
		f.Fill(internal)
		internal.ManagedFields = nil // the cache strips them
		pod := &corev1.Pod{}
		if err := legacyscheme.Scheme.Convert(internal, pod, nil); err != nil {
			t.Fatal(err)
		}
		raws = append(raws, mustJSON(t, pod))
		p := meta.AsPartialObjectMetadata(pod)
		p.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"))
		want = append(want, mustJSON(t, p))
	}
	for _, include := range []metav1.IncludeObjectPolicy{"", metav1.IncludeMetadata} {
		tab, err := table.Build(table.ForResource(podsGR), raws, table.Options{IncludeObject: include}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for i, row := range tab.Rows {
			var got bytes.Buffer
			if err := json.Compact(&got, row.Object.Raw); err != nil {
				t.Fatal(err)
			}
			if got.String() != string(want[i]) {
				t.Fatalf("includeObject=%q, row %d:\n got %s\nwant %s", include, i, got.Bytes(), want[i])
			}
		}
	}
}
