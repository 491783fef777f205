package cache

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

func TestNewObjectStripsManagedFields(t *testing.T) {
	tests := []struct {
		name, in string
		want     map[string]any
	}{
		{
			name: "managedFields in the middle of metadata",
			in:   `{"metadata":{"name":"a","managedFields":[{"manager":"x","fieldsV1":{"f:a":{}}}],"namespace":"ns"}}`,
			want: map[string]any{"kind": "Pod", "apiVersion": "v1", "metadata": map[string]any{"name": "a", "namespace": "ns"}},
		},
		{
			name: "managedFields first, whitespace around",
			in:   "{\n \"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\" : { \"managedFields\" : [ ] ,\n \"name\":\"a\"}}",
			want: map[string]any{"kind": "Pod", "apiVersion": "v1", "metadata": map[string]any{"name": "a"}},
		},
		{
			name: "managedFields last",
			in:   `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","managedFields":[{"m":"}{\"]"}]},"spec":{}}`,
			want: map[string]any{"kind": "Pod", "apiVersion": "v1", "metadata": map[string]any{"name": "a"}, "spec": map[string]any{}},
		},
		{
			name: "no managedFields, kind kept",
			in:   `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n"}}`,
			want: map[string]any{"kind": "Node", "apiVersion": "v1", "metadata": map[string]any{"name": "n"}},
		},
		{
			name: "a managedFields key elsewhere is left alone",
			in:   `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"},"spec":{"managedFields":1}}`,
			want: map[string]any{"kind": "Pod", "apiVersion": "v1", "metadata": map[string]any{"name": "a"}, "spec": map[string]any{"managedFields": float64(1)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := NewObject([]byte(tt.in), "v1", "Pod")
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(o.Raw(), &got); err != nil {
				t.Fatalf("result is not JSON: %v\n%s", err, o.Raw())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("expect %v\ngot    %v", tt.want, got)
			}
		})
	}
}

func TestNewObjectRejects(t *testing.T) {
	for _, in := range []string{``, `[]`, `{}`, `{"metadata":{}}`, `"x"`} {
		if _, err := NewObject([]byte(in), "v1", "Pod"); err == nil {
			t.Errorf("NewObject(%q): expect an error", in)
		}
	}
}

func TestNewObjectDoesNotShareMemory(t *testing.T) {
	in := []byte(`{"metadata":{"name":"a","namespace":"b","resourceVersion":"7","uid":"u"}}`)
	o, err := NewObject(in, "v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = 'x'
	}
	if o.Key() != "b/a" || o.ResourceVersion() != "7" || o.UID() != "u" || !json.Valid(o.Raw()) {
		t.Fatalf("object changed when its input was overwritten: %q %s", o.Key(), o.Raw())
	}
}

func FuzzNewObject(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"a","managedFields":[{}],"namespace":"ns"}}`))
	f.Add([]byte(`{"metadata":{"managedFields":[],"name":"a"}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		o, err := NewObject(in, "v1", "Pod")
		if err != nil {
			return
		}
		// Valid JSON in, valid JSON out: the byte surgery never corrupts.
		if json.Valid(in) && !json.Valid(o.Raw()) {
			t.Fatalf("valid input %q became invalid %q", in, o.Raw())
		}
	})
}

