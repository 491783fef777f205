package cache_test

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/query"
)

// oraclePod is a generated pod and the facts the oracle reads from it,
// never from its JSON.
type oraclePod struct {
	ns, name string
	created  time.Time
	phase    string
	node     string // "" for none
	app      string // "" for no label
	restarts []int
}

func (p oraclePod) key() string { return p.ns + "/" + p.name }

func (p oraclePod) total() int {
	n := 0
	for _, r := range p.restarts {
		n += r
	}
	return n
}

func (p oraclePod) json() []byte {
	var cs, st []map[string]any
	for i, r := range p.restarts {
		cs = append(cs, map[string]any{"name": fmt.Sprint("c", i), "image": "img"})
		st = append(st, map[string]any{"name": fmt.Sprint("c", i), "restartCount": r, "ready": r%2 == 0,
			"state": map[string]any{"running": map[string]any{"startedAt": p.created.Format(time.RFC3339)}}})
	}
	md := map[string]any{"name": p.name, "namespace": p.ns, "uid": "uid-" + p.key(), "creationTimestamp": p.created.Format(time.RFC3339)}
	if p.app != "" {
		md["labels"] = map[string]any{"app": p.app}
	}
	spec := map[string]any{"containers": cs}
	if p.node != "" {
		spec["nodeName"] = p.node
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec,
		"status": map[string]any{"phase": p.phase, "containerStatuses": st}})
	return b
}

// oracleTerm is a filter term as written and as the oracle decides it.
type oracleTerm struct {
	text string
	ok   func(p oraclePod) bool
}

// oracleSort is a sort key as written and the oracle's value of it
// (nil: missing).
type oracleSort struct {
	text string
	desc bool
	val  func(p oraclePod) any // int, string or nil
}

var phases = []string{"Running", "Pending", "Failed", "Succeeded"}

func randomTerm(r *rand.Rand, now time.Time) oracleTerm {
	ph, ph2 := phases[r.IntN(4)], phases[r.IntN(4)]
	k := r.IntN(8)
	node := fmt.Sprint("n", r.IntN(4))
	hours := r.IntN(72)
	sub := string(rune('a' + r.IntN(6)))
	switch r.IntN(12) {
	case 0:
		return oracleTerm{"status.phase=" + ph, func(p oraclePod) bool { return p.phase == ph }}
	case 1:
		return oracleTerm{fmt.Sprintf("status.phase in (%s, %s)", ph, ph2), func(p oraclePod) bool { return p.phase == ph || p.phase == ph2 }}
	case 2:
		return oracleTerm{fmt.Sprint("restarts>", k), func(p oraclePod) bool { return p.total() > k }}
	case 3:
		return oracleTerm{fmt.Sprint("restarts<=", k), func(p oraclePod) bool { return p.total() <= k }}
	case 4:
		return oracleTerm{"spec.nodeName!=" + node, func(p oraclePod) bool { return p.node != node }}
	case 5:
		return oracleTerm{"metadata.labels.app", func(p oraclePod) bool { return p.app != "" }}
	case 6:
		return oracleTerm{"!metadata.labels.app", func(p oraclePod) bool { return p.app == "" }}
	case 7:
		return oracleTerm{fmt.Sprintf("age>%dh", hours), func(p oraclePod) bool { return p.created.Before(now.Add(-time.Duration(hours) * time.Hour)) }}
	case 8:
		return oracleTerm{"name~" + strings.ToUpper(sub), func(p oraclePod) bool { return strings.Contains(p.name, sub) }}
	case 9:
		return oracleTerm{"node=" + node, func(p oraclePod) bool { return p.node == node }}
	case 10:
		return oracleTerm{"status.containerStatuses.#.restartCount>=" + fmt.Sprint(k), func(p oraclePod) bool {
			return slices.ContainsFunc(p.restarts, func(n int) bool { return n >= k })
		}}
	}
	return oracleTerm{"metadata.labels.app notin (x, y)", func(p oraclePod) bool { return p.app != "x" && p.app != "y" }}
}

var oracleSorts = []oracleSort{
	{text: "restarts", val: func(p oraclePod) any { return p.total() }},
	{text: "age", val: func(p oraclePod) any { return -int(p.created.Unix()) }},
	{text: "status.phase", val: func(p oraclePod) any { return p.phase }},
	{text: "node", val: func(p oraclePod) any {
		if p.node == "" {
			return nil
		}
		return p.node
	}},
	{text: "metadata.labels.app", val: func(p oraclePod) any {
		if p.app == "" {
			return nil
		}
		return p.app
	}},
	{text: "name", val: func(p oraclePod) any { return p.name }},
}

