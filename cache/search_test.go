package cache_test

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// searchObj is an object the search tests create, and the facts the
// oracle reads from it, never from its JSON.
type searchObj struct {
	resource, ns, name string
	labels             map[string]string
	ips                []string // a pod's podIPs, a Service's clusterIPs
}

func (o searchObj) json() []byte {
	md := map[string]any{"name": o.name, "namespace": o.ns, "uid": "uid-" + o.resource + "-" + o.ns + "-" + o.name}
	if len(o.labels) > 0 {
		md["labels"] = o.labels
	}
	obj := map[string]any{"apiVersion": "v1", "metadata": md}
	switch o.resource {
	case "pods":
		var ips []map[string]string
		for _, ip := range o.ips {
			ips = append(ips, map[string]string{"ip": ip})
		}
		obj["kind"] = "Pod"
		obj["spec"] = map[string]any{"containers": []any{map[string]any{"name": "c", "image": "img"}}}
		status := map[string]any{"phase": "Running"}
		if len(ips) > 0 {
			status["podIP"], status["podIPs"] = o.ips[0], ips
		}
		obj["status"] = status
	case "services":
		obj["kind"] = "Service"
		spec := map[string]any{"ports": []any{map[string]any{"port": 80}}}
		if len(o.ips) > 0 {
			spec["clusterIP"], spec["clusterIPs"] = o.ips[0], o.ips
		}
		obj["spec"] = spec
	}
	b, _ := json.Marshal(obj)
	return b
}

// hitText is a hit as the tests compare them.
func hitText(h cache.SearchHit) string {
	return fmt.Sprintf("%s %s/%s %s %s %s=%s", h.Rank, h.Object.Namespace(), h.Object.Name(), h.Resource.Name, h.Match, h.Key, h.Value)
}

// oracleSearch is the search docs/query.md describes, written plainly
// over the facts of the objects.
func oracleSearch(objs []searchObj, text string) []string {
	q := strings.ToLower(strings.TrimSpace(text))
	addr, err := netip.ParseAddr(strings.TrimSpace(text))
	isAddr := err == nil
	type hit struct {
		rank, match   int
		key, value    string
		obj           searchObj
		res, ns, name string
	}
	rank := func(s string) (int, bool) {
		s = strings.ToLower(s)
		switch {
		case s == q:
			return 0, true
		case strings.HasPrefix(s, q):
			return 1, true
		case strings.Contains(s, q):
			return 2, true
		}
		return 0, false
	}
	better := func(a, b hit) bool {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.match, b.match), strings.Compare(a.key, b.key), strings.Compare(a.value, b.value)) < 0
	}
	var hits []hit
	for _, o := range objs {
		var best *hit
		offer := func(h hit) {
			if best == nil || better(h, *best) {
				best = &h
			}
		}
		if r, ok := rank(o.name); ok {
			offer(hit{rank: r, match: 0, key: "metadata.name", value: o.name})
		}
		key := map[string]string{"pods": "status.podIPs", "services": "spec.clusterIPs"}[o.resource]
		for _, ip := range o.ips {
			norm := netip.MustParseAddr(ip).String()
			if isAddr {
				if norm == addr.Unmap().String() {
					offer(hit{rank: 0, match: 1, key: key, value: norm})
				}
			} else if r, ok := rank(norm); ok {
				offer(hit{rank: r, match: 1, key: key, value: norm})
			}
		}
		for k, v := range o.labels {
			if r, ok := rank(v); ok {
				offer(hit{rank: r, match: 2, key: "metadata.labels." + strings.ReplaceAll(k, ".", `\.`), value: v})
			}
		}
		if best != nil {
			best.res, best.ns, best.name = o.resource, o.ns, o.name
			hits = append(hits, *best)
		}
	}
	slices.SortFunc(hits, func(a, b hit) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), strings.Compare(a.res, b.res), strings.Compare(a.ns, b.ns), strings.Compare(a.name, b.name))
	})
	var out []string
	for _, h := range hits {
		out = append(out, fmt.Sprintf("%s %s/%s %s %s %s=%s", cache.SearchRank(h.rank), h.ns, h.name, h.res,
			cache.SearchMatch(h.match), h.key, h.value))
	}
	return out
}

