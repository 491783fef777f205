package cache_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/query"
)

// TestAWindowKeepsItsOrderedIndex: a live window loaded from the ordered
// index of its sort (restarts descending: the index of restarts, read
// backwards) keeps that index however long no question asks of it,
// while an index only questions used is dropped once idle (the cache's
// clock moved past the idle time).
func TestAWindowKeepsItsOrderedIndex(t *testing.T) {
	var skew atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	f := cachetest.StartWith(t, cachetest.Config{Options: cache.Options{Now: clock}}, cachetest.PodSpec())
	now := time.Now().Truncate(time.Second)
	for i := range 20 {
		p := oraclePod{ns: "qa", name: fmt.Sprint("p-", i), created: now.Add(-time.Hour), phase: phases[i%4], node: fmt.Sprint("n", i%3), restarts: []int{i % 7}}
		if err := f.Sim.Apply("pods", p.json()); err != nil {
			t.Fatal(err)
		}
	}
	cachetest.Eventually(t, "the cache has the pods", func() bool {
		return len(cachetest.State(t, f.Cache, "pods", cache.ListQuery{Namespace: "qa"})) == 20
	})
	sc := query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
	ask := func(sort string) *cache.Ask {
		keys, err := sc.ParseSort(sort)
		if err != nil {
			t.Fatal(err)
		}
		return &cache.Ask{Schema: sc, Sort: keys, SortText: sort, Now: now}
	}
	// A question's index, which no window uses.
	if _, err := f.Cache.List("pods", cache.ListQuery{Limit: 5, Ask: ask("-status")}); err != nil {
		t.Fatal(err)
	}
	w, err := f.Cache.Window("pods", cache.WindowQuery{Ask: ask("-restarts"), Limit: 10, Rate: 50}, make(chan struct{}, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	var client windowClient
	cachetest.Eventually(t, "the window's rows", func() bool {
		client.drain(t, w)
		return len(client.rows) == 10
	})
	if got := f.Cache.OrderedIndexes("pods"); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"restarts", "status"}) {
		t.Fatalf("ordered indexes %q; expect the window's and the question's", got)
	}
	skew.Store(int64(11 * time.Minute))
	f.Cache.DropIdleOrderedIndexes("pods")
	if got := f.Cache.OrderedIndexes("pods"); !slices.Equal(got, []string{"restarts"}) {
		t.Fatalf("after 11 idle minutes, ordered indexes %q; expect only the live window's", got)
	}
}
