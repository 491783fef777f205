// The oracle of lists across clusters under churn: every first page
// across clusters is the brute-force merge of the clusters' own lists,
// and a walk under churn is the merge of its first page's moment.

package server

import (
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// oracleQuestion is a question across clusters and its brute-force
// answer over every cluster's whole list: the matches, ordered.
type oracleQuestion struct {
	params url.Values
	match  func(fleetPod) bool
	order  func(x, y fleetPod) int
}

// byCNN is the tie-break of every merged answer: cluster, namespace,
// name.
func byCNN(x, y fleetPod) int {
	return cmp.Or(strings.Compare(x.cluster, y.cluster), strings.Compare(x.ns, y.ns), strings.Compare(x.name, y.name))
}

// byText orders texts ascending or descending, a missing ("") one last
// either way.
func byText(x, y string, desc bool) int {
	if (x == "") != (y == "") {
		return cmp.Compare(len(y), len(x)) // missing last
	}
	if desc {
		return strings.Compare(y, x)
	}
	return strings.Compare(x, y)
}

var oracleQuestions = []oracleQuestion{
	{url.Values{}, func(fleetPod) bool { return true }, byCNN},
	{url.Values{"sort": {"spec.nodeName"}}, func(fleetPod) bool { return true },
		func(x, y fleetPod) int { return cmp.Or(byText(x.node, y.node, false), byCNN(x, y)) }},
	{url.Values{"filter": {"status.phase=Running"}, "sort": {"-spec.nodeName,-cluster"}},
		func(p fleetPod) bool { return p.phase == "Running" },
		func(x, y fleetPod) int {
			return cmp.Or(byText(x.node, y.node, true), -strings.Compare(x.cluster, y.cluster), byCNN(x, y))
		}},
	{url.Values{"filter": {"cluster!=b"}, "sort": {"-status.phase,spec.nodeName"}},
		func(p fleetPod) bool { return p.cluster != "b" },
		func(x, y fleetPod) int {
			return cmp.Or(byText(x.phase, y.phase, true), byText(x.node, y.node, false), byCNN(x, y))
		}},
}

// answer is q's brute-force answer over the clusters' lists.
func (q oracleQuestion) answer(lists map[string][]fleetPod) []fleetPod {
	var out []fleetPod
	for _, n := range slices.Sorted(maps.Keys(lists)) {
		for _, p := range lists[n] {
			if q.match(p) {
				out = append(out, p)
			}
		}
	}
	slices.SortStableFunc(out, q.order)
	return out
}

// churn makes steps of the simulated churn of the clusters named (every
// cluster when none is) and waits until every cache holds what its
// cluster serves; it returns each cluster's list then.
func (tf *testFleet) churn(t *testing.T, steps int, clusters ...string) map[string][]fleetPod {
	t.Helper()
	for n, fx := range tf.fx {
		if len(clusters) > 0 && !slices.Contains(clusters, n) {
			continue
		}
		for range steps {
			if err := fx.Sim.Step(); err != nil {
				t.Fatal(err)
			}
		}
	}
	lists := map[string][]fleetPod{}
	for n, fx := range tf.fx {
		want := fx.ServedPods(t)
		cachetest.Eventually(t, "cluster "+n+" caught up", func() bool {
			return maps.Equal(cachetest.State(t, fx.Cache, "pods", cache.ListQuery{}), want)
		})
		lists[n] = tf.own(t, n)
	}
	// A cluster's ordered indexes follow its store as its event handler
	// runs, after the store: they have caught up when an answer sorted by
	// what churn changes (phase, node; pods come and go) is its list's.
	q := oracleQuestion{url.Values{"sort": {"-status.phase,spec.nodeName"}}, oracleQuestions[3].match, oracleQuestions[3].order}
	q.match = func(fleetPod) bool { return true }
	for n, list := range lists {
		want := ids(q.answer(map[string][]fleetPod{n: list}))
		params := cloneValues(q.params)
		params.Set("cluster", n)
		params.Set("limit", "1000")
		cachetest.Eventually(t, "cluster "+n+"'s ordered indexes caught up", func() bool {
			var got []string
			for _, it := range getFleetPage(t, tf.front, "/api/v1/pods?"+params.Encode(), "").Items {
				got = append(got, readPod(t, it.Cluster, it.Object).id())
			}
			return slices.Equal(got, want)
		})
	}
	return lists
}

// TestFleetPagesMatchBruteForceUnderChurn: as the clusters churn, every
// first page across clusters (any offset and limit) is the brute-force
// merge of the clusters' whole lists, filtered and ordered here: by the
// sort, then cluster, namespace and name, with its total; and a walk
// goes on, while the clusters churn between its pages, as the merge of
// the lists of its first page's moment, whichever clusters its first
// page holds items of (every cluster keeps its place from that page:
// one that gave it none, one whose first answer held all its matches).
func TestFleetPagesMatchBruteForceUnderChurn(t *testing.T) {
	tf := startTestFleet(t, nil, AuthOptions{})
	const rounds = 2
	exact := 0
	for round := range rounds {
		lists := tf.churn(t, 3)
		for _, q := range oracleQuestions {
			want := q.answer(lists)
			if len(want) < 30 {
				t.Fatalf("%v: only %d matches; the test needs more", q.params, len(want))
			}
			for _, pg := range [][2]int{{0, 1}, {0, 10}, {3, 17}, {len(want) - 5, 10}, {0, len(want) + 1}} {
				params := cloneValues(q.params)
				params.Set("offset", fmt.Sprint(pg[0]))
				params.Set("limit", fmt.Sprint(pg[1]))
				p := getFleetPage(t, tf.front, "/api/v1/pods?"+params.Encode(), "")
				var got []fleetPod
				for _, it := range p.Items {
					got = append(got, readPod(t, it.Cluster, it.Object))
				}
				expect := want[pg[0]:min(pg[0]+pg[1], len(want))]
				if !slices.Equal(ids(got), ids(expect)) {
					t.Errorf("round %d %v offset %d limit %d: %d items, expect %d; extra %v, missing %v", round, q.params, pg[0], pg[1],
						len(got), len(expect), without(ids(got), ids(expect)), without(ids(expect), ids(got)))
				}
				if p.Metadata.TotalItemCount != len(want) || p.Metadata.RemainingItemCount != len(want)-pg[0]-len(expect) {
					t.Errorf("round %d %v offset %d limit %d: total %d remaining %d; expect %d and %d", round, q.params, pg[0], pg[1],
						p.Metadata.TotalItemCount, p.Metadata.RemainingItemCount, len(want), len(want)-pg[0]-len(expect))
				}
			}
			// Walks under churn: by a few (the first page holds items
			// of one cluster, the others give it none), by a page that
			// holds items of every cluster the question asks, and by
			// half the matches (each cluster's first answer holds all
			// its matches, the page only some of them). Each is the
			// merge of its first page's moment, each pod as it was then,
			// with that moment's total on every page; the churn between
			// its pages moves the clusters, so the questions after this
			// one are of the lists it leaves.
			every, seen := 0, map[string]bool{}
			for every < len(want) && len(seen) < len(lists) && (len(seen) < 2 || q.params.Get("filter") != "cluster!=b") {
				seen[want[every].cluster] = true
				every++
			}
			for _, limit := range []int{4, every + 3, len(want) / 2} {
				got, totals := walk(t, tf.front, cloneValues(q.params), limit, func() { lists = tf.churn(t, 2) })
				if !slices.Equal(got, want) {
					t.Errorf("round %d %v: a walk by %d under churn: %d items; expect the first page's moment's %d in order, each as it was then; extra or changed %v, missing or changed %v",
						round, q.params, limit, len(got), len(want), differ(got, want), differ(want, got))
				}
				for i, n := range totals {
					if n != len(want) {
						t.Errorf("round %d %v: a walk by %d: page %d's total %d; expect %d", round, q.params, limit, i, n, len(want))
					}
				}
				want = q.answer(lists)
				exact++
			}
		}
	}
	if exact != 3*len(oracleQuestions)*rounds {
		t.Errorf("%d walks compared with their first page's moment; expect three of each question in each round", exact)
	}
}

// without is a's elements not in b.
func without(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
