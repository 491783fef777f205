package table

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// BenchmarkPodRow is one pod's row from the JSON the cache holds of a
// pod of a real cluster (the cache's test pod, managedFields removed):
// reading the printer's view is most of what the column warmer costs per
// pod. scan is Row (the view read by scanPod); decode is the row with the
// view decoded by go-json-experiment, as before scanPod; stand-in is the
// row the column warmer reads, of the pod's copy with stand-ins for its
// containers, labels, annotations and owner references
// (cache/warm_row.go).
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
	b.Run("stand-in", func(b *testing.B) {
		cp := standInPod(b, raw)
		b.SetBytes(int64(len(cp)))
		for b.Loop() {
			if _, ok := p.(Scanner).ScanRow(cp, now); !ok {
				b.Fatal("the scan does not read the copy")
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

// standInPod is raw with stand-ins for its containers, labels,
// annotations and owner references, as the column warmer reads it.
func standInPod(b *testing.B, raw []byte) []byte {
	type standIn struct {
		v, text []byte
	}
	var ins []standIn
	meta := jsonscan.Member(raw, "metadata")
	for _, m := range []string{"labels", "annotations", "ownerReferences"} {
		if v := jsonscan.Member(meta, m); v != nil {
			ins = append(ins, standIn{v, []byte{v[0], v[0] + 2}}) // {} or []
		}
	}
	v := jsonscan.Member(jsonscan.Member(raw, "spec"), "containers")
	text, ok := PodContainersStandIn(nil, v)
	if !ok {
		b.Fatal("no stand-in for the pod's containers")
	}
	ins = append(ins, standIn{v, text})
	slices.SortFunc(ins, func(x, y standIn) int { return cap(y.v) - cap(x.v) }) // in order
	var out []byte
	at := 0
	for _, in := range ins {
		from := cap(raw) - cap(in.v) // in.v is a part of raw
		out = append(append(out, raw[at:from]...), in.text...)
		at = from + len(in.v)
	}
	return append(out, raw[at:]...)
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