// searchAll walks every page of q and returns the hits, checking that
// every page gives the same total.
func searchAll(t *testing.T, c *cache.Cache, q cache.SearchQuery) ([]string, int) {
	t.Helper()
	var got []string
	total := -1
	for pages := 0; ; pages++ {
		res, err := c.Search(q)
		if err != nil {
			t.Fatalf("search %q: %v", q.Text, err)
		}
		if total >= 0 && res.Total != total {
			t.Fatalf("search %q: total %d on page %d, %d before", q.Text, res.Total, pages, total)
		}
		total = res.Total
		for _, h := range res.Hits {
			got = append(got, hitText(h))
		}
		if res.Continue == "" || pages > 10_000 {
			return got, total
		}
		q.Continue = res.Continue
	}
}

var searchNamespaces = []string{"sa", "sb", "sc"}

// searchScope confines a search to the test's namespaces (the demo
// cluster has objects of its own elsewhere).
func searchScope(resources ...string) []cache.SearchTarget {
	var out []cache.SearchTarget
	for _, r := range resources {
		out = append(out, cache.SearchTarget{Resource: r, Namespaces: searchNamespaces})
	}
	return out
}

func applyAll(t *testing.T, f *cachetest.Fixture, objs []searchObj) {
	t.Helper()
	for _, o := range objs {
		if err := f.Sim.Apply(o.resource, o.json()); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []string{"pods", "services"} {
		want := 0
		for _, o := range objs {
			if o.resource == r {
				want++
			}
		}
		cachetest.Eventually(t, r+" are cached", func() bool {
			return len(cachetest.State(t, f.Cache, r, cache.ListQuery{Namespaces: searchNamespaces})) == want
		})
	}
}

// TestSearchRanks: exact before prefix before substring, then by
// resource, namespace and name; each object once, by its best match.
func TestSearchRanks(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	objs := []searchObj{
		{resource: "pods", ns: "sa", name: "web", ips: []string{"10.9.0.1"}},
		{resource: "pods", ns: "sb", name: "web-1", labels: map[string]string{"app": "web"}},
		{resource: "pods", ns: "sa", name: "my-web", labels: map[string]string{"tier": "WebFront"}},
		{resource: "pods", ns: "sa", name: "db", labels: map[string]string{"app.kubernetes.io/name": "web"}},
		{resource: "pods", ns: "sa", name: "other", labels: map[string]string{"app": "cobweb"}},
		{resource: "pods", ns: "sa", name: "none", labels: map[string]string{"web": "x"}},
		{resource: "services", ns: "sa", name: "web", ips: []string{"10.9.0.10"}},
		{resource: "services", ns: "sc", name: "frontend", ips: []string{"10.9.0.1"}},
	}
	applyAll(t, f, objs)
	for _, tc := range []struct {
		text   string
		expect []string
	}{
		{"WEB", []string{
			`exact sa/db pods label metadata.labels.app\.kubernetes\.io/name=web`,
			"exact sa/web pods name metadata.name=web",
			"exact sb/web-1 pods label metadata.labels.app=web", // the name is a prefix, the label exact: the best
			"exact sa/web services name metadata.name=web",
			"prefix sa/my-web pods label metadata.labels.tier=WebFront",
			"substring sa/other pods label metadata.labels.app=cobweb",
		}},
		{"10.9.0.1", []string{ // a whole address: equal addresses only, not 10.9.0.10
			"exact sa/web pods ip status.podIPs=10.9.0.1",
			"exact sc/frontend services ip spec.clusterIPs=10.9.0.1",
		}},
		{"10.9.0", []string{ // a fragment: addresses by their spelling
			"prefix sa/web pods ip status.podIPs=10.9.0.1",
			"prefix sa/web services ip spec.clusterIPs=10.9.0.10",
			"prefix sc/frontend services ip spec.clusterIPs=10.9.0.1",
		}},
	} {
		got, total := searchAll(t, f.Cache, cache.SearchQuery{Text: tc.text, Targets: searchScope("pods", "services"), Limit: 2})
		expect := oracleSearch(objs, tc.text)
		if !slices.Equal(got, expect) || total != len(expect) {
			t.Errorf("search %q:\n got %q (total %d)\n oracle %q", tc.text, got, total, expect)
		}
		if !slices.Equal(got, tc.expect) {
			t.Errorf("search %q:\n got %q\n expect %q", tc.text, got, tc.expect)
		}
	}
}

// TestSearchAgreesWithAnOracle: random pods and Services with random
// names, labels and addresses; random texts (fragments of names, labels
// and addresses, whole addresses, in any case), paged with random
// limits: the pages, joined, are what a plain search over the facts
// gives, and every page gives their number.
func TestSearchAgreesWithAnOracle(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	r := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
	words := []string{"web", "db", "api", "cache", "Web", "front", "a", "e1"}
	word := func() string { return words[r.IntN(len(words))] }
	ip := func() string {
		if r.IntN(4) == 0 {
			return fmt.Sprintf("fd00::%x", r.IntN(40))
		}
		return fmt.Sprintf("10.%d.%d.%d", r.IntN(2), r.IntN(3), r.IntN(30))
	}
	var objs []searchObj
	for i := range 250 {
		o := searchObj{resource: []string{"pods", "services"}[r.IntN(2)], ns: searchNamespaces[r.IntN(3)],
			name: fmt.Sprintf("%s-%s-%d", strings.ToLower(word()), strings.ToLower(word()), i)}
		if r.IntN(3) > 0 {
			o.labels = map[string]string{}
			for range 1 + r.IntN(3) {
				o.labels[[]string{"app", "tier", "app.kubernetes.io/name", "x"}[r.IntN(4)]] = word() + []string{"", "-1", "10.1"}[r.IntN(3)]
			}
		}
		if r.IntN(4) > 0 {
			o.ips = append(o.ips, ip())
			if o.resource == "pods" && r.IntN(3) == 0 && !strings.Contains(o.ips[0], ":") {
				o.ips = append(o.ips, fmt.Sprintf("fd00::%x", r.IntN(40)))
			}
		}
		objs = append(objs, o)
	}
	applyAll(t, f, objs)
	fragment := func(s string) string {
		i := r.IntN(len(s))
		j := i + 1 + r.IntN(len(s)-i)
		return s[i:j]
	}
	for round := range 150 {
		o := objs[r.IntN(len(objs))]
		var text string
		switch k := r.IntN(6); {
		case k == 0:
			text = fragment(o.name)
		case k == 1 && len(o.labels) > 0:
			for _, v := range o.labels {
				text = strings.ToUpper(fragment(v))
			}
		case k == 2 && len(o.ips) > 0:
			text = o.ips[0] // a whole address
		case k == 3 && len(o.ips) > 0:
			text = fragment(o.ips[len(o.ips)-1])
		case k == 4:
			text = " " + word() + " "
		default:
			text = ip()
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		expect := oracleSearch(objs, text)
		got, total := searchAll(t, f.Cache, cache.SearchQuery{Text: text, Targets: searchScope("pods", "services"), Limit: 1 + r.IntN(40)})
		if total != len(expect) || !slices.Equal(got, expect) {
			t.Fatalf("round %d, search %q:\n got %d %q\n oracle %d %q", round, text, total, got, len(expect), expect)
		}
	}
}

// TestSearchWalkIsOneMoment: objects deleted and created between pages
// change nothing of a walk; its total stays; a token is refused for
// another search, and another replica's token resumes after its place.
func TestSearchWalkIsOneMoment(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	var objs []searchObj
	for i := range 30 {
		objs = append(objs, searchObj{resource: "pods", ns: searchNamespaces[i%3], name: fmt.Sprintf("walk-%02d", i)})
	}
	applyAll(t, f, objs)
	q := cache.SearchQuery{Text: "walk", Targets: searchScope("pods"), Limit: 10}
	first, err := f.Cache.Search(q)
	if err != nil {
		t.Fatal(err)
	}
	expect := oracleSearch(objs, "walk")
	if first.Total != 30 || first.Remaining != 20 || first.Continue == "" {
		t.Fatalf("first page: total %d, remaining %d, continue %q", first.Total, first.Remaining, first.Continue)
	}
	if err := f.Sim.Delete("pods", objs[29].ns, objs[29].name); err != nil {
		t.Fatal(err)
	}
	late := searchObj{resource: "pods", ns: "sa", name: "walk-late"}
	if err := f.Sim.Apply("pods", late.json()); err != nil {
		t.Fatal(err)
	}
	cachetest.Eventually(t, "the changes are cached", func() bool {
		s := cachetest.State(t, f.Cache, "pods", cache.ListQuery{Namespaces: searchNamespaces})
		_, gone := s[objs[29].ns+"/"+objs[29].name]
		_, there := s["sa/walk-late"]
		return !gone && there
	})
	got := []string{}
	for _, h := range first.Hits {
		got = append(got, hitText(h))
	}
	q.Continue = first.Continue
	rest, total := searchAll(t, f.Cache, q)
	if got = append(got, rest...); !slices.Equal(got, expect) || total != 30 {
		t.Fatalf("the walk changed under it:\n got %q (total %d)\n expect %q", got, total, expect)
	}

	other := q
	other.Text = "walk-"
	if _, err := f.Cache.Search(other); !errors.Is(err, cache.ErrInvalid) {
		t.Errorf("a token of another text: %v; expect ErrInvalid", err)
	}
	narrower := q
	narrower.Targets = []cache.SearchTarget{{Resource: "pods", Namespaces: []string{"sa"}}}
	if _, err := f.Cache.Search(narrower); !errors.Is(err, cache.ErrInvalid) {
		t.Errorf("a token of a caller who may read more: %v; expect ErrInvalid", err)
	}

	// Another process: the same search there resumes after the token's
	// place in its live cache (the late pod is in, the deleted one out).
	g := cachetest.Start(t, cachetest.DefaultSpecs()...)
	now := append(slices.Clone(objs[:29]), late)
	applyAll(t, g, now)
	rest, _ = searchAll(t, g.Cache, q)
	var tail []string
	for _, h := range oracleSearch(now, "walk") {
		if h > got[9] {
			tail = append(tail, h)
		}
	}
	if !slices.Equal(rest, tail) {
		t.Errorf("another replica resumed with %q; expect %q", rest, tail)
	}
}

// TestSearchScopesAndErrors: namespaces confine each resource; a
// namespace leaves cluster-scoped resources out; bad input is ErrInvalid
// or ErrUnknownResource, never an empty answer.
func TestSearchScopesAndErrors(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	objs := []searchObj{
		{resource: "pods", ns: "sa", name: "scoped-a", ips: []string{"10.77.0.1"}},
		{resource: "pods", ns: "sb", name: "scoped-b", ips: []string{"10.77.0.1"}},
		{resource: "services", ns: "sb", name: "scoped-svc", ips: []string{"10.77.0.1"}},
	}
	applyAll(t, f, objs)
	for _, tc := range []struct {
		name    string
		q       cache.SearchQuery
		expect  []string
		wantErr error
	}{
		{"namespaces per resource", cache.SearchQuery{Text: "scoped", Targets: []cache.SearchTarget{
			{Resource: "pods", Namespaces: []string{"sa"}}, {Resource: "services", Namespaces: []string{}}}},
			[]string{"prefix sa/scoped-a pods name metadata.name=scoped-a"}, nil},
		{"an address through the owner table, confined", cache.SearchQuery{Text: "10.77.0.1", Targets: []cache.SearchTarget{
			{Resource: "pods", Namespaces: []string{"sb"}}, {Resource: "services", Namespaces: []string{"sa"}}}},
			[]string{"exact sb/scoped-b pods ip status.podIPs=10.77.0.1"}, nil},
		{"a namespace", cache.SearchQuery{Text: "10.77.0.1", Namespace: "sb"},
			[]string{"exact sb/scoped-b pods ip status.podIPs=10.77.0.1", "exact sb/scoped-svc services ip spec.clusterIPs=10.77.0.1"}, nil},
		{"no target", cache.SearchQuery{Text: "scoped", Targets: []cache.SearchTarget{}}, nil, nil},
		{"empty", cache.SearchQuery{Text: "  "}, nil, cache.ErrInvalid},
		{"too long", cache.SearchQuery{Text: strings.Repeat("a", cache.MaxSearchText+1)}, nil, cache.ErrInvalid},
		{"unknown resource", cache.SearchQuery{Text: "a", Targets: []cache.SearchTarget{{Resource: "nope"}}}, nil, cache.ErrUnknownResource},
		{"twice", cache.SearchQuery{Text: "a", Targets: []cache.SearchTarget{{Resource: "pods"}, {Resource: "PODS"}}}, nil, cache.ErrInvalid},
		{"bad namespace", cache.SearchQuery{Text: "a", Namespace: "Not_A_Name"}, nil, cache.ErrInvalid},
		{"bad token", cache.SearchQuery{Text: "a", Continue: "!!"}, nil, cache.ErrInvalid},
	} {
		res, err := f.Cache.Search(tc.q)
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%s: %v; expect %v", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, h := range res.Hits {
			got = append(got, hitText(h))
		}
		if !slices.Equal(got, tc.expect) || res.Total != len(tc.expect) {
			t.Errorf("%s: got %q (total %d); expect %q", tc.name, got, res.Total, tc.expect)
		}
	}
}
