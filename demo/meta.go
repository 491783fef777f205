package demo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// SimulatedAnnotation marks every generated object as simulated.
const SimulatedAnnotation = "kubeindex.dev/simulated"

// nameAlphabet is the alphabet Kubernetes uses for generated name suffixes
// and pod-template hashes (no vowels, no look-alike characters).
const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// timestamp is the current time as metav1.Time encodes it. c.mu must be held.
func (c *Cluster) timestamp() string { return c.opts.Now().UTC().Format(time.RFC3339) }

// newUID returns a random (seeded) version-4 UUID. c.mu must be held.
func (c *Cluster) newUID() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(c.rng.UintN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// suffix returns n random name characters. c.mu must be held.
func (c *Cluster) suffix(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = nameAlphabet[c.rng.IntN(len(nameAlphabet))]
	}
	return string(b)
}

// hexString returns n random hex digits (container IDs, image digests).
func (c *Cluster) hexString(n int) string {
	const hex = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = hex[c.rng.IntN(16)]
	}
	return string(b)
}

// objectMeta builds generated metadata: a new uid, the creation time and
// the simulated annotation.
func (c *Cluster) objectMeta(namespace, name string, labels, annotations map[string]any) map[string]any {
	md := map[string]any{
		"name":              name,
		"uid":               c.newUID(),
		"creationTimestamp": c.timestamp(),
	}
	if namespace != "" {
		md["namespace"] = namespace
	}
	if len(labels) > 0 {
		md["labels"] = labels
	}
	ann := map[string]any{SimulatedAnnotation: "true"}
	for k, v := range annotations {
		ann[k] = v
	}
	md["annotations"] = ann
	return md
}

func ownerRef(apiVersion, kind, name, uid string, controller bool) map[string]any {
	return map[string]any{
		"apiVersion": apiVersion, "kind": kind, "name": name, "uid": uid,
		"controller": controller, "blockOwnerDeletion": true,
	}
}

// fieldManager says which top-level parts of an object a manager owns.
type fieldManager struct {
	manager, operation, subresource, apiVersion string
	owns                                        []string // top-level keys: metadata, spec, status
}

// managedFields builds realistic metadata.managedFields for m: one entry
// per manager, with a fieldsV1 set derived from what m holds. m holds only
// map[string]any, []any and scalars.
func managedFields(m map[string]any, ts string, managers ...fieldManager) []any {
	var out []any
	for _, fm := range managers {
		set := map[string]any{}
		for _, top := range fm.owns {
			v, ok := m[top]
			if !ok {
				continue
			}
			if top == "metadata" {
				v = ownedMetadata(v.(map[string]any))
			}
			set["f:"+top] = fieldSet(v, 4)
		}
		e := map[string]any{
			"manager": fm.manager, "operation": fm.operation, "apiVersion": fm.apiVersion,
			"time": ts, "fieldsType": "FieldsV1", "fieldsV1": set,
		}
		if fm.subresource != "" {
			e["subresource"] = fm.subresource
		}
		out = append(out, e)
	}
	return out
}

// ownedMetadata keeps the metadata fields a client sets.
func ownedMetadata(md map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"labels", "annotations", "ownerReferences", "generateName", "finalizers"} {
		if v, ok := md[k]; ok {
			out[k] = v
		}
	}
	return out
}

// fieldSet renders v in the FieldsV1 form: "f:" for map keys, "k:" for
// list items keyed by uid, name or type, "." for a list item itself.
func fieldSet(v any, depth int) map[string]any {
	out := map[string]any{}
	if depth == 0 {
		return out
	}
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			out["f:"+k] = fieldSet(x, depth-1)
		}
	case []any:
		for _, item := range v {
			im, ok := item.(map[string]any)
			if !ok {
				continue
			}
			for _, k := range []string{"uid", "name", "type"} {
				if id, ok := im[k].(string); ok {
					sub := fieldSet(im, depth-1)
					sub["."] = map[string]any{}
					out[fmt.Sprintf(`k:{%q:%q}`, k, id)] = sub
					break
				}
			}
		}
	}
	return out
}

// clone deep-copies a JSON value (maps, slices, strings, numbers, bools)
// by a JSON round trip, which also turns typed maps into map[string]any.
func clone(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("demo: clone: %v", err))
	}
	var out any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		panic(fmt.Sprintf("demo: clone: %v", err))
	}
	return out
}

// nested returns the map at path in m, creating missing maps.
func nested(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	return m
}
