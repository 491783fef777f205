package cache

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeTypedAsTheLibrary: for every built-in kind, the fast path of
// decodeTyped decodes to what the library's deserializer decodes, and so
// to the same protobuf message. The objects are k8s.io/api's own
// round-trip fixtures (testdata/HEAD: every field of every kind set), the
// real pod, and variants the fast path must decline.
func TestDecodeTypedAsTheLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/api").Output()
	if err != nil {
		t.Fatalf("go list -m k8s.io/api: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "testdata", "HEAD", "*.json"))
	if err != nil || len(files) < 100 {
		t.Fatalf("k8s.io/api's fixtures: %d files, %v", len(files), err)
	}
	files = append(files, "testdata/pod.json")
	fast, kinds := 0, 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := protoDecoder.Decode(raw, nil, nil)
		if err != nil {
			continue // not a kind of client-go's scheme
		}
		kinds++
		if _, ok := decodeFast(raw); ok {
			fast++
		}
		name := filepath.Base(f)
		got, err := decodeTyped(raw)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded\n%+v\nwant\n%+v", name, got, want)
		}
		if m, ok := want.(protoMarshaler); ok {
			wantPB, err := m.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if gotPB, err := marshalProtobuf(raw); err != nil || !bytes.Equal(gotPB, wantPB) {
				t.Errorf("%s: protobuf differs (%v)", name, err)
			}
		}
	}
	if fast != kinds || kinds < 100 {
		t.Errorf("the fast path decoded %d of %d objects", fast, kinds)
	}
	// What the fast path declines, the library decides.
	for _, raw := range []string{
		`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","name":null}}`, // duplicates: v1 keeps "a"
		"{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\xff\"}}",
		`{"kind":"Pod","apiVersion":"v1","kind":"Service"}`,
		`{"apiVersion":"v1","metadata":{"name":"a"}}`,
	} {
		if _, ok := decodeFast([]byte(raw)); ok {
			t.Errorf("the fast path decoded %s", raw)
		}
		assertDecodesAsTheLibrary(t, []byte(raw))
	}
}

// FuzzDecodeTyped: whatever the input, decodeTyped answers what the
// library's deserializer answers.
func FuzzDecodeTyped(f *testing.F) {
	for _, s := range []string{
		`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1"}}}]}}`,
		`{"kind":"Service","apiVersion":"v1","spec":{"ports":[{"port":80,"targetPort":"http"}]}}`,
		`{"kind":"Deployment","apiVersion":"apps/v1","spec":{"replicas":3,"strategy":{"rollingUpdate":{"maxSurge":"25%"}}}}`,
		`{"kind":"Secret","apiVersion":"v1","data":{"k":"dmFsdWU="}}`,
		`{"kind":"Pod","apiVersion":"v1","metadata":{"creationTimestamp":"2026-01-02T03:04:05Z"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { assertDecodesAsTheLibrary(t, raw) })
}

func assertDecodesAsTheLibrary(t *testing.T, raw []byte) {
	t.Helper()
	want, _, wantErr := protoDecoder.Decode(raw, nil, nil)
	got, err := decodeTyped(raw)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%q: error %v, the library's %v", raw, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: decoded\n%#v\nthe library's\n%#v", raw, got, want)
	}
}
