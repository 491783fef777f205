package cache_test

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/query"
)

// TestWindowsShareTheirCounts: windows asking the same counts of the same
// selection and filter share them whatever their sort, page or fields;
// another scope (a caller who may read less) or other keys count apart,
// and each window gets the counts of its own scope.
func TestWindowsShareTheirCounts(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	now := time.Now().Truncate(time.Second)
	for i := range 30 {
		p := oraclePod{ns: []string{"qa", "qb"}[i%2], name: fmt.Sprint("p-", i), created: now.Add(-time.Hour), phase: phases[i%4], node: fmt.Sprint("n", i%3), restarts: []int{i % 7}}
		if err := f.Sim.Apply("pods", p.json()); err != nil {
			t.Fatal(err)
		}
	}
	cachetest.Eventually(t, "the cache has the pods", func() bool {
		return len(cachetest.State(t, f.Cache, "pods", cache.ListQuery{Namespaces: []string{"qa", "qb"}})) == 30
	})
	sc := query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
	keys := func(text string) []query.Key {
		k, err := sc.ParseKeys("groupBy", text, 2, false)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	open := func(sort string, offset int, nss []string, groupBy []query.Key) *windowClient {
		t.Helper()
		sk, err := sc.ParseSort(sort)
		if err != nil {
			t.Fatal(err)
		}
		w, err := f.Cache.Window("pods", cache.WindowQuery{Namespaces: nss, Ask: &cache.Ask{Schema: sc, Sort: sk, SortText: sort, Now: now},
			Offset: offset, Limit: 5, GroupBy: groupBy, Rate: 50}, make(chan struct{}, 1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		c := &windowClient{}
		cachetest.Eventually(t, "the window's first message", func() bool {
			c.drain(t, w)
			return len(c.types) > 0
		})
		return c
	}
	both, one := []string{"qa", "qb"}, []string{"qa"}
	a := open("-restarts", 0, both, keys("status.phase,spec.nodeName"))
	b := open("name", 10, both, keys("status.phase,spec.nodeName"))
	if got := f.Cache.WindowCounts(); got != 1 {
		t.Fatalf("two windows asking the same counts in other orders: %d counts kept; expect 1", got)
	}
	if a.total != 30 || fmt.Sprint(a.groups()) != fmt.Sprint(b.groups()) {
		t.Fatalf("shared counts differ: %v (total %d) and %v", a.groups(), a.total, b.groups())
	}
	c := open("-restarts", 0, one, keys("status.phase,spec.nodeName"))
	open("-restarts", 0, both, keys("spec.nodeName,status.phase"))
	if got := f.Cache.WindowCounts(); got != 3 {
		t.Fatalf("counts of another scope and of other keys: %d counts kept; expect 3", got)
	}
	sum := 0
	for g, n := range c.groups() {
		sum += n
		if n > a.groups()[g] {
			t.Fatalf("the caller who may read qa only counts %d in %s, more than everyone's %d", n, g, a.groups()[g])
		}
	}
	if sum != 15 || c.total != 15 {
		t.Fatalf("the caller who may read qa only: counts sum to %d, total %d; expect 15", sum, c.total)
	}
}
