package cache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// applyMergePatch is RFC 7386 section 2, for checking mergePatch.
func applyMergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	} else {
		t = shallowCopy(t)
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = applyMergePatch(t[k], v)
		}
	}
	return t
}

func shallowCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// applyJSONPatch applies add, remove and replace (RFC 6902) with JSON
// Pointers (RFC 6901), for checking jsonPatch.
func applyJSONPatch(doc any, ops []patchOp) (any, error) {
	for _, op := range ops {
		var v any
		if op.Value != nil {
			v = *op.Value
		}
		var err error
		if doc, err = applyOp(doc, op.Op, splitPointer(op.Path), v); err != nil {
			return nil, fmt.Errorf("%s %s: %w", op.Op, op.Path, err)
		}
	}
	return doc, nil
}

func splitPointer(p string) []string {
	if p == "" {
		return nil
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		parts[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(s)
	}
	return parts
}

func applyOp(doc any, op string, path []string, v any) (any, error) {
	if len(path) == 0 {
		if op == "remove" {
			return nil, fmt.Errorf("remove of the root")
		}
		return v, nil
	}
	switch d := doc.(type) {
	case map[string]any:
		d = shallowCopy(d)
		k := path[0]
		if len(path) > 1 {
			child, ok := d[k]
			if !ok {
				return nil, fmt.Errorf("no member %q", k)
			}
			nv, err := applyOp(child, op, path[1:], v)
			d[k] = nv
			return d, err
		}
		_, exists := d[k]
		switch op {
		case "add":
			d[k] = v
		case "replace":
			if !exists {
				return nil, fmt.Errorf("replace of absent %q", k)
			}
			d[k] = v
		case "remove":
			if !exists {
				return nil, fmt.Errorf("remove of absent %q", k)
			}
			delete(d, k)
		}
		return d, nil
	case []any:
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i > len(d) || (i == len(d) && (op != "add" || len(path) > 1)) {
			return nil, fmt.Errorf("bad index %q of %d", path[0], len(d))
		}
		d = append([]any(nil), d...)
		if len(path) > 1 {
			nv, err := applyOp(d[i], op, path[1:], v)
			d[i] = nv
			return d, err
		}
		switch op {
		case "add":
			return append(d[:i], append([]any{v}, d[i:]...)...), nil
		case "replace":
			d[i] = v
		case "remove":
			return append(d[:i], d[i+1:]...), nil
		}
		return d, nil
	}
	return nil, fmt.Errorf("path into a scalar")
}

func TestDiffs(t *testing.T) {
	tests := []struct {
		name, old, cur  string
		merge, jsonpath string // expected encodings; merge "" = inexpressible
	}{
		{"unchanged", `{"a":1}`, `{"a":1}`, `{}`, `[]`},
		{"member changed", `{"a":1,"b":{"c":"x"}}`, `{"a":1,"b":{"c":"y"}}`,
			`{"b":{"c":"y"}}`, `[{"op":"replace","path":"/b/c","value":"y"}]`},
		{"member removed and added", `{"a":1}`, `{"b":2}`,
			`{"a":null,"b":2}`, `[{"op":"remove","path":"/a"},{"op":"add","path":"/b","value":2}]`},
		{"array grows", `{"l":[1,2]}`, `{"l":[1,2,3]}`,
			`{"l":[1,2,3]}`, `[{"op":"add","path":"/l/2","value":3}]`},
		{"array shrinks", `{"l":[1,2,3,4]}`, `{"l":[9]}`,
			`{"l":[9]}`, `[{"op":"replace","path":"/l/0","value":9},{"op":"remove","path":"/l/3"},{"op":"remove","path":"/l/2"},{"op":"remove","path":"/l/1"}]`},
		{"escaped names", `{"a/b":{"c~d":1}}`, `{"a/b":{"c~d":2}}`,
			`{"a/b":{"c~d":2}}`, `[{"op":"replace","path":"/a~1b/c~0d","value":2}]`},
		{"set to null", `{"a":1}`, `{"a":null}`, ``, `[{"op":"replace","path":"/a","value":null}]`},
		{"big numbers kept", `{"n":1}`, `{"n":12345678901234567890}`,
			`{"n":12345678901234567890}`, `[{"op":"replace","path":"/n","value":12345678901234567890}]`},
		{"html kept", `{"s":"a"}`, `{"s":"<&>"}`, `{"s":"<&>"}`, `[{"op":"replace","path":"/s","value":"<&>"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(computePatch([]byte(tt.old), []byte(tt.cur), MergePatch))
			if got != tt.merge {
				t.Errorf("merge patch %s; expect %s", got, tt.merge)
			}
			got = string(computePatch([]byte(tt.old), []byte(tt.cur), JSONPatch))
			if got != tt.jsonpath {
				t.Errorf("json patch %s; expect %s", got, tt.jsonpath)
			}
			checkDiffRoundTrip(t, []byte(tt.old), []byte(tt.cur))
		})
	}
}

// checkDiffRoundTrip: applying a diff to old gives cur.
func checkDiffRoundTrip(t *testing.T, oldRaw, curRaw []byte) {
	t.Helper()
	old, errA := decodeJSON(oldRaw)
	cur, errB := decodeJSON(curRaw)
	if errA != nil || errB != nil {
		return
	}
	ops := jsonPatch(nil, "", old, cur)
	// Encode and decode, as a client would receive them.
	enc, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	var wire []patchOp
	dec := json.NewDecoder(bytes.NewReader(enc))
	dec.UseNumber()
	if err := dec.Decode(&wire); err != nil {
		t.Fatal(err)
	}
	for i := range wire {
		if ops[i].Value != nil && wire[i].Value == nil { // a null value decodes to a nil pointer
			var null any
			wire[i].Value = &null
		}
	}
	got, err := applyJSONPatch(old, wire)
	if err != nil {
		t.Fatalf("json patch %s does not apply to %s: %v", enc, oldRaw, err)
	}
	if !reflect.DeepEqual(got, cur) {
		t.Fatalf("json patch %s turns %s into %v, not %s", enc, oldRaw, got, curRaw)
	}
	if mp, ok := mergePatch(old, cur); ok {
		if got := applyMergePatch(old, mp); !reflect.DeepEqual(got, cur) {
			t.Fatalf("merge patch %v turns %s into %v, not %s", mp, oldRaw, got, curRaw)
		}
	}
}

func FuzzDiffs(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":[1,{"c":2}]}`), []byte(`{"a":2,"b":[{"c":3}],"d":null}`))
	f.Add([]byte(`[1,2,3]`), []byte(`{"x":[]}`))
	f.Add([]byte(`{"a/b~":{"":1}}`), []byte(`{"a/b~":{"":[null]}}`))
	f.Add([]byte(`"s"`), []byte(`null`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		checkDiffRoundTrip(t, a, b)
	})
}
