package cache

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/query"
)

// Standing indexes: the ordered indexes of the pod sorts a dashboard asks
// by clicking a column header (Options.PodSortIndexes), and the
// namespace/name order its unsorted view opens with, are built ahead of
// the questions, so that the first click finds its index ready rather
// than waiting for a build over every pod. They are built after the
// sync (never during it: the initial sync pays nothing for them), by the
// column warmer right after it has kept the pods' column values, which
// the indexes read: one at a time, each read and sorted on the warmer's
// goroutine alone, stepping aside while a costly question runs. The
// handler keeps them as it keeps every index; they are never dropped
// (neither idle nor least recently used), and not counted in maxOrders.
// A descending sort reads its key's index backwards (order_reverse.go),
// so one index serves both directions of a column. LazyColumns builds
// none.

// podResource is the resource whose sorts PodSortIndexes names.
var podResource = schema.GroupResource{Resource: "pods"}

// DefaultPodSortIndexes are the pod sorts of the dashboard's column
// headers a dashboard of pods is sorted by most (what is failing, what
// restarts, where, how old): its flag's default. Each standing index
// costs memory per pod for good, so the default leaves the rest (ready,
// ip, name) to the first question, as for any other key.
var DefaultPodSortIndexes = []string{"status", "restarts", "node", "age"}

// podSorts parses Options.PodSortIndexes against the pods' Table columns:
// each a sort as the sort parameter takes it. The namespace/name order
// comes first, when there is any.
func podSorts(texts []string) ([][]query.SortKey, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	sc := query.NewSchema(table.ForResource(podResource))
	out := [][]query.SortKey{nil}
	for _, text := range texts {
		keys, err := sc.ParseSort(text)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", text, err)
		}
		if len(keys) == 0 {
			continue
		}
		if !indexable(keys, sc) {
			return nil, fmt.Errorf("%q: its values change with the clock; an index cannot hold them", text)
		}
		out = append(out, keys)
	}
	return out, nil
}

// ValidatePodSortIndexes reports what is wrong with pod sorts for
// Options.PodSortIndexes.
func ValidatePodSortIndexes(texts []string) error {
	_, err := podSorts(texts)
	return err
}

// standing returns the sorts r keeps standing indexes of, under sc (its
// columnSchema); none but for pods.
func (c *Cache) standing(r *resourceCache) [][]query.SortKey {
	if (schema.GroupResource{Group: r.res.Group, Resource: r.res.Plural}) != podResource {
		return nil
	}
	return c.podSorts
}

// stand builds r's standing indexes that do not exist yet, one after the
// other on the caller's goroutine (the column warmer's); false when ctx
// ended.
func (c *Cache) stand(ctx context.Context, r *resourceCache, sc *query.Schema) bool {
	for _, keys := range c.standing(r) {
		if !c.stepAside(ctx) {
			return false
		}
		start := time.Now()
		if objects, built := r.orders.stand(r, keys, sc); built {
			c.opts.Logger.Debug("standing ordered index built", "resource", r.res.Name, "sort", query.SortText(keys),
				"objects", objects, "took", time.Since(start).Round(time.Millisecond))
		}
	}
	return true
}

// stand makes the index of keys holding no values standing, building it
// on the caller's goroutine alone when it does not exist (built, over
// that many objects).
func (os *orders) stand(r *resourceCache, keys []query.SortKey, sc *query.Schema) (objects int, built bool) {
	ck, text, _ := canonicalSort(keys)
	ix, found := os.joinAs(ck, text, nil, sc, true)
	if found {
		return 0, false
	}
	objs := r.objects()
	ix.buildIn(objs, 1)
	return len(objs), true
}
