package cache_test

import (
	"encoding/json"
	"errors"
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

// windowClient is what a dashboard does with a window's messages, written
// from docs/streams.md: it holds rows, total and counts.
type windowClient struct {
	rows   []json.RawMessage
	offset int
	total  int
	counts json.RawMessage
	resume string
	types  []string
}

type windowMessage struct {
	Type   string            `json:"type"`
	Offset int               `json:"offset"`
	Total  int               `json:"total"`
	Rows   []json.RawMessage `json:"rows"`
	Ops    []struct {
		Op   string          `json:"op"`
		At   *int            `json:"at"`
		From *int            `json:"from"`
		To   *int            `json:"to"`
		Row  json.RawMessage `json:"row"`
	} `json:"ops"`
	Counts json.RawMessage `json:"counts"`
	Resume string          `json:"resume"`
	Reason string          `json:"reason"`
}

func (c *windowClient) apply(raw []byte) error {
	var m windowMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("%v: %s", err, raw)
	}
	c.types = append(c.types, m.Type)
	in := func(i *int, n int) error {
		if i == nil || *i < 0 || *i > n {
			return fmt.Errorf("position out of range in %s", raw)
		}
		return nil
	}
	switch m.Type {
	case "WINDOW":
		c.rows, c.offset, c.counts = m.Rows, m.Offset, m.Counts
	case "WINDOW_CHANGES":
		for _, op := range m.Ops {
			switch op.Op {
			case "remove":
				if err := in(op.At, len(c.rows)-1); err != nil {
					return err
				}
				c.rows = slices.Delete(c.rows, *op.At, *op.At+1)
			case "insert":
				if err := in(op.At, len(c.rows)); err != nil {
					return err
				}
				c.rows = slices.Insert(c.rows, *op.At, op.Row)
			case "update":
				if err := in(op.At, len(c.rows)-1); err != nil {
					return err
				}
				c.rows[*op.At] = op.Row
			case "move":
				if err := in(op.From, len(c.rows)-1); err != nil {
					return err
				}
				c.rows = slices.Delete(c.rows, *op.From, *op.From+1)
				if err := in(op.To, len(c.rows)); err != nil {
					return err
				}
				c.rows = slices.Insert(c.rows, *op.To, op.Row)
			default:
				return fmt.Errorf("unknown op in %s", raw)
			}
		}
		if m.Counts != nil {
			c.counts = m.Counts
		}
	default:
		return fmt.Errorf("unexpected message %s", raw)
	}
	c.total, c.resume = m.Total, m.Resume
	return nil
}

// drain applies every message the window has now.
func (c *windowClient) drain(t testing.TB, w cache.Subscription) {
	t.Helper()
	for {
		m, ok := w.Next()
		if !ok {
			return
		}
		if m.Terminal() {
			t.Fatalf("window ended: %s", m.Reason)
		}
		var b strings.Builder
		m.WriteTo(&b)
		if err := c.apply([]byte(b.String())); err != nil {
			t.Fatal(err)
		}
	}
}

// rowIDs are the client's rows as namespace/name@resourceVersion.
func (c *windowClient) rowIDs() []string {
	out := make([]string, len(c.rows))
	for i, r := range c.rows {
		var o struct {
			Metadata struct{ Namespace, Name, ResourceVersion string }
		}
		json.Unmarshal(r, &o)
		out[i] = o.Metadata.Namespace + "/" + o.Metadata.Name + "@" + o.Metadata.ResourceVersion
	}
	return out
}

// groups are the client's counts as "phase|node" → count.
func (c *windowClient) groups() map[string]int {
	var body struct {
		Groups []struct {
			Values []any
			Count  int
		}
	}
	json.Unmarshal(c.counts, &body)
	out := map[string]int{}
	for _, g := range body.Groups {
		out[fmt.Sprint(g.Values[0])+"|"+fmt.Sprint(g.Values[1])] += g.Count
	}
	return out
}

// modelWindow is a window and what the oracle decides of it.
type modelWindow struct {
	q       cache.WindowQuery
	clauses [][]oracleTerm
	keys    []oracleSort
	w       *cache.Window
	client  windowClient
	scope   []string
}