func compareAny(a, b any) int {
	switch x := a.(type) {
	case int:
		return cmp.Compare(x, b.(int))
	case string:
		return strings.Compare(x, b.(string))
	}
	return 0
}

// oracleOrder is the sort the documentation describes, written plainly.
func oracleOrder(keys []oracleSort) func(a, b oraclePod) int {
	return func(a, b oraclePod) int {
		for _, k := range keys {
			x, y := k.val(a), k.val(b)
			switch {
			case x == nil && y == nil:
				continue
			case x == nil:
				return 1
			case y == nil:
				return -1
			}
			c := compareAny(x, y)
			if k.desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return cmp.Or(strings.Compare(a.ns, b.ns), strings.Compare(a.name, b.name))
	}
}

// TestAskAgreesWithABruteForceOracle: random pods, random filters and
// sorts, paged with random limits; every walk's pages, joined, are what a
// plain filter and sort over all the pods give, and every page gives
// their number. Pods are created, changed and deleted between questions
// (so ordered indexes are built over one state and kept through the
// changes) and between the pages of a walk (which answers as of its first
// page). Most questions are answered from ordered indexes (every
// namespace selected), some from their selection (one namespace); then
// all of them from their selection.
func TestAskAgreesWithABruteForceOracle(t *testing.T) {
	t.Run("ordered-indexes", func(t *testing.T) { askAgreesWithOracle(t, true) })
	t.Run("selection", func(t *testing.T) { askAgreesWithOracle(t, false) })
}

func askAgreesWithOracle(t *testing.T, ordered bool) {
	cache.MarkPassesEvery(t, 5) // offsets walk from a pass's marks
	cache.ReadRunsOf(t, 3)      // sorts by one key descending read long runs forwards
	if !ordered {
		cache.AnswerNarrowFromSelection(t)
	}
	f := cachetest.Start(t, cachetest.PodSpec())
	r := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	now := time.Now().Truncate(time.Second)
	namespaces := []string{"qa", "qb", "qc"}
	var pods []oraclePod
	made := 0
	randomPod := func() oraclePod {
		made++
		p := oraclePod{ns: namespaces[r.IntN(3)], name: fmt.Sprintf("%c%c-%d", 'a'+r.IntN(6), 'a'+r.IntN(6), made),
			created: now.Add(-time.Duration(r.IntN(100*60)) * time.Minute), phase: phases[r.IntN(4)]}
		if r.IntN(5) > 0 {
			p.node = fmt.Sprint("n", r.IntN(4))
		}
		if r.IntN(3) > 0 {
			p.app = []string{"web", "db", "x", "cache"}[r.IntN(4)]
		}
		for range 1 + r.IntN(2) {
			p.restarts = append(p.restarts, r.IntN(5))
		}
		return p
	}
	for range 300 {
		p := randomPod()
		pods = append(pods, p)
		if err := f.Sim.Apply("pods", p.json()); err != nil {
			t.Fatal(err)
		}
	}
	scope := cache.ListQuery{Namespaces: namespaces}
	cachetest.Eventually(t, "the pods are cached", func() bool { return len(cachetest.State(t, f.Cache, "pods", scope)) == len(pods) })
	sc := query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
	// churn creates, changes and deletes a few pods, and waits until the
	// cache has every change.
	events := func() int64 {
		st, err := f.Cache.ResourceStatus("pods")
		if err != nil {
			t.Fatal(err)
		}
		return st.Events.Added + st.Events.Modified + st.Events.Deleted
	}
	churn := func() {
		before := cachetest.State(t, f.Cache, "pods", scope)
		changed := map[string]bool{}
		n := 1 + r.IntN(6)
		seen := events()
		for range n {
			i := r.IntN(len(pods))
			switch r.IntN(3) {
			case 0:
				if err := f.Sim.Delete("pods", pods[i].ns, pods[i].name); err != nil {
					t.Fatal(err)
				}
				delete(changed, pods[i].key())
				pods = slices.Delete(pods, i, i+1)
				continue
			case 1:
				p := randomPod()
				p.ns, p.name, p.created = pods[i].ns, pods[i].name, pods[i].created
				pods[i] = p
			default:
				pods = append(pods, randomPod())
				i = len(pods) - 1
			}
			if err := f.Sim.Apply("pods", pods[i].json()); err != nil {
				t.Fatal(err)
			}
			changed[pods[i].key()] = true
		}
		// The store has an event before the handler has applied it to the
		// ordered indexes; the handler counts it after.
		cachetest.Eventually(t, "the changes are cached", func() bool {
			st := cachetest.State(t, f.Cache, "pods", scope)
			if len(st) != len(pods) || events() < seen+int64(n) {
				return false
			}
			for _, p := range pods {
				if rv, ok := st[p.key()]; !ok || changed[p.key()] && rv == before[p.key()] {
					return false
				}
			}
			return true
		})
		if err := f.Cache.CheckOrderedIndexes("pods"); err != nil {
			t.Fatalf("after the changes: %v", err)
		}
	}

	for round := range 100 {
		if r.IntN(3) == 0 {
			churn()
		}
		var params []string
		var clauses [][]oracleTerm
		for range r.IntN(3) {
			var c []oracleTerm
			var texts []string
			for range 1 + r.IntN(2) {
				term := randomTerm(r, now)
				c, texts = append(c, term), append(texts, term.text)
			}
			clauses, params = append(clauses, c), append(params, strings.Join(texts, ","))
		}
		var keys []oracleSort
		var sortTexts []string
		for range r.IntN(3) {
			k := oracleSorts[r.IntN(len(oracleSorts))]
			k.desc = r.IntN(2) == 0
			keys = append(keys, k)
			sortTexts = append(sortTexts, map[bool]string{true: "-"}[k.desc]+k.text)
		}
		var expect []string
		matches := slices.DeleteFunc(slices.Clone(pods), func(p oraclePod) bool {
			for _, c := range clauses {
				if !slices.ContainsFunc(c, func(term oracleTerm) bool { return term.ok(p) }) {
					return true
				}
			}
			return false
		})
		slices.SortFunc(matches, oracleOrder(keys))
		for _, p := range matches {
			expect = append(expect, p.key())
		}

		flt, err := sc.ParseFilter(params, now)
		if err != nil {
			t.Fatal(err)
		}
		sortKeys, err := sc.ParseSort(strings.Join(sortTexts, ","))
		if err != nil {
			t.Fatal(err)
		}
		ask := &cache.Ask{Schema: sc, Filter: flt, Sort: sortKeys, SortText: strings.Join(sortTexts, ","), Now: now}
		limit := 10 + r.IntN(60)
		var got []string
		q := cache.ListQuery{Namespaces: namespaces, Limit: limit, Ask: ask}
		if r.IntN(4) == 0 { // one namespace: answered from the selection
			ns := namespaces[r.IntN(3)]
			q.Namespaces = []string{ns}
			expect = slices.DeleteFunc(expect, func(k string) bool { return !strings.HasPrefix(k, ns+"/") })
		}
		for pages := 0; ; pages++ {
			res, err := f.Cache.List("pods", q)
			if err != nil {
				t.Fatalf("round %d, filter %q sort %q: %v", round, params, ask.SortText, err)
			}
			if res.Total != len(expect) {
				t.Fatalf("round %d, filter %q sort %q: total %d; expect %d", round, params, ask.SortText, res.Total, len(expect))
			}
			for _, o := range res.Items {
				got = append(got, o.Key())
			}
			if res.Continue == "" || pages > len(pods) {
				break
			}
			q.Continue = res.Continue
			if r.IntN(4) == 0 {
				churn() // the walk goes on as of its first page
			}
		}
		if !slices.Equal(got, expect) {
			t.Fatalf("round %d, filter %q sort %q limit %d:\n got    %v\n expect %v", round, params, ask.SortText, limit, got, expect)
		}
		// An offset is the same walk, starting later (over the pods as
		// they are now, which the churn may have changed): the first
		// page's pass, remembered and moved by the changes since.
		if r.IntN(2) == 0 {
			churn()
		}
		matches = slices.DeleteFunc(slices.Clone(pods), func(p oraclePod) bool {
			for _, c := range clauses {
				if !slices.ContainsFunc(c, func(term oracleTerm) bool { return term.ok(p) }) {
					return true
				}
			}
			return false
		})
		slices.SortFunc(matches, oracleOrder(keys))
		expect = expect[:0]
		for _, p := range matches {
			expect = append(expect, p.key())
		}
		off := r.IntN(len(expect) + 2)
		ask.Offset = off
		res, err := f.Cache.List("pods", cache.ListQuery{Namespaces: namespaces, Limit: limit, Ask: ask})
		if err != nil {
			t.Fatal(err)
		}
		want := expect[min(off, len(expect)):]
		want = want[:min(limit, len(want))]
		var page []string
		for _, o := range res.Items {
			page = append(page, o.Key())
		}
		if !slices.Equal(page, want) {
			t.Fatalf("round %d offset %d (filter %q sort %q): got %v; expect %v", round, off, params, ask.SortText, page, want)
		}
		// Counts under the same filter, grouped by phase and node.
		groupBy, _ := sc.ParseKeys("groupBy", "status.phase,spec.nodeName", 2, false)
		counts, err := f.Cache.Count("pods", cache.ListQuery{Namespaces: namespaces, Ask: &cache.Ask{Schema: sc, Filter: flt, Now: now}}, groupBy)
		if err != nil {
			t.Fatal(err)
		}
		expectGroups := map[string]int{}
		for _, p := range matches {
			expectGroups[p.phase+"|"+p.node]++
		}
		gotGroups := map[string]int{}
		for _, g := range counts.Groups {
			gotGroups[g.Values[0].String()+"|"+g.Values[1].String()] += g.Count
		}
		if counts.Total != len(matches) || fmt.Sprint(gotGroups) != fmt.Sprint(expectGroups) {
			t.Fatalf("round %d counts: %d %v; expect %d %v", round, counts.Total, gotGroups, len(matches), expectGroups)
		}
		// Counts of every pod: the same question each round, answered
		// again after the churns as the pods are now.
		all, err := f.Cache.Count("pods", cache.ListQuery{Namespaces: namespaces, Ask: &cache.Ask{Schema: sc, Now: now}}, groupBy)
		if err != nil {
			t.Fatal(err)
		}
		clear(expectGroups)
		for _, p := range pods {
			expectGroups[p.phase+"|"+p.node]++
		}
		clear(gotGroups)
		for _, g := range all.Groups {
			gotGroups[g.Values[0].String()+"|"+g.Values[1].String()] += g.Count
		}
		if all.Total != len(pods) || fmt.Sprint(gotGroups) != fmt.Sprint(expectGroups) {
			t.Fatalf("round %d counts of every pod: %d %v; expect %d %v", round, all.Total, gotGroups, len(pods), expectGroups)
		}
	}
	if got := f.Cache.OrderedIndexes("pods"); ordered != (len(got) > 0) {
		t.Fatalf("ordered indexes %q", got)
	}
}

// TestContinueTokensKeepTheirQuestion: a token made under one sort, or
// for a plain list, is refused for another, and offset goes with the
// first page only.
func TestContinueTokensKeepTheirQuestion(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	sc := query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
	byName, _ := sc.ParseSort("name")
	plain, err := f.Cache.List("pods", cache.ListQuery{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	sorted, err := f.Cache.List("pods", cache.ListQuery{Limit: 2, Ask: &cache.Ask{Schema: sc, Sort: byName, SortText: "name"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		q    cache.ListQuery
	}{
		{"a plain token under a sort", cache.ListQuery{Continue: plain.Continue, Ask: &cache.Ask{Schema: sc, Sort: byName, SortText: "name"}}},
		{"a sorted token on a plain list", cache.ListQuery{Continue: sorted.Continue}},
		{"a sorted token under another sort", cache.ListQuery{Continue: sorted.Continue, Ask: &cache.Ask{Schema: sc, SortText: ""}}},
		{"an offset with a token", cache.ListQuery{Continue: sorted.Continue, Ask: &cache.Ask{Schema: sc, Sort: byName, SortText: "name", Offset: 1}}},
		// another process's token (no walk), its sort's values forged: an
		// ordered index compares as many values as its sort has
		{"a token without its sort value", cache.ListQuery{Continue: forgeValues(t, sorted.Continue), Ask: &cache.Ask{Schema: sc, Sort: byName, SortText: "name"}}},
		{"a token with two sort values", cache.ListQuery{Continue: forgeValues(t, sorted.Continue, "a", "b"), Ask: &cache.Ask{Schema: sc, Sort: byName, SortText: "name"}}},
	} {
		if _, err := f.Cache.List("pods", tc.q); err == nil || !strings.Contains(err.Error(), "continue token") && !strings.Contains(err.Error(), "offset") {
			t.Errorf("%s: %v; expect a refusal", tc.name, err)
		}
	}
}

// forgeValues is tok without its walk (as another process reads it),
// carrying these sort values instead of its own.
func forgeValues(t *testing.T, tok string, values ...string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["v"]; !ok {
		t.Fatalf("token %s carries no sort values", raw)
	}
	delete(m, "w")
	m["v"] = values
	if len(values) == 0 {
		delete(m, "v")
	}
	raw, _ = json.Marshal(m)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// TestAWalkIsOneMoment: once a question's first page is answered, its
// later pages are of the answer as it was then, whatever changes: an
// object deleted is still seen (as it was), one created is not, one whose
// sort value changed keeps its place and its bytes; and the total stays.
// Once with the namespace as the selection (the walk keeps its rows),
// once with a filter on it (answered from an ordered index: the walk
// keeps its snapshot).
func TestAWalkIsOneMoment(t *testing.T) {
	t.Run("selection", func(t *testing.T) { walkIsOneMoment(t, false) })
	t.Run("ordered-index", func(t *testing.T) { walkIsOneMoment(t, true) })
}

func walkIsOneMoment(t *testing.T, ordered bool) {
	if !ordered {
		cache.AnswerNarrowFromSelection(t)
	}
	f := cachetest.Start(t, cachetest.PodSpec())
	now := time.Now().Truncate(time.Second)
	var pods []oraclePod
	for i := range 30 {
		p := oraclePod{ns: "walk", name: fmt.Sprintf("p-%02d", i), created: now.Add(-time.Hour), phase: "Running", restarts: []int{i % 7}}
		pods = append(pods, p)
		if err := f.Sim.Apply("pods", p.json()); err != nil {
			t.Fatal(err)
		}
	}
	scope := cache.ListQuery{Namespace: "walk"}
	cachetest.Eventually(t, "the pods are cached", func() bool { return len(cachetest.State(t, f.Cache, "pods", scope)) == len(pods) })
	sc := query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
	keys, _ := sc.ParseSort("-restarts")
	ask := &cache.Ask{Schema: sc, Sort: keys, SortText: "-restarts", Now: now}
	sel := cache.ListQuery{Namespace: "walk", Limit: 7, Ask: ask}
	if ordered {
		flt, err := sc.ParseFilter([]string{"namespace=walk"}, now)
		if err != nil {
			t.Fatal(err)
		}
		ask.Filter, ask.FilterText = flt, "namespace=walk"
		sel.Namespace = ""
	}
	expect := slices.Clone(pods)
	slices.SortFunc(expect, oracleOrder([]oracleSort{{text: "restarts", desc: true, val: oracleSorts[0].val}}))

	q := sel
	first, err := f.Cache.List("pods", q)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{} // key → resourceVersion as first seen
	got := []string{}
	for _, o := range first.Items {
		got = append(got, o.Key())
		seen[o.Key()] = o.ResourceVersion()
	}
	// Change the cluster under the walk: delete a pod not yet returned,
	// create one that would come first, move one to the front.
	last := expect[len(expect)-1]
	before := cachetest.State(t, f.Cache, "pods", scope)
	if err := f.Sim.Delete("pods", last.ns, last.name); err != nil {
		t.Fatal(err)
	}
	fresh := oraclePod{ns: "walk", name: "p-new", created: now, phase: "Running", restarts: []int{100}}
	if err := f.Sim.Apply("pods", fresh.json()); err != nil {
		t.Fatal(err)
	}
	moved := expect[len(expect)-2]
	moved.restarts = []int{99}
	if err := f.Sim.Apply("pods", moved.json()); err != nil {
		t.Fatal(err)
	}
	cachetest.Eventually(t, "the changes are cached", func() bool {
		st := cachetest.State(t, f.Cache, "pods", scope)
		_, gone := st[last.key()]
		_, added := st[fresh.key()]
		return !gone && added && st[moved.key()] != before[moved.key()]
	})
	q.Continue = first.Continue
	for q.Continue != "" {
		res, err := f.Cache.List("pods", q)
		if err != nil {
			t.Fatal(err)
		}
		if res.Total != len(pods) {
			t.Fatalf("a later page's total %d; expect the first page's %d", res.Total, len(pods))
		}
		for _, o := range res.Items {
			got = append(got, o.Key())
			if o.Key() == moved.key() && o.ResourceVersion() != before[moved.key()] {
				t.Errorf("%s is seen as it is now, not as it was at the first page", o.Key())
			}
		}
		q.Continue = res.Continue
	}
	var want []string
	for _, p := range expect {
		want = append(want, p.key())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the walk saw\n %v\nexpect\n %v", got, want)
	}
	if got := f.Cache.OrderedIndexes("pods"); ordered != (len(got) > 0) {
		t.Errorf("ordered indexes %q", got)
	}
	// A new walk sees the cluster as it is now (the ordered index takes an
	// event just after the store does, so wait for it).
	sel.Limit, sel.Continue = 2, ""
	var res cache.ListResult
	cachetest.Eventually(t, "a new walk sees the changes", func() bool {
		res, err = f.Cache.List("pods", sel)
		return err == nil && len(res.Items) == 2 && res.Items[0].Key() == fresh.key() && res.Items[1].Key() == moved.key()
	})
}
