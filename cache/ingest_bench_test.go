package cache

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// BenchmarkIngestVersusLibrary runs, side by side on one real 11 KB pod,
// what the cache does to an object on its way in and what the libraries it
// replaces would do: find where the object ends (jsonscan.Value against
// encoding/json's json.Valid, which scans the same bytes), and build the
// stored object (Shape.Build, one pass of byte splicing, against decoding
// into map[string]any as an unstructured informer does, deleting
// managedFields and encoding it again). ARCHITECTURE.md quotes it:
//
//	go test -run XXX -bench IngestVersusLibrary -benchtime 2000x ./cache
func BenchmarkIngestVersusLibrary(b *testing.B) {
	pod, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		b.Fatal(err)
	}
	shape := Shape{APIVersion: "v1", Kind: "Pod"}
	for _, bc := range []struct {
		name string
		run  func() error
	}{
		{"end/jsonscan", func() error { _, err := jsonscan.Value(pod); return err }},
		{"end/encoding-json", func() error {
			if !json.Valid(pod) {
				return errNotObject
			}
			return nil
		}},
		{"build/Shape.Build", func() error { _, err := shape.Build(pod); return err }},
		{"build/unstructured", func() error {
			var m map[string]any
			if err := json.Unmarshal(pod, &m); err != nil {
				return err
			}
			if md, ok := m["metadata"].(map[string]any); ok {
				delete(md, "managedFields")
			}
			_, err := json.Marshal(m)
			return err
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(pod)))
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
