package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeindex/kubeindex/demo/internal/ids"
)

// now is the current time, as objects carry it (whole seconds).
func (s *Scenario) now() metav1.Time { return metav1.NewTime(s.opts.Now().UTC().Truncate(1e9)) }

// newUID returns a seeded random UUID. s.mu must be held.
func (s *Scenario) newUID() string { return ids.UID(s.rng) }

// suffix returns n seeded random name characters. s.mu must be held.
func (s *Scenario) suffix(n int) string { return ids.Suffix(s.rng, n) }

// hexString returns n random hex digits (container IDs, image digests).
func (s *Scenario) hexString(n int) string {
	const hex = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = hex[s.rng.IntN(16)]
	}
	return string(b)
}

// objectMeta builds generated metadata: a new uid, the creation time and
// the simulated annotation besides annotations.
func (s *Scenario) objectMeta(namespace, name string, labels, annotations map[string]string) metav1.ObjectMeta {
	md := metav1.ObjectMeta{Name: name, Namespace: namespace, UID: uidOf(s.newUID()), CreationTimestamp: s.now()}
	if len(labels) > 0 {
		md.Labels = labels
	}
	md.Annotations = map[string]string{SimulatedAnnotation: "true"}
	maps.Copy(md.Annotations, annotations)
	return md
}

func ownerRef(apiVersion, kind, name, uid string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uidOf(uid),
		Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}
}

// fieldManager says which top-level parts of an object a manager owns.
type fieldManager struct {
	manager     string
	operation   metav1.ManagedFieldsOperationType
	subresource string
	apiVersion  string
	owns        []string // top-level keys: metadata, spec, status
}

// managedFields builds realistic metadata.managedFields for obj: one entry
// per manager, with a fieldsV1 set derived from the fields obj's JSON
// holds.
func managedFields(obj any, ts metav1.Time, managers ...fieldManager) []metav1.ManagedFieldsEntry {
	m := jsonMap(obj)
	var out []metav1.ManagedFieldsEntry
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
		raw, _ := json.Marshal(set)
		out = append(out, metav1.ManagedFieldsEntry{
			Manager: fm.manager, Operation: fm.operation, APIVersion: fm.apiVersion, Time: &ts,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw}, Subresource: fm.subresource,
		})
	}
	return out
}

// jsonMap returns obj's JSON as maps, slices and scalars.
func jsonMap(obj any) map[string]any {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(storeError{fmt.Errorf("scenario: encoding %T: %w", obj, err)})
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	_ = dec.Decode(&m)
	return m
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

func uidOf(s string) types.UID { return types.UID(s) }

func ptrTo[T any](v T) *T { return &v }
