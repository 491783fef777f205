package cache_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/query"
)

// churnPod is what the churn oracle reads of a pod.
type churnPod struct{ ns, name, node, phase string }

func churnPods(t *testing.T, items []*cache.Object) []churnPod {
	t.Helper()
	out := make([]churnPod, len(items))
	for i, o := range items {
		var p struct {
			Metadata struct{ Namespace, Name string }
			Spec     struct{ NodeName string }
			Status   struct{ Phase string }
		}
		if err := json.Unmarshal(o.Raw(), &p); err != nil {
			t.Fatal(err)
		}
		out[i] = churnPod{p.Metadata.Namespace, p.Metadata.Name, p.Spec.NodeName, p.Status.Phase}
	}
	return out
}

// TestOrderedPagesMatchBruteForceUnderChurn: a question sorted by two
// paths of the JSON, the first descending (an ordered index over paths,
// not columns), with and without a filter, built while the cluster
// churns and asked again after each churn (its remembered passes
// learning the changes): every page, at any offset and limit, is the
// brute-force answer over the plain list, ties by namespace and name,
// missing values last, with its total.
func TestOrderedPagesMatchBruteForceUnderChurn(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	sc := query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
	const sort = "-status.phase,spec.nodeName"
	keys, err := sc.ParseSort(sort)
	if err != nil {
		t.Fatal(err)
	}
	byText := func(x, y string, desc bool) int {
		if (x == "") != (y == "") {
			return cmp.Compare(len(y), len(x)) // missing last
		}
		if desc {
			return strings.Compare(y, x)
		}
		return strings.Compare(x, y)
	}
	questions := []struct {
		filter []string
		match  func(churnPod) bool
	}{
		{nil, func(churnPod) bool { return true }},
		{[]string{"status.phase!=Pending"}, func(p churnPod) bool { return p.phase != "Pending" }},
	}
	step := func(n int) {
		for range n {
			if err := f.Sim.Step(); err != nil {
				t.Error(err)
			}
		}
	}
	for round := range 6 {
		var churning sync.WaitGroup
		if round == 0 { // the indexes are built while events arrive
			churning.Go(func() { step(20) })
		} else {
			step(3)
		}
		for _, qq := range questions {
			flt, err := sc.ParseFilter(qq.filter, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Cache.List("pods", cache.ListQuery{Limit: 1, Ask: &cache.Ask{Schema: sc, Filter: flt, Sort: keys, SortText: sort, Now: time.Now()}}); err != nil {
				t.Fatal(err)
			}
		}
		churning.Wait()
		cachetest.Eventually(t, "caught up", func() bool {
			return maps.Equal(cachetest.State(t, f.Cache, "pods", cache.ListQuery{}), f.ServedPods(t))
		})
		plain, err := f.Cache.List("pods", cache.ListQuery{})
		if err != nil {
			t.Fatal(err)
		}
		for _, qq := range questions {
			want := slices.DeleteFunc(churnPods(t, plain.Items), func(p churnPod) bool { return !qq.match(p) })
			slices.SortFunc(want, func(x, y churnPod) int {
				return cmp.Or(byText(x.phase, y.phase, true), byText(x.node, y.node, false), strings.Compare(x.ns, y.ns), strings.Compare(x.name, y.name))
			})
			flt, err := sc.ParseFilter(qq.filter, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			for _, pg := range [][2]int{{0, 0}, {0, 7}, {5, 11}, {len(want) - 3, 10}} {
				ask := &cache.Ask{Schema: sc, Filter: flt, Sort: keys, SortText: sort, Offset: pg[0], Now: time.Now()}
				res, err := f.Cache.List("pods", cache.ListQuery{Limit: pg[1], Ask: ask})
				if err != nil {
					t.Fatal(err)
				}
				expect := want[pg[0]:]
				if pg[1] > 0 {
					expect = expect[:min(pg[1], len(expect))]
				}
				got := churnPods(t, res.Items)
				if !slices.Equal(got, expect) || res.Total != len(want) {
					t.Errorf("round %d filter %q offset %d limit %d: total %d, expect %d; %s", round, qq.filter, pg[0], pg[1], res.Total, len(want), diffPods(got, expect))
				}
				for i, vs := range res.Values {
					if i < len(got) && (vs[0].String() != got[i].phase || vs[1].String() != got[i].node) {
						t.Errorf("round %d: item %d's sort values %v beside %v", round, pg[0]+i, vs, got[i])
					}
				}
			}
		}
	}
}

// diffPods says where two lists of pods differ.
func diffPods(got, want []churnPod) string {
	var b strings.Builder
	for i := range max(len(got), len(want)) {
		var g, w churnPod
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			fmt.Fprintf(&b, " [%d] %v, expect %v;", i, g, w)
		}
	}
	return b.String()
}