// expect is the oracle's rows (namespace/name@resourceVersion), total and
// groups for the pods as they are (rvs: the cache's resourceVersions).
func (mw *modelWindow) expect(pods map[string]oraclePod, rvs map[string]string) ([]string, int, map[string]int) {
	var matches []oraclePod
	for _, p := range pods {
		if mw.scope != nil && !slices.Contains(mw.scope, p.ns) {
			continue
		}
		ok := true
		for _, c := range mw.clauses {
			ok = ok && slices.ContainsFunc(c, func(term oracleTerm) bool { return term.ok(p) })
		}
		if ok {
			matches = append(matches, p)
		}
	}
	slices.SortFunc(matches, oracleOrder(mw.keys))
	groups := map[string]int{}
	for _, p := range matches {
		if mw.q.GroupBy == nil {
			break // counts nothing
		}
		node := p.node
		if node == "" {
			node = "<nil>"
		}
		groups[p.phase+"|"+node]++
	}
	var rows []string
	for _, p := range matches[min(mw.q.Offset, len(matches)):min(mw.q.Offset+mw.q.Limit, len(matches))] {
		rows = append(rows, p.key()+"@"+rvs[p.key()])
	}
	return rows, len(matches), groups
}

// TestWindowsAgainstAModel: windows over random questions, under random
// adds, updates and deletes; after each batch, the rows a client builds
// from WINDOW and WINDOW_CHANGES are the page of the question recomputed
// from scratch, and its total and counts are the recomputed ones; a
// scroll, and a resume after the window closed, keep it so. Views are
// loaded from the ordered indexes of their sorts (the indexes are then
// there), or from a snapshot of the objects; windows opened while events
// flow are loaded and counted meanwhile.
func TestWindowsAgainstAModel(t *testing.T) {
	t.Run("from ordered indexes", func(t *testing.T) { testWindowsAgainstAModel(t, true) })
	t.Run("from snapshots", func(t *testing.T) {
		cache.LoadViewsFromSnapshots(t)
		testWindowsAgainstAModel(t, false)
	})
}

