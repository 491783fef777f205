package cache

import (
	"encoding/json"
	"reflect"
	"testing"
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
