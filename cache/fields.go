package cache

import (
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/internal/text"
)

// Field selectors as the API server accepts them: each kind allows
// metadata.name (and metadata.namespace when namespaced) and the fields its
// conversion registers (k8s.io/kubernetes pkg/apis/*/v1 conversion.go),
// each valued as its registry strategy's ToSelectableFields values it.
// A field the conversion accepts but the strategy does not value (a pod's
// status.podIPs) reads "", as on the API server.

// fieldValue reads one selectable field from an object's JSON.
type fieldValue func(raw []byte) string

// fieldTable is what one kind allows in a field selector.
type fieldTable struct {
	fields map[string]fieldValue
	// aliases are labels the conversion renames (a pod's spec.host).
	aliases map[string]string
	// unsupported words the refusal of a label, as the kind's conversion does.
	unsupported func(label string) error
}

func str(path string) fieldValue {
	return func(raw []byte) string { return gjson.GetBytes(raw, path).String() }
}

func boolField(path string) fieldValue {
	return func(raw []byte) string { return strconv.FormatBool(gjson.GetBytes(raw, path).Bool()) }
}

func intField(path string) fieldValue {
	return func(raw []byte) string { return strconv.FormatInt(gjson.GetBytes(raw, path).Int(), 10) }
}

func none(label string) fieldValue { return func([]byte) string { return "" } }

func notSupported(label string) error {
	return fmt.Errorf("field label not supported: %s", text.Truncate(label, 128))
}

// kindFields are the kinds with a field label conversion, by group/kind.
var kindFields = map[string]fieldTable{
	"/Pod": {fields: map[string]fieldValue{
		"spec.nodeName":           str("spec.nodeName"),
		"spec.restartPolicy":      str("spec.restartPolicy"),
		"spec.schedulerName":      str("spec.schedulerName"),
		"spec.serviceAccountName": str("spec.serviceAccountName"),
		"spec.hostNetwork":        boolField("spec.hostNetwork"),
		"status.phase":            str("status.phase"),
		"status.podIP": func(raw []byte) string {
			if ip := gjson.GetBytes(raw, "status.podIPs.0.ip"); ip.Exists() {
				return ip.String()
			}
			return gjson.GetBytes(raw, "status.podIP").String()
		},
		"status.podIPs":            none("status.podIPs"),
		"status.nominatedNodeName": str("status.nominatedNodeName"),
	}, aliases: map[string]string{"spec.host": "spec.nodeName"}, unsupported: notSupported},
	"/Node":      {fields: map[string]fieldValue{"spec.unschedulable": boolField("spec.unschedulable")}, unsupported: notSupported},
	"/Namespace": {fields: map[string]fieldValue{"status.phase": str("status.phase")}, unsupported: notSupported},
	"/Secret":    {fields: map[string]fieldValue{"type": str("type")}, unsupported: notSupported},
	"/Service": {fields: map[string]fieldValue{"spec.clusterIP": str("spec.clusterIP"), "spec.type": str("spec.type")},
		unsupported: notSupported},
	"/ReplicationController": {fields: map[string]fieldValue{"status.replicas": intField("status.replicas")},
		unsupported: notSupported},
	"/Event": {fields: map[string]fieldValue{
		"involvedObject.kind":            str("involvedObject.kind"),
		"involvedObject.namespace":       str("involvedObject.namespace"),
		"involvedObject.name":            str("involvedObject.name"),
		"involvedObject.uid":             str("involvedObject.uid"),
		"involvedObject.apiVersion":      str("involvedObject.apiVersion"),
		"involvedObject.resourceVersion": str("involvedObject.resourceVersion"),
		"involvedObject.fieldPath":       str("involvedObject.fieldPath"),
		"reason":                         str("reason"),
		"reportingComponent":             str("reportingComponent"),
		"source": func(raw []byte) string {
			if c := gjson.GetBytes(raw, "source.component").String(); c != "" {
				return c
			}
			return gjson.GetBytes(raw, "reportingComponent").String()
		},
		"type": str("type"),
	}, unsupported: notSupported},
	"batch/Job": {fields: map[string]fieldValue{"status.successful": intField("status.succeeded")},
		unsupported: func(label string) error {
			return fmt.Errorf("field label %q not supported for Job", text.Truncate(label, 128))
		}},
}