// TestKnownMembersAgreeWithScan: the places Build records for the members
// readers ask for (knownMembers) answer what a scan of the stored section
// answers, wherever managedFields was cut from around them, for the first
// of duplicated keys and for keys spelled with escapes.
func TestKnownMembersAgreeWithScan(t *testing.T) {
	pod, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		t.Fatal(err)
	}
	inputs := []string{
		string(pod),
		`{"metadata":{"managedFields":[{"m":1}],"name":"a","labels":{"app":"x"},"ownerReferences":[{"uid":"u"}],"creationTimestamp":"2026-01-01T00:00:00Z"}}`,
		`{"metadata":{"name":"a","labels":{"app":"x"},"managedFields":[{"m":1}],"creationTimestamp":"2026-01-01T00:00:00Z","managedFields":[],"ownerReferences":[{"uid":"u"}]}}`,
		`{"metadata":{"labels":{"a":"1"},"name":"a","labels":{"a":"2"},"managedFields":[]},"metadata":{"name":"b","labels":{"a":"3"}}}`,
		`{"metadata":{"name":"a","l\u0061bels":{"app":"y"},"annotations":{"k":"v"},"managedFields":[{}]},"status":{"st\u0061rtTime":"2026-01-01T00:00:00Z","phase":"Running"}}`,
		` { "metadata" : { "managedFields" : [ ] , "name" : "a" , "ownerReferences" : [ ] , "managedFields" : [ { } ] } , "spec" : { "ports" : [ ] } } `,
	}
	for _, in := range inputs {
		o, err := NewObject([]byte(in), "v1", "Pod")
		if err != nil {
			t.Fatalf("NewObject(%.60s): %v", in, err)
		}
		for j, name := range sectionNames {
			d := o.doc(name)
			if d.Raw == nil && d.Pieces == nil {
				continue
			}
			if d.Keys == nil {
				t.Fatalf("%.60s: %s was not walked", in, name)
			}
			for _, k := range knownMembers[j] {
				if got, want := d.Member(k), jsonscan.Member(d.Bytes(), k); !bytes.Equal(got, want) {
					t.Fatalf("%.60s: recorded %s.%s is %q, a scan finds %q", in, name, k, got, want)
				}
			}
		}
	}
}

// TestFarKnownMembersAreScanned: a known member placed beyond what an
// Object records a place for (64 KiB into its section) is found by a
// scan of the section, and one before it still by its recorded place;
// an Object's places take two bytes each, so that it fits its allocation
// class.
func TestFarKnownMembersAreScanned(t *testing.T) {
	filler := strings.Repeat("x", 70_000)
	in := `{"metadata":{"name":"a","labels":{"app":"x"},"annotations":{"big":"` + filler + `"},"ownerReferences":[{"uid":"u"}]},` +
		`"status":{"phase":"Running","conditions":[{"message":"` + filler + `"}],"startTime":"2026-01-01T00:00:00Z"},` +
		`"spec":{"nodeName":"n1","containers":[]}}`
	o, err := NewObject([]byte(in), "v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"metadata.ownerReferences": `[{"uid":"u"}]`, "metadata.labels": `{"app":"x"}`,
		"status.startTime": `"2026-01-01T00:00:00Z"`, "status.phase": `"Running"`, "spec.nodeName": `"n1"`} {
		section, member, _ := strings.Cut(name, ".")
		d := o.doc(section)
		if got := d.Member(member); string(got) != want {
			t.Errorf("%s is %q, want %q", name, got, want)
		}
	}
	if d := o.doc("spec"); d.Keys == nil {
		t.Error("spec, a short section, was not walked")
	}
	// 192 bytes, and the postings of the value indexes it is in
	// (Object.posted): an update then reads no index function again.
	if size := unsafe.Sizeof(Object{}); size > 224 {
		t.Errorf("an Object takes %d bytes, more than the 224-byte allocation class it is meant to fit", size)
	}
}

// TestObjectMetaIsAViewOfTheObject: what client-go reads through
// meta.Accessor is the object's key fields, read without allocating (it
// does so several times per object of a list), and its setters change
// nothing of an immutable object.
func TestObjectMetaIsAViewOfTheObject(t *testing.T) {
	o, err := NewObject([]byte(`{"metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"7","labels":{"x":"y"}}}`), "v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	m, err := meta.Accessor(o)
	if err != nil {
		t.Fatal(err)
	}
	if m.GetNamespace() != "ns" || m.GetName() != "a" || m.GetUID() != "u1" || m.GetResourceVersion() != "7" {
		t.Fatalf("accessor reads %s/%s %s %s", m.GetNamespace(), m.GetName(), m.GetUID(), m.GetResourceVersion())
	}
	if key, err := toolscache.MetaNamespaceKeyFunc(o); err != nil || key != o.Key() {
		t.Fatalf("client-go's key %q, %v; want %q", key, err, o.Key())
	}
	m.SetName("b")
	m.SetResourceVersion("8")
	if o.Name() != "a" || o.ResourceVersion() != "7" {
		t.Fatalf("a setter changed the cached object: %s %s", o.Name(), o.ResourceVersion())
	}
	var obj any = o
	if n := testing.AllocsPerRun(100, func() {
		if m, err := meta.Accessor(obj); err != nil || m.GetName() != "a" {
			t.Fatal("no accessor")
		}
	}); n != 0 {
		t.Fatalf("GetObjectMeta allocates %v times per call", n)
	}
}
