package cache

import (
	"fmt"
	"k8s.io/apimachinery/pkg/sharding"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/internal/text"
)

// MaxSelectorTerms bounds the terms of one query's label and field
// selectors together: each requirement is a term, and a set-based one
// (in, notin) counts one per value. Every event is matched against every
// subscription's selectors, so their length is the cost a caller sets for
// the whole fan-out; the selectors people and controllers write have a
// handful of terms. The API server parses selectors of any length (only
// the request size bounds them); kubeindex refuses longer ones with 400.
const MaxSelectorTerms = 100

// selectorTerms counts the terms of a label and a field selector.
func selectorTerms(sel labels.Selector, fs fields.Selector) int {
	n := 0
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		n += max(1, r.Values().Len())
	}
	if fs != nil {
		n += len(fs.Requirements())
	}
	return n
}

// filter is a compiled selection: namespace, namespace scope, label
// selector and index value. It is the one matcher of the cache: List
// filters its candidates with it and every subscription applies it to each
// event as it is published (route).
type filter struct {
	namespace  string
	namespaces []string                    // ListQuery.Namespaces, for candidates
	scope      func(namespace string) bool // membership in namespaces; nil: all
	selector   labels.Selector             // nil: everything
	multi      bool                        // selector has several requirements
	index      string
	value      string            // normalised
	root       string            // the top-level member fn reads ("": the whole object)
	fn         indexers.DocFunc  // nil: no index
	fields     *fieldMatcher     // nil: every object
	shard      sharding.Selector // nil: every object
	// costly: the selectors have more than cheapTerms terms, so the
	// subscription's consumer filters its events, not the fan-out.
	costly bool
}

// cheapTerms is the most selector terms the fan-out matches for a
// subscription (a few hundred nanoseconds an event); beyond, up to
// MaxSelectorTerms, the subscriber's own goroutine pays for its selector.
const cheapTerms = 8

// facts are what filters read from one object, computed at most once per
// object per publish however many subscribers ask.
type facts struct {
	labels  labels.Set
	indexes map[string][]string
}

// newFilter compiles a subscription's selection: the list filters.
func (r *resourceCache) newFilter(q WatchQuery) (*filter, error) {
	f, _, err := r.compileQuery(ListQuery{Namespace: q.Namespace, Namespaces: q.Namespaces,
		LabelSelector: q.LabelSelector, Index: q.Index, Value: q.Value, Fields: q.Fields, ShardSelector: q.ShardSelector})
	return f, err
}

// compileQuery validates q and compiles its filter; tok is the continue
// token (zero for the first page).
func (r *resourceCache) compileQuery(q ListQuery) (*filter, continueToken, error) {
	var none continueToken
	if strings.ContainsRune(q.LabelSelector, 0) {
		// The selector parser stops at a NUL and ignores the rest: refuse
		// rather than answer a shorter selector than was asked.
		return nil, none, fmt.Errorf("%w: labelSelector contains a NUL character", ErrInvalid)
	}
	sel, err := labels.Parse(q.LabelSelector)
	if err != nil {
		return nil, none, fmt.Errorf("%w: labelSelector: %s", ErrInvalid, text.Truncate(err.Error(), 256))
	}
	terms := selectorTerms(sel, q.Fields)
	if terms > MaxSelectorTerms {
		return nil, none, fmt.Errorf("%w: the label and field selectors have %d terms; at most %d are allowed (each requirement is one, each value of a set one)",
			ErrInvalid, terms, MaxSelectorTerms)
	}
	if q.Limit < 0 {
		return nil, none, fmt.Errorf("%w: limit must not be negative", ErrInvalid)
	}
	if q.Namespace != "" && !r.res.Namespaced {
		return nil, none, fmt.Errorf("%w: %s is cluster-scoped: namespace does not apply", ErrInvalid, r.res.Name)
	}
	if q.Namespace != "" && len(validation.IsDNS1123Label(q.Namespace)) > 0 {
		return nil, none, fmt.Errorf("%w: namespace %q is not a valid namespace name (a DNS-1123 label)", ErrInvalid, text.Truncate(q.Namespace, 80))
	}
	if (q.Index == "") != (q.Value == "") {
		return nil, none, fmt.Errorf("%w: index and value go together", ErrInvalid)
	}
	tok, err := decodeContinue(r.res.Name, q.Continue)
	if err != nil {
		return nil, none, err
	}
	fm, err := r.newFieldMatcher(q.Fields)
	if err != nil {
		return nil, none, err
	}
	f := &filter{namespace: q.Namespace, namespaces: q.Namespaces, fields: fm, costly: terms > cheapTerms}
	if q.Namespaces != nil {
		f.scope = namespaceSet(q.Namespaces)
	}
	if !sel.Empty() {
		f.selector, f.multi = sel, manyRequirements(sel)
	}
	if q.ShardSelector != nil && !q.ShardSelector.Empty() {
		f.shard = q.ShardSelector
	}
	if q.Index != "" {
		spec, norm, err := r.indexValue(q.Index, q.Value)
		if err != nil {
			return nil, none, err
		}
		f.setIndex(spec, norm)
	}
	return f, tok, nil
}

