package cache

import (
	"os"
	"sync"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/kubernetes/scheme"
)

// TestObjectProtobuf: a real pod's message decodes to what its stored JSON
// decodes to; concurrent readers share one message; each version has its
// own.
func TestObjectProtobuf(t *testing.T) {
	raw, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		t.Fatal(err)
	}
	o, err := NewObject(raw, "v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := scheme.Codecs.UniversalDeserializer().Decode(o.Raw(), nil, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	want.(*corev1.Pod).TypeMeta = corev1.Pod{}.TypeMeta
	msgs := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range msgs {
		wg.Go(func() {
			var err error
			if msgs[i], err = o.Protobuf(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, m := range msgs[1:] {
		if &m[0] != &msgs[0][0] {
			t.Fatal("readers got different messages")
		}
	}
	var got corev1.Pod
	if err := got.Unmarshal(msgs[0]); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(&got, want) {
		t.Errorf("decoded %+v\nwant %+v", got, want)
	}
	next, _ := NewObject(raw, "v1", "Pod")
	if m, _ := next.Protobuf(); &m[0] == &msgs[0][0] {
		t.Error("a new version shares the old one's message")
	}
	if _, err := newObjectMust(t, `{"kind":"Gizmo","apiVersion":"example.com/v1","metadata":{"name":"g"}}`).Protobuf(); err == nil {
		t.Error("a custom resource has a protobuf message")
	}
	if m, err := newObjectMust(t, `{"kind":"Gizmo","apiVersion":"example.com/v1","metadata":{"name":"g","labels":{"a":"b"}}}`).ProtobufMetadata(); err != nil || len(m) == 0 {
		t.Error("a custom resource's metadata has no message", err)
	}
}

func newObjectMust(t *testing.T, raw string) *Object {
	t.Helper()
	o, err := NewObject([]byte(raw), "", "")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// BenchmarkObjectProtobuf is what a version's protobuf costs the first
// reader that asks for it, on one real 11 KB pod: decoding the stored JSON
// into client-go's Pod and marshalling that, beside the same through the
// library's deserializer (decodeTyped's reference); and its metadata
// alone. A later reader costs nothing:
//
//	go test -run XXX -bench ObjectProtobuf -benchmem ./cache
func BenchmarkObjectProtobuf(b *testing.B) {
	raw, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		b.Fatal(err)
	}
	o, err := NewObject(raw, "v1", "Pod")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("object", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := marshalProtobuf(o.Raw()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library", func(b *testing.B) { // what object costs through the library's deserializer alone
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			obj, _, err := protoDecoder.Decode(o.Raw(), nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := obj.(protoMarshaler).Marshal(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("metadata", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			fresh := &Object{own: o.own, chunks: o.chunks, sections: o.sections, known: o.known, walked: o.walked}
			if _, err := fresh.ProtobufMetadata(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// reportCPU reports the process's CPU time per op (cpu-ns/op) as well as
// the wall time, which a loaded machine inflates.
func reportCPU(b *testing.B) func() {
	cpu := func() int64 {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return ru.Utime.Nano() + ru.Stime.Nano()
	}
	begin := cpu()
	return func() { b.ReportMetric(float64(cpu()-begin)/float64(b.N), "cpu-ns/op") }
}
