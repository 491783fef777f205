package cache

import (
	"bytes"
	"errors"
	"strings"

	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Object is one cached Kubernetes object: its JSON bytes, with
// metadata.managedFields removed and apiVersion/kind always present, plus
// the few metadata fields the cache needs for keys. An Object is immutable
// once built: readers may hand Raw() straight to a response writer, and
// every reader shares the same bytes.
type Object struct {
	raw             []byte
	namespace, name string
	resourceVersion string
	uid             string
}

// Raw returns the object's JSON. The caller must not modify it.
func (o *Object) Raw() []byte { return o.raw }

// Namespace returns metadata.namespace ("" for cluster-scoped objects).
func (o *Object) Namespace() string { return o.namespace }

// Name returns metadata.name.
func (o *Object) Name() string { return o.name }

// ResourceVersion returns metadata.resourceVersion.
func (o *Object) ResourceVersion() string { return o.resourceVersion }

// UID returns metadata.uid.
func (o *Object) UID() string { return o.uid }

// Key returns the cache key: "namespace/name", or "name" when cluster-scoped.
func (o *Object) Key() string {
	if o.namespace == "" {
		return o.name
	}
	return o.namespace + "/" + o.name
}

// GetObjectKind implements runtime.Object. The kind lives in the bytes.
func (o *Object) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object. Objects are immutable, so the
// copy is the object itself.
func (o *Object) DeepCopyObject() runtime.Object { return o }

// GetObjectMeta implements metav1.ObjectMetaAccessor, which is how client-go
// computes keys and reads resource versions. It allocates a small ObjectMeta
// per call instead of keeping one per object.
func (o *Object) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{
		Namespace:       o.namespace,
		Name:            o.name,
		ResourceVersion: o.resourceVersion,
		UID:             types.UID(o.uid),
	}
}

var errNotObject = errors.New("not a JSON object with metadata.name")

// NewObject builds an Object from JSON as the API server sends it. It copies:
// the result never shares memory with raw. apiVersion and kind are added when
// missing (typed list responses omit them on items), so that a GET answers
// what the API server's GET answers.
func NewObject(raw []byte, apiVersion, kind string) (*Object, error) {
	return Shape{APIVersion: apiVersion, Kind: kind}.Build(raw)
}

// Shape is how objects of one resource enter the cache: the apiVersion and
// kind to add where the API server omitted them, and the fields to drop
// besides managedFields (redacted fields never reach memory that outlives
// the decode).
type Shape struct {
	APIVersion, Kind string
	// Drop lists gjson paths of plain keys (dots in keys escaped as \.).
	Drop []string
}

// Build turns API-server JSON into an immutable Object; see NewObject.
func (s Shape) Build(raw []byte) (*Object, error) {
	apiVersion, kind := s.APIVersion, s.Kind
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '{' {
		return nil, errNotObject
	}
	meta := gjson.GetManyBytes(raw, "metadata.namespace", "metadata.name",
		"metadata.resourceVersion", "metadata.uid")
	if meta[1].Str == "" {
		return nil, errNotObject
	}
	o := &Object{
		namespace:       strings.Clone(meta[0].Str),
		name:            strings.Clone(meta[1].Str),
		resourceVersion: strings.Clone(meta[2].Str),
		uid:             strings.Clone(meta[3].Str),
	}
	hasKind, hasAPIVersion := topLevelKinds(raw)
	var prefix []byte
	if !hasKind && kind != "" {
		prefix = append(prefix, `"kind":`...)
		prefix = gjson.AppendJSONString(prefix, kind)
		prefix = append(prefix, ',')
	}
	if !hasAPIVersion && apiVersion != "" {
		prefix = append(prefix, `"apiVersion":`...)
		prefix = gjson.AppendJSONString(prefix, apiVersion)
		prefix = append(prefix, ',')
	}
	o.raw = stripManagedFields(raw, prefix)
	for _, path := range s.Drop {
		var err error
		if o.raw, err = removePath(o.raw, path); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// topLevelKinds reports whether raw has the keys kind and apiVersion. It
// walks the object once, stopping when both are found: list items lack
// both, and looking them up one at a time would walk every item twice.
func topLevelKinds(raw []byte) (kind, apiVersion bool) {
	gjson.ParseBytes(raw).ForEach(func(k, _ gjson.Result) bool {
		switch k.Str {
		case "kind":
			kind = true
		case "apiVersion":
			apiVersion = true
		}
		return !kind || !apiVersion
	})
	return kind, apiVersion
}

// stripManagedFields returns a fresh copy of raw with prefix inserted right
// after the opening brace and metadata.managedFields cut out. The cut is done
// on the bytes, locating the key in front of the value gjson found; anything
// unexpected there leaves the object whole rather than risk corrupting it.
func stripManagedFields(raw, prefix []byte) []byte {
	cutFrom, cutTo := managedFieldsSpan(raw)
	out := make([]byte, 0, len(raw)+len(prefix)-(cutTo-cutFrom))
	out = append(out, '{')
	out = append(out, prefix...)
	out = append(out, raw[1:cutFrom]...)
	out = append(out, raw[cutTo:]...)
	return out
}

// managedFieldsSpan returns the byte range to delete, including one adjacent
// comma, or an empty range at 1 when there is nothing (safe) to delete.
func managedFieldsSpan(raw []byte) (from, to int) {
	r := gjson.GetBytes(raw, "metadata.managedFields")
	if from, to, ok := keySpan(raw, r, "managedFields"); ok {
		return from, to
	}
	return 1, 1
}

func skipSpaceBack(b []byte, i int) int {
	for i >= 0 && isSpace(b[i]) {
		i--
	}
	return i
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }
