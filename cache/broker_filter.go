package cache

import (
	"slices"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubeindex/kubeindex/indexers"
)

// filter is a subscription's selection: the list filters, applied to each
// event as it is published.
type filter struct {
	namespace string
	scope     func(namespace string) bool // WatchQuery.Namespaces; nil: all
	selector  labels.Selector             // nil: everything
	index     string
	value     string // normalised
	fn        indexers.Func
	fields    *fieldMatcher // nil: every object
}

// facts are what filters read from one object, computed at most once per
// object per publish however many subscribers ask.
type facts struct {
	labels  labels.Set
	indexes map[string][]string
}

func (r *resourceCache) newFilter(q WatchQuery) (*filter, error) {
	sel, _, err := r.parseQuery(ListQuery{Namespace: q.Namespace, LabelSelector: q.LabelSelector, Index: q.Index, Value: q.Value})
	if err != nil {
		return nil, err
	}
	fm, err := r.newFieldMatcher(q.Fields)
	if err != nil {
		return nil, err
	}
	f := &filter{namespace: q.Namespace, fields: fm}
	if q.Namespaces != nil {
		f.scope = namespaceSet(q.Namespaces)
	}
	if !sel.Empty() {
		f.selector = sel
	}
	if q.Index != "" {
		spec, norm, err := r.indexValue(q.Index, q.Value)
		if err != nil {
			return nil, err
		}
		f.index, f.value, f.fn = spec.Name, norm, spec.Func()
	}
	return f, nil
}

// matches reports whether o passes the filter. fa caches what was read.
func (f *filter) matches(o *Object, fa *facts) bool {
	if !f.inNamespace(o.namespace) {
		return false
	}
	if f.selector != nil {
		if fa.labels == nil {
			fa.labels = parseLabels(o.raw)
		}
		if !f.selector.Matches(fa.labels) {
			return false
		}
	}
	if f.fn != nil {
		vals, ok := fa.indexes[f.index]
		if !ok {
			vals = f.fn(o.raw)
			if fa.indexes == nil {
				fa.indexes = map[string][]string{}
			}
			fa.indexes[f.index] = vals
		}
		if !slices.Contains(vals, f.value) {
			return false
		}
	}
	return f.fields.matches(o)
}

// route says how ev looks through the filter. An object entering the
// selection (a label added, a pod scheduled onto the watched node) is
// ADDED, one leaving it is DELETED, so that a client applying the events
// holds exactly the matching objects. fc caches facts of ev's objects
// (0: the current one, 1: the previous one) across subscribers.
func (f *filter) route(ev *event, fc *[2]*facts) (EventType, bool) {
	in := func(i int, o *Object) bool {
		if f.selector == nil && f.fn == nil && f.fields == nil {
			return f.inNamespace(o.namespace)
		}
		if fc[i] == nil {
			fc[i] = &facts{}
		}
		return f.matches(o, fc[i])
	}
	switch ev.typ {
	case Added:
		return Added, in(0, ev.obj)
	case Deleted:
		return Deleted, in(1, ev.old) // the client holds it if its last state matched
	}
	was, is := in(1, ev.old), in(0, ev.obj)
	switch {
	case was && is:
		return Modified, true
	case is:
		return Added, true
	case was:
		return Deleted, true
	}
	return "", false
}

// inNamespace applies the namespace and the namespace scope.
func (f *filter) inNamespace(ns string) bool {
	return (f.namespace == "" || ns == f.namespace) && (f.scope == nil || f.scope(ns))
}

func parseLabels(raw []byte) labels.Set {
	set := labels.Set{}
	gjson.GetBytes(raw, "metadata.labels").ForEach(func(k, v gjson.Result) bool {
		set[k.Str] = v.Str
		return true
	})
	return set
}
