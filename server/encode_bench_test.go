package server

import (
	"encoding/json"
	"testing"

	"github.com/kubeindex/kubeindex/cache"
)

// BenchmarkIPPodsEncoding runs the hand-written encoding of an IP lookup's
// summary beside encoding/json's encoding of the same values (which
// TestIPLookupEncoding holds them to). ARCHITECTURE.md quotes it:
//
//	go test -run XXX -bench IPPodsEncoding -benchtime 20000x ./server
func BenchmarkIPPodsEncoding(b *testing.B) {
	pods := []cache.IPPod{
		{Namespace: "media", Name: "web-7d9f8b6c5-x2x9k", Phase: "Running", UID: "0f9c1b6e-3a55-4d2b-9a8e-2f1c4b7d9e01", Active: true, NodeName: "node-1"},
		{Namespace: "media", Name: "web-7d9f8b6c5-abcde", UID: "7b2e9d41-c0a3-4f6e-8d15-a9b8c7d6e5f4", Phase: "Succeeded", NodeName: "node-2"},
	}
	b.Run("hand-written", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			buf = cache.AppendIPPods(buf[:0], pods)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(pods); err != nil {
				b.Fatal(err)
			}
		}
	})
}
