package cache

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"k8s.io/apimachinery/pkg/sharding"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/fields"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/internal/text"
	"github.com/kubeindex/kubeindex/query"
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
	// Ask, when not nil, filters, sorts and offsets what the above select
	// (see Ask); nil lists in key order.
	Ask *Ask
	// ShardSelector, when not nil, keeps the objects whose hashed UID or
	// namespace falls in its ranges (KEP-5866 shardSelector).
	ShardSelector sharding.Selector
}

// ListResult is one page of a list, ordered by namespace/name.
type ListResult struct {
	Resource  Resource
	Items     []*Object
	Continue  string
	Remaining int
	// Total is the number of matches, on every page.
	Total int
	// Values are each item's values of q.Ask's sort, as the answer
	// ordered it (what its continue tokens hold), for a caller merging
	// it with others; nil for a plain list.
	Values    [][]query.Value
	Freshness Freshness
	// walk is the kept walk the page is of ("" for none) and pos the
	// position after the page among its matches: where ContinueAfter
	// resumes it, after a page that ends the walk too (which carries no
	// continue token).
	walk string
	pos  int
	// keeper is the cache that answered a question, to keep a page that
	// holds every match as a walk when ContinueAfter needs one.
	keeper *Cache
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
	return nil, st, fmt.Errorf("%s %q: %w", r.res.Kind, text.Truncate(key, 256), ErrNotFound)
}

// List returns the objects matching q, one page at a time: sorted by
// key, or as q.Ask sorts them.
//
// Pages are taken from the live cache: a continue token resumes after the
// last object returned, so objects created or deleted between pages may be
// missed or appear; within a page the view is consistent.
func (c *Cache) List(resource string, q ListQuery) (ListResult, error) {
	r, res, f, tok, err := c.prepare(resource, q)
	if err != nil {
		return res, err
	}
	if q.Ask != nil && tok.Walk != "" {
		if res, done, err := c.continueWalk(res, q, tok); done {
			return res, err
		}
	}
	if q.Ask != nil {
		res.keeper = c
		res, items, ok, err := c.answerOrdered(r, res, f, q, tok)
		if ok {
			return res, err
		}
		if items == nil {
			items = r.gather(f)
		}
		return c.answer(res, items, q, tok)
	}
	items := r.gather(f)
	after := tok.After
	slices.SortFunc(items, func(a, b *Object) int { return strings.Compare(a.Key(), b.Key()) })
	res.Total = len(items)
	if after != "" {
		start := sort.Search(len(items), func(i int) bool { return items[i].Key() > after })
		items = items[start:]
	}
	if q.Limit > 0 && len(items) > q.Limit {
		res.Remaining = len(items) - q.Limit
		items = items[:q.Limit]
		res.Continue = encodeContinue(res.Resource.Name, items[len(items)-1].Key())
	}
	res.Items = items
	return res, nil
}

// selection is the objects q's namespace, selectors and index value
// select, unordered, with the result's resource and freshness.
func (c *Cache) selection(resource string, q ListQuery) (ListResult, []*Object, error) {
	r, res, f, _, err := c.prepare(resource, q)
	if err != nil {
		return res, nil, err
	}
	return res, r.gather(f), nil
}

// prepare validates q and compiles its filter, and decodes its continue
// token, for a synced resource.
func (c *Cache) prepare(resource string, q ListQuery) (*resourceCache, ListResult, *filter, continueToken, error) {
	r, err := c.resource(resource)
	if err != nil {
		return nil, ListResult{}, nil, continueToken{}, err
	}
	res := ListResult{Resource: r.res, Freshness: r.freshness()}
	f, tok, err := r.compileQuery(q)
	if err == nil {
		err = checkAsked(tok, q.Ask)
	}
	if err == nil && !res.Freshness.Synced {
		err = fmt.Errorf("%s: %w", r.res.Name, ErrNotSynced)
	}
	return r, res, f, tok, err
}

// gather returns the objects f selects, unordered.
func (r *resourceCache) gather(f *filter) []*Object {
	if f.fn == nil && f.fields != nil {
		if index, value, ok := r.indexHint(f.fields); ok {
			spec, norm, err := r.indexValue(index, value)
			if err != nil {
				return nil // no object can hold a value the index cannot
			}
			f.setIndex(spec, norm)
		}
	}
	return slices.DeleteFunc(r.candidates(f), func(o *Object) bool { return !f.selects(o) })
}

// candidates narrows the objects by f's index value, or by namespace,
// before f.selects filters them.
func (r *resourceCache) candidates(f *filter) []*Object {
	if f.fn == nil && f.namespace == "" && f.namespaces != nil {
		return r.inNamespaces(f.namespaces)
	}
	index, value := nsIndex, f.namespace
	if f.fn != nil {
		index, value = f.index, f.value
	}
	var out []*Object
	for _, sh := range r.shardsFor(f.namespace) {
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
	return out
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
		return indexers.Spec{}, fmt.Errorf("%w: %s has no index %q (indexes: %s)", ErrUnknownIndex, r.res.Name, text.Truncate(name, 64), strings.Join(names, ", "))
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
		return spec, "", fmt.Errorf("%w: %q is not a valid value for index %s (%s)", ErrInvalid, text.Truncate(value, 128), spec.Name, spec.Type)
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

type continueToken struct {
	Resource string `json:"r"`
	After    string `json:"a"`
	// Asked marks a page of a question (Ask), ordered by its sort and
	// then by namespace and name, not by key; Sort and Values are the
	// question's sort and the last object's values of it.
	Asked  bool          `json:"q,omitempty"`
	Sort   string        `json:"s,omitempty"`
	Values []query.Value `json:"v,omitempty"`
	// Walk is the kept answer a question's pages come from (ask_pages.go)
	// and Pos the position of the next page in it. A process that does
	// not know the walk (another replica) resumes from After and Values.
	// A token with a Walk and no After is the place before the walk's
	// first match (Pos 0): another process starts from its live cache.
	Walk string `json:"w,omitempty"`
	Pos  int    `json:"p,omitempty"`
}

// atStart reports whether t is the place before a kept walk's first
// match.
func (t continueToken) atStart() bool { return t.After == "" && t.Walk != "" }

func encodeContinue(resource, after string) string {
	return encodeToken(continueToken{Resource: resource, After: after})
}

func encodeToken(t continueToken) string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeContinue reads a continue token; "" is the first page's (a zero
// token).
func decodeContinue(resource, token string) (continueToken, error) {
	var t continueToken
	if token == "" {
		return t, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.After == "" && (t.Walk == "" || t.Pos != 0 || !t.Asked || t.Values != nil) {
		return continueToken{}, fmt.Errorf("%w: continue token is malformed; start the list again without it", ErrInvalid)
	}
	if t.Resource != resource {
		return continueToken{}, fmt.Errorf("%w: continue token belongs to a list of %s, not %s", ErrInvalid, text.Truncate(t.Resource, 64), text.Truncate(resource, 64))
	}
	return t, nil
}
