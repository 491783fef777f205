package cache

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kubeindex/kubeindex/indexers"
)

// IndexValue is one value of an index and how many objects have it.
type IndexValue struct {
	Value string `json:"value"`
	Count int    `json:"count"`
}

// IndexValues is the answer to "which values does this index hold".
type IndexValues struct {
	Resource  Resource
	Index     indexers.Spec
	Values    []IndexValue
	Continue  string
	Remaining int
	Freshness Freshness
}

// IndexValues lists the values of an index with their object counts, sorted
// by value, paged like List (limit 0 = all; after = last value of the
// previous page).
func (c *Cache) IndexValues(resource, index string, limit int, after string) (IndexValues, error) {
	r, err := c.resource(resource)
	if err != nil {
		return IndexValues{}, err
	}
	out := IndexValues{Resource: r.res, Freshness: r.freshness()}
	spec, err := r.index(index)
	if err != nil {
		return out, err
	}
	out.Index = spec
	if limit < 0 {
		return out, fmt.Errorf("%w: limit must not be negative", ErrInvalid)
	}
	if !out.Freshness.Synced {
		return out, fmt.Errorf("%s: %w", r.res.Name, ErrNotSynced)
	}
	counts := map[string]int{}
	for _, sh := range r.shards {
		idx := sh.informer.GetIndexer()
		for _, v := range idx.ListIndexFuncValues(index) {
			keys, _ := idx.IndexKeys(index, v)
			counts[v] += len(keys)
		}
	}
	for v, n := range counts {
		if n > 0 {
			out.Values = append(out.Values, IndexValue{v, n})
		}
	}
	slices.SortFunc(out.Values, func(a, b IndexValue) int { return strings.Compare(a.Value, b.Value) })
	if after != "" {
		start := sort.Search(len(out.Values), func(i int) bool { return out.Values[i].Value > after })
		out.Values = out.Values[start:]
	}
	if limit > 0 && len(out.Values) > limit {
		out.Remaining = len(out.Values) - limit
		out.Values = out.Values[:limit]
		out.Continue = out.Values[limit-1].Value
	}
	if out.Values == nil {
		out.Values = []IndexValue{}
	}
	return out, nil
}