// defaultFields is the table of a kind without a conversion of its own.
var defaultFields = fieldTable{unsupported: func(label string) error {
	return fmt.Errorf("%q is not a known field selector: only %q, %q", text.Truncate(label, 128), "metadata.name", "metadata.namespace")
}}

func fieldTableFor(res Resource) fieldTable {
	if t, ok := kindFields[res.Group+"/"+res.Kind]; ok {
		return t
	}
	return defaultFields
}

// FieldSelectorError is a field selector the resource does not support,
// worded as the API server words it.
type FieldSelectorError struct{ msg string }

func (e *FieldSelectorError) Error() string { return e.msg }

// Is makes a FieldSelectorError an ErrInvalid.
func (e *FieldSelectorError) Is(target error) bool { return target == ErrInvalid }

// fieldMatcher matches objects against a field selector.
type fieldMatcher struct {
	sel   fields.Selector
	table fieldTable
}

// newFieldMatcher validates sel against the resource's fields, renaming
// aliases; nil for an empty selector.
func (r *resourceCache) newFieldMatcher(sel fields.Selector) (*fieldMatcher, error) {
	if sel == nil || sel.Empty() {
		return nil, nil
	}
	t, custom := r.crdFieldTable()
	if !custom {
		t = fieldTableFor(r.res)
	}
	out, err := sel.Transform(func(label, value string) (string, string, error) {
		if a, ok := t.aliases[label]; ok {
			label = a
		}
		switch {
		case label == "metadata.name", label == "metadata.namespace" && (r.res.Namespaced || t.fields == nil):
			return label, value, nil
		case t.fields[label] != nil:
			return label, value, nil
		}
		return "", "", t.unsupported(label)
	})
	if err != nil {
		return nil, &FieldSelectorError{err.Error()}
	}
	return &fieldMatcher{sel: out, table: t}, nil
}

func (m *fieldMatcher) matches(o *Object) bool {
	return m == nil || m.sel.Matches(objectFields{o, m.table})
}

// exact returns the value a field must equal, if the selector requires one.
func (m *fieldMatcher) exact(field string) (string, bool) {
	if m == nil {
		return "", false
	}
	for _, req := range m.sel.Requirements() {
		if req.Field == field && (req.Operator == selection.Equals || req.Operator == selection.DoubleEquals) {
			return req.Value, true
		}
	}
	return "", false
}

// objectFields is an object seen as fields.Fields.
type objectFields struct {
	o *Object
	t fieldTable
}

func (f objectFields) Has(field string) bool { return true }

func (f objectFields) Get(field string) string {
	switch field {
	case "metadata.name":
		return f.o.name
	case "metadata.namespace":
		return f.o.namespace
	}
	if v := f.t.fields[field]; v != nil {
		return v(f.o.flat())
	}
	return ""
}

// indexHint picks a configured index that holds every object the field
// selector can match: a pod's spec.nodeName by a node index, status.podIP
// by a pod IP index. ok is false when none applies.
func (r *resourceCache) indexHint(m *fieldMatcher) (index, value string, ok bool) {
	hints := []struct {
		field string
		typ   indexers.Type
	}{{"spec.nodeName", indexers.NodeName}, {"status.podIP", indexers.PodIP}}
	if r.res.Group != "" || r.res.Kind != "Pod" {
		return "", "", false
	}
	for _, h := range hints {
		v, exact := m.exact(h.field)
		if !exact || v == "" {
			continue
		}
		for _, spec := range r.indexes {
			if spec.Type == h.typ {
				return spec.Name, v, true
			}
		}
	}
	return "", "", false
}
