package table

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"
)

// BenchmarkPodRow is one pod's row from the JSON the cache holds of a
// pod of a real cluster (the cache's test pod, managedFields removed):
// reading the printer's view is most of what the column warmer costs per
// pod. scan is Row (the view read by scanPod); decode is the row with the
// view decoded by go-json-experiment, as before scanPod.
func BenchmarkPodRow(b *testing.B) {
	raw := storedPod(b)
	p := podPrinter()
	now := time.Now()
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := p.Row(raw, now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := p.(printer[podView]).row(raw, now, decode[podView]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// storedPod is the JSON the cache holds of the cache's test pod, a pod
// of a real cluster: managedFields removed.
func storedPod(b *testing.B) []byte {
	raw, err := os.ReadFile("../../cache/testdata/pod.json")
	if err != nil {
		b.Fatal(err)
	}
	var pod map[string]any
	if err := json.Unmarshal(raw, &pod); err != nil {
		b.Fatal(err)
	}
	delete(pod["metadata"].(map[string]any), "managedFields")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(pod); err != nil {
		b.Fatal(err)
	}
	return bytes.TrimSpace(buf.Bytes())
}

// BenchmarkSkip is passing over a whole stored pod as one value, as the
// scan passes over what a row does not read: words is skip
// (jsonscan.Dropped, a word at a time), bytes is skipBytes (a token at a
// time, checking every byte's syntax: the scan before it).
func BenchmarkSkip(b *testing.B) {
	raw := storedPod(b)
	for _, c := range []struct {
		name string
		skip func(s *scanner) bool
	}{
		{"words", func(s *scanner) bool { return s.skip() }},
		{"bytes", func(s *scanner) bool { return s.skipBytes(0) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				s := scanner{b: raw}
				if !c.skip(&s) || s.i != len(raw) {
					b.Fatal("the pod is not passed over")
				}
			}
		})
	}
}
