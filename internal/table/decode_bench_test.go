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
// the decode of the printer's view is most of what the column warmer
// costs per pod.
func BenchmarkPodRow(b *testing.B) {
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
	raw = bytes.TrimSpace(buf.Bytes())
	p := podPrinter()
	now := time.Now()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := p.Row(raw, now); err != nil {
			b.Fatal(err)
		}
	}
}
