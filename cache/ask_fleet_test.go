package cache_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/query"
)

// TestContinueAfterStaysInTheWalk: a token made by ContinueAfter inside
// the last page of a kept walk (a page that carries no continue token of
// its own: nothing follows it) resumes in that walk, as one inside an
// earlier page does: an object deleted meanwhile is still shown and the
// total stays the first page's. Both kinds of walk: of an ordered index
// (the whole resource) and of a sorted selection (a namespace holding
// fewer than a fifth of the pods, answered from its objects).
func TestContinueAfterStaysInTheWalk(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	sc := query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
	const sort = "-status.phase,spec.nodeName"
	keys, err := sc.ParseSort(sort)
	if err != nil {
		t.Fatal(err)
	}
	all, err := f.Cache.List("pods", cache.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	perNS := map[string]int{}
	for _, o := range all.Items {
		perNS[o.Namespace()]++
	}
	narrow := ""
	for _, ns := range slices.Sorted(maps.Keys(perNS)) {
		if n := perNS[ns]; n >= 6 && n*5 < len(all.Items) {
			narrow = ns
			break
		}
	}
	if narrow == "" {
		t.Fatalf("no namespace holds from 6 pods to a fifth of %d: %v", len(all.Items), perNS)
	}
	for _, ns := range []string{"", narrow} {
		q := cache.ListQuery{Namespace: ns, Ask: &cache.Ask{Schema: sc, Sort: keys, SortText: sort, Now: time.Now()}}
		whole, err := f.Cache.List("pods", q)
		if err != nil {
			t.Fatal(err)
		}
		// a first page of all but three, then the walk's last page
		q.Limit = whole.Total - 3
		first, err := f.Cache.List("pods", q)
		if err != nil || first.Continue == "" {
			t.Fatalf("namespace %q: a first page of %d: continue %q, %v", ns, q.Limit, first.Continue, err)
		}
		q.Continue = first.Continue
		last, err := f.Cache.List("pods", q)
		if err != nil || len(last.Items) != 3 || last.Continue != "" {
			t.Fatalf("namespace %q: the walk's last page: %d items, continue %q, %v", ns, len(last.Items), last.Continue, err)
		}
		gone := last.Items[2]
		if err := f.Sim.Delete("pods", gone.Namespace(), gone.Name()); err != nil {
			t.Fatal(err)
		}
		cachetest.Eventually(t, "the delete is cached", func() bool {
			_, _, err := f.Cache.Get("pods", gone.Namespace(), gone.Name())
			return err != nil
		})
		q.Continue = last.ContinueAfter(q, 1, last.Values[0])
		rest, err := f.Cache.List("pods", q)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := keysOf(rest.Items), keysOf(last.Items[1:]); !slices.Equal(got, want) || rest.Total != whole.Total {
			t.Errorf("namespace %q: after the walk's last page's first item: %v, total %d; expect %v, total %d (the first page's moment)",
				ns, got, rest.Total, want, whole.Total)
		}
	}
}
