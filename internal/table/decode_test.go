package table

import (
	"bytes"

	jsonv2 "github.com/go-json-experiment/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
)

// referenceRow is Row with the object decoded by sigs.k8s.io/json alone,
// as the API server decodes it: what decode must always agree with.
func (p printer[T]) referenceRow(raw []byte, now time.Time) (metav1.TableRow, error) {
	return p.row(raw, now, func(b []byte, obj *T) error { return sigsjson.UnmarshalCaseSensitivePreserveInts(b, obj) })
}

type referenced interface {
	Convertor
	referenceRow(raw []byte, now time.Time) (metav1.TableRow, error)
}

// apiFixtures are k8s.io/api's round-trip fixtures (every field of every
// kind set) and a pod of the kind the API server writes.
func apiFixtures(t testing.TB) [][]byte {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/api").Output()
	if err != nil {
		t.Fatalf("go list -m k8s.io/api: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "testdata", "HEAD", "*.json"))
	if err != nil || len(files) < 100 {
		t.Fatalf("k8s.io/api's fixtures: %d files, %v", len(files), err)
	}
	raws := [][]byte{[]byte(podJSON)}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
	}
	return raws
}

// variants are raw and versions of it on which go-json-experiment's
// decoder and sigs.k8s.io/json could differ: a duplicate member, a name in
// another case, invalid UTF-8, nulls, a value of the wrong type.
func variants(raw []byte) [][]byte {
	out := [][]byte{raw}
	if i := bytes.IndexByte(raw, '{'); i >= 0 {
		out = append(out,
			append([]byte(`{"metadata":{"name":"first"},`), raw[i+1:]...),
			append([]byte(`{"Metadata":{"name":"cased"},`), raw[i+1:]...),
			append([]byte(`{"status":null,"spec":null,`), raw[i+1:]...),
			append([]byte(`{"status":7,`), raw[i+1:]...))
	}
	out = append(out,
		bytes.Replace(raw, []byte(`"name":"`), []byte("\"name\":\"\xff"), 1),
		bytes.Replace(raw, []byte(`"name"`), []byte(`"Name"`), -1),
		bytes.Replace(raw, []byte(`"restartCount":`), []byte(`"restartCount":1,"restartCount":`), -1),
		bytes.Replace(raw, []byte(`"ready":`), []byte(`"ready":"yes","ready":`), -1))
	return out
}

// TestDecodeAsTheAPIServer: every printer's row of every fixture and its
// variants is the row it makes from the object decoded by
// sigs.k8s.io/json, errors included; the fast decoder decodes most of
// them itself (the fixtures of the printers' own kinds all).
func TestDecodeAsTheAPIServer(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 5, 30, 0, time.UTC)
	raws := apiFixtures(t)
	for gr, c := range printers {
		p, ok := c.(referenced)
		if !ok {
			t.Fatalf("%s: the printer has no reference row", gr)
		}
		n := 0
		for i, raw := range raws {
			if i > 2 && !ofResource(raw, gr.Resource) {
				continue // the printer's own kind and a few others
			}
			n++
			for _, v := range variants(raw) {
				got, gotErr := p.Row(v, now)
				want, wantErr := p.referenceRow(v, now)
				if (gotErr != nil) != (wantErr != nil) || !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: row of\n%s\n got %+v, %v\nwant %+v, %v", gr, v, got, gotErr, want, wantErr)
				}
			}
		}
		if n < 4 {
			t.Errorf("%s: no fixture of its kind", gr)
		}
	}
	pods := 0
	for _, raw := range raws {
		if ofResource(raw, "pods") {
			pods++
			if err := jsonv2.Unmarshal(raw, new(podView)); err != nil {
				t.Errorf("the fast decoder declines a pod: %v\n%s", err, raw)
			}
		}
	}
	if pods < 2 {
		t.Errorf("%d pods among the fixtures", pods)
	}
}

// ofResource reports whether raw is an object of the kind a resource
// holds (pods: Pod; ingresses: Ingress).
func ofResource(raw []byte, resource string) bool {
	var tm metav1.TypeMeta
	if sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &tm) != nil || tm.Kind == "" {
		return false
	}
	kind := strings.ToLower(tm.Kind)
	return resource == kind+"s" || resource == kind+"es"
}

// FuzzDecode: whatever the bytes, a pod's row is the row of the pod
// decoded by sigs.k8s.io/json.
func FuzzDecode(f *testing.F) {
	for _, raw := range apiFixtures(f) {
		if ofResource(raw, "pods") {
			for _, v := range variants(raw) {
				f.Add(v)
			}
		}
	}
	p := podPrinter().(printer[podView])
	now := time.Date(2026, 1, 1, 0, 5, 30, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, gotErr := p.Row(raw, now)
		want, wantErr := p.referenceRow(raw, now)
		if (gotErr != nil) != (wantErr != nil) || !reflect.DeepEqual(got, want) {
			t.Fatalf("row of %q:\n got %+v, %v\nwant %+v, %v", raw, got, gotErr, want, wantErr)
		}
	})
}
