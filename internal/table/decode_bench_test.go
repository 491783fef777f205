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
