package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// The diffs are pure functions over decoded JSON. They run at most once per
// event and diff kind, not per subscriber, so decoding is affordable here.

// decodeJSON decodes one JSON value, keeping numbers as written.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

// mergePatch returns the JSON merge patch (RFC 7386) that turns old into
// cur. ok is false when no merge patch can: a merge patch reads null as
// "remove", so it cannot set a member to null.
func mergePatch(old, cur any) (patch any, ok bool) {
	o, okOld := old.(map[string]any)
	c, okCur := cur.(map[string]any)
	if !okOld || !okCur {
		return cur, !nullMember(cur)
	}
	p := map[string]any{}
	for k := range o {
		if _, kept := c[k]; !kept {
			p[k] = nil
		}
	}
	for k, cv := range c {
		ov, had := o[k]
		if had && reflect.DeepEqual(ov, cv) {
			continue
		}
		_, oIsObj := ov.(map[string]any)
		_, cIsObj := cv.(map[string]any)
		if had && oIsObj && cIsObj {
			sub, ok := mergePatch(ov, cv)
			if !ok {
				return nil, false
			}
			p[k] = sub
			continue
		}
		if cv == nil || nullMember(cv) {
			return nil, false
		}
		p[k] = cv
	}
	return p, true
}

// nullMember reports whether an object inside v (not inside an array, which
// a merge patch copies verbatim) has a null member.
func nullMember(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for _, mv := range m {
		if mv == nil || nullMember(mv) {
			return true
		}
	}
	return false
}

// patchOp is one JSON Patch (RFC 6902) operation. Value is a pointer so
// that a null value is written while remove has none.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value *any   `json:"value,omitempty"`
}

// jsonPatch appends to ops the JSON Patch operations that turn old into cur
// at path: objects member by member, arrays element by element with
// removals from the end and additions at the end, anything else replaced.
func jsonPatch(ops []patchOp, path string, old, cur any) []patchOp {
	if reflect.DeepEqual(old, cur) {
		return ops
	}
	switch o := old.(type) {
	case map[string]any:
		if c, ok := cur.(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(o)) {
				if _, kept := c[k]; !kept {
					ops = append(ops, patchOp{Op: "remove", Path: path + "/" + escapePointer(k)})
				}
			}
			for _, k := range slices.Sorted(maps.Keys(c)) {
				p := path + "/" + escapePointer(k)
				if ov, had := o[k]; had {
					ops = jsonPatch(ops, p, ov, c[k])
				} else {
					ops = append(ops, valueOp("add", p, c[k]))
				}
			}
			return ops
		}
	case []any:
		if c, ok := cur.([]any); ok {
			n := min(len(o), len(c))
			for i := range n {
				ops = jsonPatch(ops, path+"/"+strconv.Itoa(i), o[i], c[i])
			}
			for i := len(o) - 1; i >= n; i-- {
				ops = append(ops, patchOp{Op: "remove", Path: path + "/" + strconv.Itoa(i)})
			}
			for i := n; i < len(c); i++ {
				ops = append(ops, valueOp("add", path+"/"+strconv.Itoa(i), c[i]))
			}
			return ops
		}
	}
	return append(ops, valueOp("replace", path, cur))
}

func valueOp(op, path string, v any) patchOp { return patchOp{Op: op, Path: path, Value: &v} }

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escapePointer escapes a member name for a JSON Pointer (RFC 6901).
func escapePointer(s string) string { return pointerEscaper.Replace(s) }
