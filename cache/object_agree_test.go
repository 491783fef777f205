package cache

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// The byte splicing's invariant (ARCHITECTURE.md): the stored object is
// the API server's object, as encoding/json reads it, less
// metadata.managedFields, with kind and apiVersion added only where they
// were missing; and the key fields are encoding/json's.
func checkBuildAgreesWithDecode(t *testing.T, in []byte) {
	t.Helper()
	o, err := NewObject(in, "v1", "Pod")
	if err != nil {
		t.Fatalf("NewObject(%.80s): %v", in, err)
	}
	decode := func(b []byte) map[string]any {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("decoding %.80s: %v", b, err)
		}
		return m
	}
	want := decode(in)
	md, _ := want["metadata"].(map[string]any)
	delete(md, "managedFields")
	for k, v := range map[string]string{"kind": "Pod", "apiVersion": "v1"} {
		if _, ok := want[k]; !ok {
			want[k] = v
		}
	}
	if got := decode(o.Raw()); !reflect.DeepEqual(got, want) {
		t.Fatalf("stored object differs from the decoded input less managedFields:\n got %.300s", o.Raw())
	}
	for name, got := range map[string]string{"name": o.Name(), "namespace": o.Namespace(), "resourceVersion": o.ResourceVersion(), "uid": o.UID()} {
		if w, _ := md[name].(string); got != w {
			t.Errorf("%s: %q; encoding/json reads %q", name, got, w)
		}
	}
}

func TestBuildAgreesWithDecode(t *testing.T) {
	pod, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		t.Fatal(err)
	}
	checkBuildAgreesWithDecode(t, pod)
	for _, in := range []string{
		`{"metadata":{"managedFields":[{"a":1}],"name":"a"}}`,
		`{"metadata":{"name":"a","managedFields":[]}}`,
		`{"metadata":{"name":"a","managedFields":null,"namespace":"n","uid":"u"}}`,
		` { "kind" : "Pod" , "metadata" : { "name" : "a\u00e9" , "managedFields" : [ ] , "resourceVersion" : "7" } , "spec" : { } } `,
		`{"apiVersion":"v2","metadata":{"namespace":"n","managedFields":[{"x":[1,2]}],"name":"b"},"status":{"podIP":"10.0.0.1"}}`,
	} {
		checkBuildAgreesWithDecode(t, []byte(in))
	}
}