func testWindowsAgainstAModel(t *testing.T, indexed bool) {
	f := cachetest.Start(t, cachetest.PodSpec())
	r := rand.New(rand.NewPCG(5, uint64(time.Now().UnixNano())))
	now := time.Now().Truncate(time.Second)
	namespaces := []string{"qa", "qb", "qc"}
	pods := map[string]oraclePod{}
	next := 0
	newPod := func() oraclePod {
		next++
		p := oraclePod{ns: namespaces[r.IntN(3)], name: fmt.Sprintf("%c%c-%d", 'a'+r.IntN(6), 'a'+r.IntN(6), next),
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
	put := func(p oraclePod) {
		pods[p.key()] = p
		if err := f.Sim.Apply("pods", p.json()); err != nil {
			t.Fatal(err)
		}
	}
	for range 150 {
		put(newPod())
	}
	caughtUp := func() map[string]string {
		var rvs map[string]string
		cachetest.Eventually(t, "the cache has the pods", func() bool {
			// The position first: the store has every event the broker has.
			pos, err := f.Cache.Position("pods")
			var simRV uint64
			fmt.Sscan(f.Sim.ResourceVersion(), &simRV)
			if err != nil || pos < simRV {
				return false
			}
			rvs = cachetest.State(t, f.Cache, "pods", cache.ListQuery{Namespaces: namespaces})
			if len(rvs) != len(pods) {
				return false
			}
			for k := range pods {
				if _, ok := rvs[k]; !ok {
					return false
				}
			}
			return true
		})
		return rvs
	}
	caughtUp()

	sc := query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
	groupBy, err := sc.ParseKeys("groupBy", "status.phase,spec.nodeName", 2, false)
	if err != nil {
		t.Fatal(err)
	}
	fields, err := query.ParseFields("status.phase")
	if err != nil {
		t.Fatal(err)
	}
	var windows []*modelWindow
	open := func(i int) *modelWindow {
		mw := &modelWindow{}
		var params []string
		for range r.IntN(3) {
			var texts []string
			var c []oracleTerm
			for len(c) < 1+r.IntN(2) {
				term := randomTerm(r, now)
				if strings.HasPrefix(term.text, "age") {
					continue // refused by windows (TestWindowRefusesKeysThatMoveWithTime)
				}
				c, texts = append(c, term), append(texts, term.text)
			}
			mw.clauses, params = append(mw.clauses, c), append(params, strings.Join(texts, ","))
		}
		var sortTexts []string
		for range r.IntN(3) {
			k := oracleSorts[r.IntN(len(oracleSorts))]
			k.desc = r.IntN(2) == 0
			mw.keys = append(mw.keys, k)
			sortTexts = append(sortTexts, map[bool]string{true: "-"}[k.desc]+k.text)
		}
		flt, err := sc.ParseFilter(params, now)
		if err != nil {
			t.Fatal(err)
		}
		sortKeys, err := sc.ParseSort(strings.Join(sortTexts, ","))
		if err != nil {
			t.Fatal(err)
		}
		mw.q = cache.WindowQuery{Ask: &cache.Ask{Schema: sc, Filter: flt, Sort: sortKeys, SortText: strings.Join(sortTexts, ","),
			FilterText: strings.Join(params, "\x00"), Now: now}, Offset: r.IntN(40), Limit: 1 + r.IntN(30), GroupBy: groupBy, Rate: 50}
		if i%2 == 1 {
			mw.q.Projection, mw.q.FieldsText = fields, "status.phase"
		}
		if i%4 >= 2 {
			// Without counts: a view over most of the pods follows the
			// ordered index of its sort rather than holding its rows.
			mw.q.GroupBy = nil
		}
		mw.scope = namespaces // the demo's own pods are elsewhere
		if i%3 == 2 {
			mw.scope = []string{"qa", "qc"} // a caller who may read two of them
		}
		mw.q.Namespaces = mw.scope
		mw.w, err = f.Cache.Window("pods", mw.q, make(chan struct{}, 1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mw.w.Close)
		return mw
	}
	// loadedAsAsked: after a window's first message, an ordered index of
	// its sort (or the one it reads backwards) is there when, and only
	// when, its view was loaded from one.
	loadedAsAsked := func() {
		t.Helper()
		for i, mw := range windows {
			if has := slices.Contains(f.Cache.OrderedIndexes("pods"), cache.OrderedIndexFor(mw.q.Ask.Sort)); has != indexed {
				t.Fatalf("window %d (sort %q): an ordered index of its sort is there: %v; expect %v", i, mw.q.Ask.SortText, has, indexed)
			}
		}
	}
	for i := range 8 {
		windows = append(windows, open(i))
	}
	// Twins: windows on the same page of the same question share its
	// changes; each must still hold its own rows. Window 1 counts, 3
	// does not.
	for _, of := range []int{1, 1, 3} {
		twin := &modelWindow{q: windows[of].q, clauses: windows[of].clauses, keys: windows[of].keys, scope: windows[of].scope}
		if twin.w, err = f.Cache.Window("pods", twin.q, make(chan struct{}, 1)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(twin.w.Close)
		windows = append(windows, twin)
	}
	check := func(what string, rvs map[string]string) {
		t.Helper()
		for i, mw := range windows {
			deadline := time.Now().Add(10 * time.Second)
			for {
				// The expectation is read again each time from the cache's
				// store, which may still be taking in the last events.
				rows, total, groups := mw.expect(pods, rvs)
				mw.client.drain(t, mw.w)
				got := mw.client.rowIDs()
				if slices.Equal(got, rows) && (len(rows) > 0 || len(got) == 0) && mw.client.total == total &&
					fmt.Sprint(mw.client.groups()) == fmt.Sprint(groups) && mw.client.offset == mw.q.Offset {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: window %d (filter %q, sort %q, offset %d, limit %d):\n rows  %v\n want  %v\n total %d, want %d\n counts %v\n want   %v",
						what, i, mw.q.Ask.FilterText, mw.q.Ask.SortText, mw.q.Offset, mw.q.Limit, got, rows, mw.client.total, total, mw.client.groups(), groups)
				}
				time.Sleep(5 * time.Millisecond)
				rvs = cachetest.State(t, f.Cache, "pods", cache.ListQuery{Namespaces: namespaces})
			}
		}
	}
	check("at first", caughtUp())
	loadedAsAsked()
	keys := func() []string {
		return slices.Sorted(func(yield func(string) bool) {
			for k := range pods {
				yield(k)
			}
		})
	}
	for round := range 12 {
		for range 1 + r.IntN(25) {
			switch ks := keys(); r.IntN(4) {
			case 0:
				put(newPod())
			case 1:
				p := pods[ks[r.IntN(len(ks))]]
				if err := f.Sim.Delete("pods", p.ns, p.name); err != nil {
					t.Fatal(err)
				}
				delete(pods, p.key())
			default:
				p := pods[ks[r.IntN(len(ks))]]
				p.restarts = slices.Clone(p.restarts)
				p.restarts[0] += r.IntN(3)
				if r.IntN(3) == 0 {
					p.phase = phases[r.IntN(4)]
				}
				if r.IntN(4) == 0 {
					p.node = fmt.Sprint("n", r.IntN(4))
				}
				put(p)
			}
		}
		if round%4 == 1 {
			// Opened before the cache has the batch: loaded and counted
			// while its events arrive.
			windows = append(windows, open(len(windows)))
		}
		if round%4 == 3 {
			mw := windows[r.IntN(len(windows))]
			mw.q.Offset, mw.q.Limit = r.IntN(50), 1+r.IntN(30)
			if err := mw.w.Scroll(mw.q.Offset, mw.q.Limit); err != nil {
				t.Fatal(err)
			}
		}
		check(fmt.Sprint("round ", round), caughtUp())
	}
	loadedAsAsked()

	// firstMessage: a resumed window's first message, which may come
	// after check has seen its rows agree (the rows it kept can be right
	// already when the changes missed its page).
	firstMessage := func(mw *modelWindow) string {
		t.Helper()
		cachetest.Eventually(t, "the resumed window's first message", func() bool {
			mw.client.drain(t, mw.w)
			return len(mw.client.types) > 0
		})
		return mw.client.types[0]
	}
	// A window closed, then resumed after changes: the changes since its
	// last message, not the whole window again.
	mw := windows[0]
	mw.w.Close()
	for range 10 {
		p := newPod()
		p.restarts = []int{100 + r.IntN(100)} // first by restarts
		put(p)
	}
	mw.q.Resume = mw.client.resume
	if mw.w, err = f.Cache.Window("pods", mw.q, make(chan struct{}, 1)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mw.w.Close)
	mw.client.types = nil
	if typ := firstMessage(mw); typ != "WINDOW_CHANGES" {
		t.Errorf("a resume began with %v; expect WINDOW_CHANGES", mw.client.types)
	}
	check("after a resume", caughtUp())
	// A token of another page is answered with a WINDOW.
	mw2 := *mw
	mw2.q.Resume, mw2.q.Offset, mw2.client = mw.client.resume, mw.q.Offset+1, windowClient{}
	mw.w.Close()
	if mw2.w, err = f.Cache.Window("pods", mw2.q, make(chan struct{}, 1)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mw2.w.Close)
	windows = []*modelWindow{&mw2}
	if typ := firstMessage(&mw2); typ != "WINDOW" {
		t.Errorf("a resume of another page began with %v; expect WINDOW", mw2.client.types)
	}
	check("after a resume of another page", caughtUp())
}

// TestWindowRefusesKeysThatMoveWithTime: an age filter would go stale in
// a window kept by events; it is refused, naming the parameter.
func TestWindowRefusesKeysThatMoveWithTime(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	sc := query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
	now := time.Now()
	flt, err := sc.ParseFilter([]string{"restarts>1", "status=Running,age<1h"}, now)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Cache.Window("pods", cache.WindowQuery{Ask: &cache.Ask{Schema: sc, Filter: flt, Now: now}}, make(chan struct{}, 1))
	var qe *query.Error
	if !errors.As(err, &qe) || qe.Param != "filter" || qe.Nth != 2 || !strings.Contains(err.Error(), "age") {
		t.Errorf("an age filter: %v; expect a query.Error of filter (occurrence 2)", err)
	}
	for _, tc := range []struct {
		q    cache.WindowQuery
		want string
	}{
		{cache.WindowQuery{Ask: &cache.Ask{Schema: sc}, Limit: cache.MaxWindowLimit + 1}, "limit"},
		{cache.WindowQuery{Ask: &cache.Ask{Schema: sc}, Offset: -1}, "offset"},
		{cache.WindowQuery{}, "question"},
	} {
		if _, err := f.Cache.Window("pods", tc.q, make(chan struct{}, 1)); !errors.Is(err, cache.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; expect ErrInvalid naming %s", tc.q, err, tc.want)
		}
	}
}

// TestWindowRowsDoNotWaitForCounts: a window's counts are made apart
// from its view's rows; a window without counts has its rows meanwhile,
// one with counts waits for them, and the changes made while they were
// counted are in the counts it gets (the model's).
func TestWindowRowsDoNotWaitForCounts(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	now := time.Now().Truncate(time.Second)
	pods := map[string]oraclePod{}
	put := func(p oraclePod) {
		pods[p.key()] = p
		if err := f.Sim.Apply("pods", p.json()); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		put(oraclePod{ns: "qa", name: fmt.Sprint("p-", i), created: now.Add(-time.Hour), phase: phases[i%4], node: fmt.Sprint("n", i%3), restarts: []int{i % 7}})
	}
	state := func() map[string]string {
		var rvs map[string]string
		cachetest.Eventually(t, "the cache has the pods", func() bool {
			rvs = cachetest.State(t, f.Cache, "pods", cache.ListQuery{Namespace: "qa"})
			if len(rvs) != len(pods) {
				return false
			}
			for k := range pods {
				if _, ok := rvs[k]; !ok {
					return false
				}
			}
			return true
		})
		return rvs
	}
	state()
	sc := query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
	groupBy, err := sc.ParseKeys("groupBy", "status.phase,spec.nodeName", 2, false)
	if err != nil {
		t.Fatal(err)
	}
	sortKeys, err := sc.ParseSort("-restarts")
	if err != nil {
		t.Fatal(err)
	}
	release := cache.HoldCounts(t)
	ask := &cache.Ask{Schema: sc, Sort: sortKeys, SortText: "-restarts", Now: now}
	rows := &modelWindow{q: cache.WindowQuery{Namespaces: []string{"qa"}, Ask: ask, Limit: 10, Rate: 50},
		keys: []oracleSort{{text: "restarts", desc: true, val: oracleSorts[0].val}}, scope: []string{"qa"}}
	counted := &modelWindow{q: rows.q, keys: rows.keys, scope: rows.scope}
	counted.q.GroupBy = groupBy
	for _, mw := range []*modelWindow{rows, counted} {
		if mw.w, err = f.Cache.Window("pods", mw.q, make(chan struct{}, 1)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mw.w.Close)
	}
	cachetest.Eventually(t, "the rows window's first message", func() bool {
		rows.client.drain(t, rows.w)
		return len(rows.client.types) > 0
	})
	if counted.client.drain(t, counted.w); len(counted.client.types) > 0 {
		t.Fatalf("the window with counts sent %v before its counts were made", counted.client.types)
	}
	// Changes while the count waits: phases and nodes move, pods come and go.
	for i := range 40 {
		p := pods[fmt.Sprint("qa/p-", i)]
		switch i % 5 {
		case 0:
			if err := f.Sim.Delete("pods", p.ns, p.name); err != nil {
				t.Fatal(err)
			}
			delete(pods, p.key())
		case 1:
			p.phase, p.node = phases[(i+1)%4], ""
			put(p)
		case 2:
			p.restarts = []int{p.restarts[0] + 5}
			put(p)
		}
	}
	for i := range 5 {
		put(oraclePod{ns: "qa", name: fmt.Sprint("q-", i), created: now, phase: "Pending", node: "n9", restarts: []int{i}})
	}
	rvs := state()
	release()
	for _, mw := range []*modelWindow{rows, counted} {
		want, total, groups := mw.expect(pods, rvs)
		if mw.q.GroupBy == nil {
			groups = map[string]int{}
		}
		cachetest.Eventually(t, "the window to agree with the model", func() bool {
			mw.client.drain(t, mw.w)
			return slices.Equal(mw.client.rowIDs(), want) && mw.client.total == total && fmt.Sprint(mw.client.groups()) == fmt.Sprint(groups)
		})
	}
}
