package cache

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ListQuery filters and pages a list. The zero value lists everything.
type ListQuery struct {
	Namespace string
	// Namespaces, when not nil, restricts the answer to objects in these
	// namespaces (an empty, non-nil slice: to nothing), on top of Namespace.
	// It is how the HTTP layer confines a caller to where it may read.
	Namespaces    []string
	LabelSelector string
	// Index and Value select objects by a configured index.
	Index, Value string
	// Limit caps the page size; 0 means no limit.
	Limit int
	// Continue is the token a previous page returned.
	Continue string
	// Fields is a field selector, as the API server accepts it for the
	// kind (a *FieldSelectorError otherwise); nil selects everything.
	Fields fields.Selector
}

// ListResult is one page of a list, ordered by namespace/name.
type ListResult struct {
	Resource  Resource
	Items     []*Object
	Continue  string
	Remaining int
	Freshness Freshness
}

// Get returns one object. namespace is "" for cluster-scoped resources.
func (c *Cache) Get(resource, namespace, name string) (*Object, Freshness, error) {
	r, err := c.resource(resource)
	if err != nil {
		return nil, Freshness{}, err
	}
	st := r.freshness()
	if !st.Synced {
		return nil, st, fmt.Errorf("%s: %w", r.res.Name, ErrNotSynced)
	}
	if r.res.Namespaced != (namespace != "") {
		if r.res.Namespaced {
			return nil, st, fmt.Errorf("%w: %s is namespaced: ask for /%s/{namespace}/{name}", ErrInvalid, r.res.Name, r.res.Name)
		}
		return nil, st, fmt.Errorf("%w: %s is cluster-scoped: ask for /%s/{name}", ErrInvalid, r.res.Name, r.res.Name)
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	for _, sh := range r.shardsFor(namespace) {
		if item, ok, _ := sh.informer.GetIndexer().GetByKey(key); ok {
			return item.(*Object), st, nil
		}
	}
	return nil, st, fmt.Errorf("%s %q: %w", r.res.Kind, key, ErrNotFound)
}

// List returns the objects matching q, sorted by key, one page at a time.
//
// Pages are taken from the live cache: a continue token resumes after the
// last key returned, so objects created or deleted between pages may be
// missed or appear; within a page the view is consistent.
func (c *Cache) List(resource string, q ListQuery) (ListResult, error) {
	r, err := c.resource(resource)
	if err != nil {
		return ListResult{}, err
	}
	res := ListResult{Resource: r.res, Freshness: r.freshness()}
	sel, after, err := r.parseQuery(q)
	if err != nil {
		return res, err
	}
	fm, err := r.newFieldMatcher(q.Fields)
	if err != nil {
		return res, err
	}
	if !res.Freshness.Synced {
		return res, fmt.Errorf("%s: %w", r.res.Name, ErrNotSynced)
	}
	if q.Index == "" && fm != nil {
		if index, value, ok := r.indexHint(fm); ok {
			if _, _, err := r.indexValue(index, value); err != nil {
				return res, nil // no object can hold a value the index cannot
			}
			q.Index, q.Value = index, value
		}
	}
	items, err := r.candidates(q)
	if err != nil {
		return res, err
	}
	inScope := namespaceSet(q.Namespaces)
	multi := manyRequirements(sel)
	items = slices.DeleteFunc(items, func(o *Object) bool {
		return (q.Namespace != "" && o.namespace != q.Namespace) || !inScope(o.namespace) ||
			!matchLabels(sel, multi, o.raw) || !fm.matches(o)
	})
	slices.SortFunc(items, func(a, b *Object) int { return strings.Compare(a.Key(), b.Key()) })
	if after != "" {
		start := sort.Search(len(items), func(i int) bool { return items[i].Key() > after })
		items = items[start:]
	}
	if q.Limit > 0 && len(items) > q.Limit {
		res.Remaining = len(items) - q.Limit
		items = items[:q.Limit]
		res.Continue = encodeContinue(r.res.Name, items[len(items)-1].Key())
	}
	res.Items = items
	return res, nil
}

func (r *resourceCache) parseQuery(q ListQuery) (labels.Selector, string, error) {
	if strings.ContainsRune(q.LabelSelector, 0) {
		// The selector parser stops at a NUL and ignores the rest: refuse
		// rather than answer a shorter selector than was asked.
		return nil, "", fmt.Errorf("%w: labelSelector contains a NUL character", ErrInvalid)
	}
	sel, err := labels.Parse(q.LabelSelector)
	if err != nil {
		return nil, "", fmt.Errorf("%w: labelSelector: %v", ErrInvalid, err)
	}
	if q.Limit < 0 {
		return nil, "", fmt.Errorf("%w: limit must not be negative", ErrInvalid)
	}
	if q.Namespace != "" && !r.res.Namespaced {
		return nil, "", fmt.Errorf("%w: %s is cluster-scoped: namespace does not apply", ErrInvalid, r.res.Name)
	}
	if q.Namespace != "" && len(validation.IsDNS1123Label(q.Namespace)) > 0 {
		return nil, "", fmt.Errorf("%w: namespace %q is not a valid namespace name (a DNS-1123 label)", ErrInvalid, truncateName(q.Namespace))
	}
	if (q.Index == "") != (q.Value == "") {
		return nil, "", fmt.Errorf("%w: index and value go together", ErrInvalid)
	}
	var after string
	if q.Continue != "" {
		if after, err = decodeContinue(r.res.Name, q.Continue); err != nil {
			return nil, "", err
		}
	}
	return sel, after, nil
}

// truncateName keeps an echoed name short: a hostile one may be megabytes.
func truncateName(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// candidates narrows the objects by index or namespace before filtering.
func (r *resourceCache) candidates(q ListQuery) ([]*Object, error) {
	if q.Index == "" && q.Namespace == "" && q.Namespaces != nil {
		return r.inNamespaces(q.Namespaces), nil
	}
	index, value := nsIndex, q.Namespace
	if q.Index != "" {
		spec, norm, err := r.indexValue(q.Index, q.Value)
		if err != nil {
			return nil, err
		}
		index, value = spec.Name, norm
	}
	var out []*Object
	for _, sh := range r.shardsFor(q.Namespace) {
		var items []any
		if value == "" && index == nsIndex {
			items = sh.informer.GetIndexer().List()
		} else {
			items, _ = sh.informer.GetIndexer().ByIndex(index, value)
		}
		for _, it := range items {
			out = append(out, it.(*Object))
		}
	}
	return out, nil
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

// inNamespaces gathers the objects of the given namespaces through the
// namespace index, without visiting the others.
func (r *resourceCache) inNamespaces(namespaces []string) []*Object {
	var out []*Object
	for _, ns := range slices.Compact(slices.Sorted(slices.Values(namespaces))) {
		for _, sh := range r.shardsFor(ns) {
			items, _ := sh.informer.GetIndexer().ByIndex(nsIndex, ns)
			for _, it := range items {
				out = append(out, it.(*Object))
			}
		}
	}
	return out
}

func (r *resourceCache) index(name string) (indexers.Spec, error) {
	spec, ok := r.indexes[name]
	if !ok {
		names := make([]string, 0, len(r.indexes))
		for n := range r.indexes {
			names = append(names, n)
		}
		slices.Sort(names)
		return indexers.Spec{}, fmt.Errorf("%w: %s has no index %q (indexes: %s)", ErrUnknownIndex, r.res.Name, name, strings.Join(names, ", "))
	}
	return spec, nil
}

// indexValue resolves an index by name and puts a queried value into the
// form the index stores (an IP in canonical spelling).
func (r *resourceCache) indexValue(index, value string) (indexers.Spec, string, error) {
	spec, err := r.index(index)
	if err != nil {
		return spec, "", err
	}
	norm, ok := spec.NormalizeValue(value)
	if !ok {
		return spec, "", fmt.Errorf("%w: %q is not a valid value for index %s (%s)", ErrInvalid, value, spec.Name, spec.Type)
	}
	return spec, norm, nil
}

// shardsFor returns the informers that can hold objects of the namespace.
func (r *resourceCache) shardsFor(namespace string) []*shard {
	if namespace == "" || len(r.shards) == 1 && r.shards[0].namespace == "" {
		return r.shards
	}
	for _, sh := range r.shards {
		if sh.namespace == namespace {
			return []*shard{sh}
		}
	}
	return nil
}

// matchLabels matches an object against sel. One requirement reads the
// label straight from the bytes; several (multi) read all labels once per
// object instead of once per requirement, so that a long hostile selector
// costs a map lookup per requirement, not a scan of the object.
func matchLabels(sel labels.Selector, multi bool, raw []byte) bool {
	if multi {
		return sel.Matches(parseLabels(raw))
	}
	return sel.Matches(objectLabels(raw))
}

func manyRequirements(sel labels.Selector) bool {
	reqs, _ := sel.Requirements()
	return len(reqs) > 1
}

// objectLabels reads labels straight from the bytes for selector matching.
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
	gjson.GetBytes(l, "metadata.labels").ForEach(func(k, v gjson.Result) bool {
		if k.Str == key {
			val, found = v.Str, true
			return false
		}
		return true
	})
	return val, found
}

type continueToken struct {
	Resource string `json:"r"`
	After    string `json:"a"`
}

func encodeContinue(resource, after string) string {
	b, _ := json.Marshal(continueToken{resource, after})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(resource, token string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	var t continueToken
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.After == "" {
		return "", fmt.Errorf("%w: continue token is malformed; start the list again without it", ErrInvalid)
	}
	if t.Resource != resource {
		return "", fmt.Errorf("%w: continue token belongs to a list of %s, not %s", ErrInvalid, t.Resource, resource)
	}
	return t.After, nil
}
