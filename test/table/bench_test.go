package table

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"

	"github.com/kubeindex/kubeindex/internal/table"
)

// benchPods are 10,000 pods of the random generator, as JSON.
func benchPods(b *testing.B) [][]byte {
	r := rand.New(rand.NewPCG(14, 5))
	raws := make([][]byte, 10000)
	for i := range raws {
		p := randomPod(r, i)
		p.Spec.Containers = append(p.Spec.Containers, randomPod(r, i).Spec.Containers...)
		raws[i] = mustJSON(b, p)
	}
	return raws
}

// BenchmarkPodRows: one op is the rows of 10,000 pods.
//
//   - kubeindex: internal/table from the cached JSON;
//   - printer-from-json: what the same would cost with the API server's
//     code (decode v1, convert to internal, print);
//   - printer-only: the printer on internal objects already in memory, as
//     in the API server's watch cache.
func BenchmarkPodRows(b *testing.B) {
	raws := benchPods(b)
	now := time.Now()
	pods := table.ForResource(podsGR)
	b.Run("kubeindex", func(b *testing.B) {
		for b.Loop() {
			for _, raw := range raws {
				if _, err := pods.Row(raw, now); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("printer-from-json", func(b *testing.B) {
		for b.Loop() {
			for _, raw := range raws {
				versioned, _ := legacyscheme.Scheme.New(podsGVK)
				if err := json.Unmarshal(raw, versioned); err != nil {
					b.Fatal(err)
				}
				internal := &api.Pod{}
				if err := legacyscheme.Scheme.Convert(versioned, internal, nil); err != nil {
					b.Fatal(err)
				}
				if _, err := apiServerPrinters.ConvertToTable(context.Background(), internal, nil); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("printer-only", func(b *testing.B) {
		internals := make([]runtime.Object, len(raws))
		for i, raw := range raws {
			versioned, _ := legacyscheme.Scheme.New(podsGVK)
			if err := json.Unmarshal(raw, versioned); err != nil {
				b.Fatal(err)
			}
			internals[i] = &api.Pod{}
			if err := legacyscheme.Scheme.Convert(versioned, internals[i], nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		for b.Loop() {
			for _, obj := range internals {
				if _, err := apiServerPrinters.ConvertToTable(context.Background(), obj, nil); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