// setIndex makes f select the objects whose index spec holds value norm.
// The index reads the member it needs (Spec.Rooted), so that an object
// held in pieces is not joined to be asked.
func (f *filter) setIndex(spec indexers.Spec, norm string) {
	f.index, f.value = spec.Name, norm
	f.root, f.fn = spec.Rooted()
}

// indexValues are o's values of f's index.
func (f *filter) indexValues(o *Object) []string { return o.indexValues(f.root, f.fn) }

// hasIndexValue reports whether o holds f's index value (true without
// an index).
func (f *filter) hasIndexValue(o *Object) bool {
	return f.fn == nil || slices.Contains(f.indexValues(o), f.value)
}

// matches reports whether o is in the selection. fa (never nil) caches
// what was read from o, for the other filters that ask about the same
// object.
func (f *filter) matches(o *Object, fa *facts) bool {
	if !f.inNamespace(o.namespace) || !f.inShard(o) {
		return false
	}
	return f.labelsMatch(o, fa) && f.indexMatches(o, fa) && f.fields.matches(o)
}

// selects is matches for an object taken from candidates, which already
// hold f's index value only; nothing is shared with other filters.
func (f *filter) selects(o *Object) bool {
	return f.inNamespace(o.namespace) && f.inShard(o) && f.labelsMatch(o, nil) && f.fields.matches(o)
}

// inShard applies the shard selector, with apimachinery's hashing
// (FNV-1a 64 of the UID or namespace, KEP-5866).
func (f *filter) inShard(o *Object) bool {
	if f.shard == nil {
		return true
	}
	ok, err := f.shard.Matches(o)
	return err == nil && ok
}

// inNamespace applies the namespace and the namespace scope.
func (f *filter) inNamespace(ns string) bool {
	return (f.namespace == "" || ns == f.namespace) && (f.scope == nil || f.scope(ns))
}

// labelsMatch applies the selector. With facts to share, all labels are
// read once for every filter; without, one requirement reads its label
// straight from the bytes, and several read all labels once per object
// instead of once per requirement, so that a long hostile selector costs a
// map lookup per requirement, not a scan of the object.
//
// The labels are read from the object's metadata, which is never held in
// pieces, so that an object whose spec is (object_chunks.go) is not
// joined to be asked.
func (f *filter) labelsMatch(o *Object, fa *facts) bool {
	switch {
	case f.selector == nil:
		return true
	case fa != nil:
		if fa.labels == nil {
			fa.labels = parseLabels(o.labels())
		}
		return f.selector.Matches(fa.labels)
	case f.multi:
		return f.selector.Matches(parseLabels(o.labels()))
	}
	return f.selector.Matches(objectLabels(o.labels()))
}

// indexMatches applies the index value, computing the index at most once
// per object across the filters sharing fa.
func (f *filter) indexMatches(o *Object, fa *facts) bool {
	if f.fn == nil {
		return true
	}
	vals, ok := fa.indexes[f.index]
	if !ok {
		vals = f.indexValues(o)
		if fa.indexes == nil {
			fa.indexes = map[string][]string{}
		}
		fa.indexes[f.index] = vals
	}
	return slices.Contains(vals, f.value)
}

// namespaceSet is a membership test for ListQuery.Namespaces; nil allows all.
func namespaceSet(namespaces []string) func(string) bool {
	if namespaces == nil {
		return func(string) bool { return true }
	}
	set := make(map[string]struct{}, len(namespaces))
	for _, ns := range namespaces {
		set[ns] = struct{}{}
	}
	return func(ns string) bool {
		_, ok := set[ns]
		return ok
	}
}

// parseLabels reads a labels object (metadata.labels' value; nil: none).
func parseLabels(labelsJSON []byte) labels.Set {
	set := labels.Set{}
	gjson.ParseBytes(labelsJSON).ForEach(func(k, v gjson.Result) bool {
		set[k.Str] = v.Str
		return true
	})
	return set
}

func manyRequirements(sel labels.Selector) bool {
	reqs, _ := sel.Requirements()
	return len(reqs) > 1
}

// objectLabels reads labels straight from a labels object's bytes
// (metadata.labels' value) for selector matching.
type objectLabels []byte

func (l objectLabels) Has(key string) bool {
	_, ok := l.Lookup(key)
	return ok
}

func (l objectLabels) Get(key string) string {
	v, _ := l.Lookup(key)
	return v
}

func (l objectLabels) Lookup(key string) (val string, found bool) {
	gjson.ParseBytes(l).ForEach(func(k, v gjson.Result) bool {
		if k.Str == key {
			val, found = v.Str, true
			return false
		}
		return true
	})
	return val, found
}
