package cache

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/query"
)

// check reports how the index differs from one built from scratch over
// objs (the store's objects): every object once, in the order
// query.CompareSorted gives, with the values its version has.
func (ix *order) check(objs []*Object) error {
	sort := strings.Join(strings.Split(ix.id, "\x00")[1:], " ")
	want := make([]orderEntry, len(objs))
	for i, o := range objs {
		want[i] = ix.entry(o)
	}
	slices.SortFunc(want, ix.compareSorted)
	ix.mu.Lock()
	got := ix.tree.Items()
	ix.mu.Unlock()
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			return fmt.Errorf("index %q: %d entries; expect %d (missing %s)", sort, len(got), len(want), want[i].o.Key())
		case i >= len(want):
			return fmt.Errorf("index %q: %d entries; expect %d (extra %s)", sort, len(got), len(want), got[i].o.Key())
		case got[i].o != want[i].o || !slices.Equal(got[i].vals(), want[i].vals()):
			return fmt.Errorf("index %q at %d: %s@%s; expect %s@%s", sort, i,
				got[i].o.Key(), got[i].o.ResourceVersion(), want[i].o.Key(), want[i].o.ResourceVersion())
		}
	}
	if err := ix.checkReversed(got); err != nil {
		return err
	}
	return ix.checkPasses()
}

// checkReversed reports how reading the index of one key backwards
// differs from its entries sorted afresh by the key in the other
// direction: in whole, and from a place in the middle of a run, one
// between runs, and the first without a value. got are its entries.
func (ix *order) checkReversed(got []orderEntry) error {
	if len(ix.keys) != 1 {
		return nil
	}
	keys := []query.SortKey{{Key: ix.keys[0].Key, Desc: !ix.keys[0].Desc}}
	w := ordering{ix: ix, reverse: true, keys: keys}
	want := slices.Clone(got)
	slices.SortFunc(want, func(a, b orderEntry) int {
		return query.CompareSorted(keys, a.vals(), b.vals(), a.o.namespace, a.o.name, b.o.namespace, b.o.name)
	})
	tilde := entryOf(&Object{name: "~"}, []query.Value{query.Missing()})
	froms := []*orderEntry{nil, &tilde}
	for i := 0; i < len(want); i += 1 + len(want)/5 {
		between := entryOf(lowest, want[i].vals()[:1])
		froms = append(froms, &want[i], &between)
	}
	for _, from := range froms {
		var read []orderEntry
		w.scan(ix.snapshot(), from, func(e orderEntry) bool {
			read = append(read, e)
			return true
		})
		exp := want
		if from != nil {
			exp = slices.DeleteFunc(slices.Clone(want), func(e orderEntry) bool { return w.compare(e, *from) < 0 })
		}
		if !slices.EqualFunc(read, exp, func(a, b orderEntry) bool { return a.o == b.o }) {
			return fmt.Errorf("index %q read backwards from %v: %d entries, not the %d of a sort by %s", strings.Join(strings.Split(ix.id, "\x00")[1:], " "), from, len(read), len(exp), query.SortText(keys))
		}
	}
	return nil
}

// checkPasses reports how a remembered pass differs from a fresh pass
// over the tree as it is: its total, the matches before each of its
// marks and after the last, its groups; and whether a gap passed its
// bound.
func (ix *order) checkPasses() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	entries := ix.tree.Items()
	for _, p := range ix.passes.kept {
		if !p.made {
			continue
		}
		total, groups := 0, map[string]int{}
		for _, e := range entries {
			if p.ask.match(e) {
				total++
				if p.counter != nil {
					groups[fmt.Sprint(e.vals()[:p.grouped])]++
				}
			}
		}
		if p.total != total {
			return fmt.Errorf("pass %q: total %d; expect %d", p.key, p.total, total)
		}
		if p.counter != nil {
			got := map[string]int{}
			for _, g := range p.counter.Groups() {
				got[fmt.Sprint(g.Values)] = g.Count
			}
			if !maps.Equal(got, groups) {
				return fmt.Errorf("pass %q: groups %v; expect %v", p.key, got, groups)
			}
			continue
		}
		before := 0
		for i, m := range p.marks {
			before += m.gap
			want := 0
			for _, e := range entries {
				if p.compare(e, m.at) < 0 && p.ask.match(e) {
					want++
				}
			}
			if before != want || m.gap > 2*markEvery {
				return fmt.Errorf("pass %q: mark %d (%s) has %d matches before it, gap %d; expect %d", p.key, i, m.at.o.Key(), before, m.gap, want)
			}
		}
		if before+p.tail != total || p.tail > 2*markEvery {
			return fmt.Errorf("pass %q: %d matches after the last mark; expect %d", p.key, p.tail, total-before)
		}
	}
	return nil
}

// orderPod is a pod with the values the indexes below sort by.
func orderPod(t testing.TB, ns, name string, rv int, r *rand.Rand) *Object {
	t.Helper()
	node := ""
	if r.IntN(4) > 0 {
		node = fmt.Sprintf(`"nodeName":"n%d",`, r.IntN(3))
	}
	raw := fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":%q,"name":%q,"resourceVersion":"%d",`+
		`"creationTimestamp":"2026-01-0%dT00:00:00Z"},"spec":{%s"containers":[{"name":"c"}]},`+
		`"status":{"phase":%q,"containerStatuses":[{"name":"c","restartCount":%d,"ready":true}]}}`,
		ns, name, rv, 1+r.IntN(5), node, []string{"Running", "Pending"}[r.IntN(2)], r.IntN(4))
	o, err := NewObject(raw, "v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// orderModel is a store, the ordered indexes the handler keeps, and
// random events between them.
type orderModel struct {
	t     *testing.T
	r     *rand.Rand
	store map[string]*Object
	os    *orders
	rv    int
}

func newOrderModel(t *testing.T) *orderModel {
	return &orderModel{t: t, r: rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano()))), store: map[string]*Object{}, os: newOrders(time.Now)}
}

func (m *orderModel) objects() []*Object { return slices.Collect(maps.Values(m.store)) }

// event makes one random add, update or delete, to the store first and
// then through the handler's path, as an informer does.
func (m *orderModel) event() {
	m.rv++
	name := fmt.Sprintf("p%d", m.r.IntN(40))
	ns := []string{"a", "b"}[m.r.IntN(2)]
	key := ns + "/" + name
	old := m.store[key]
	if old != nil && m.r.IntN(3) == 0 {
		delete(m.store, key)
		m.os.change(old, nil)
		return
	}
	cur := orderPod(m.t, ns, name, m.rv, m.r)
	m.store[key] = cur
	m.os.change(old, cur)
}

var orderSorts = []string{"", "restarts", "-restarts", "node,-age", "-status.phase,spec.nodeName", "-name", "status,-restarts"}

func podSchema() *query.Schema {
	return query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
}

// TestOrderedIndexesAgreeWithARebuild: indexes (of random sorts, holding
// random keys' values, one of them with several values) joined at random moments
// (changes arriving while one is built are applied after its listing)
// and kept through random adds, updates and deletes are, at every check,
// what a build from scratch over the store gives.
func TestOrderedIndexesAgreeWithARebuild(t *testing.T) {
	old := reverseRun
	reverseRun = 3 // long runs are read forwards from their start
	t.Cleanup(func() { reverseRun = old })
	m := newOrderModel(t)
	sc := podSchema()
	for range 60 {
		m.event()
	}
	for round := range 40 {
		text := orderSorts[m.r.IntN(len(orderSorts))]
		keys, err := sc.ParseSort(text)
		if err != nil {
			t.Fatal(err)
		}
		var held []query.Key
		for _, name := range []string{"status", "spec.nodeName", "restarts", "spec.containers.#.name", "metadata.labels.app"} {
			if m.r.IntN(3) == 0 {
				k, err := sc.Key(name)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, k)
			}
		}
		if ix, found := m.os.join(keys, text, heldKeys(nil, held), sc); !found {
			for range m.r.IntN(5) { // before the listing
				m.event()
			}
			objs := m.objects()
			for range m.r.IntN(5) { // after it: pending
				m.event()
			}
			ix.build(objs)
		}
		for range m.r.IntN(30) {
			m.event()
		}
		for _, ix := range m.os.live() {
			if err := ix.check(m.objects()); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	if n := len(m.os.live()); n == 0 || n > maxOrders {
		t.Fatalf("%d indexes live", n)
	}
}

// TestOrderCheckCatchesBreakage: the check above fails for an index that
// missed a delete, and for one whose comparator is broken; so a passing
// check means something.
func TestOrderCheckCatchesBreakage(t *testing.T) {
	sc := podSchema()
	keys, _ := sc.ParseSort("-restarts")
	build := func(m *orderModel) *order {
		ix, _ := m.os.join(keys, "-restarts", nil, sc)
		ix.build(m.objects())
		return ix
	}
	t.Run("missed delete", func(t *testing.T) {
		m := newOrderModel(t)
		for range 50 {
			m.event()
		}
		ix := build(m)
		if err := ix.check(m.objects()); err != nil {
			t.Fatal(err)
		}
		for key := range m.store {
			delete(m.store, key) // the store forgets it; the index is not told
			break
		}
		if err := ix.check(m.objects()); err == nil {
			t.Fatalf("a missed delete: %v", err)
		}
	})
	t.Run("broken comparator", func(t *testing.T) {
		m := newOrderModel(t)
		for range 50 {
			m.event()
		}
		ix, _ := m.os.join(keys, "-restarts", nil, sc)
		ix.compare = func(a, b orderEntry) int { // ascending, not descending
			return query.CompareSorted([]query.SortKey{{Key: keys[0].Key}}, a.vals(), b.vals(), a.o.namespace, a.o.name, b.o.namespace, b.o.name)
		}
		ix.build(m.objects())
		for range 20 {
			m.event()
		}
		if err := ix.check(m.objects()); err == nil {
			t.Fatal("a broken comparator passes the check")
		}
	})
}

// TestOrderCostCountsABuildOnce: a question that builds its index is
// charged the build (a column rendered per object); once the index
// exists, only its filter's reads.
func TestOrderCostCountsABuildOnce(t *testing.T) {
	os := newOrders(time.Now)
	sc := podSchema()
	keys, _ := sc.ParseSort("restarts")
	flt, err := sc.ParseFilter([]string{"status=Running"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	held := heldKeys(flt.Compile(), nil)
	if got, want := os.cost(1000, flt, keys, held, sc), 1000+1000*(1+1+renderCost(true)); got != want {
		t.Errorf("before the build: %d; expect %d", got, want)
	}
	ix, _ := os.join(keys, "restarts", held, sc)
	ix.build(nil)
	if got := os.cost(1000, flt, keys, held, sc); got != 1000 {
		t.Errorf("once built: %d; expect 1000", got)
	}
}

// TestAPinnedIndexIsKept: an index pinned (by a live window's view) is
// not dropped however long no question uses it, and is dropped last
// beyond maxOrders; unpinned, it is kept for orderIdle more, then
// dropped once idle.
func TestAPinnedIndexIsKept(t *testing.T) {
	var skew atomic.Int64
	os := newOrders(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
	sc := podSchema()
	keys, _ := sc.ParseSort("restarts")
	ix, _ := os.join(keys, "restarts", nil, sc)
	ix.build(nil)
	unpin := os.pin(ix)
	skew.Add(int64(orderIdle + time.Minute))
	os.dropIdle()
	if !os.holds(ix) {
		t.Fatal("a pinned index was dropped as idle")
	}
	for i := range maxOrders {
		other, _ := os.join(keys, fmt.Sprint("restarts#", i), nil, sc)
		other.build(nil)
	}
	if !os.holds(ix) || len(os.live()) != maxOrders {
		t.Fatalf("beyond maxOrders: pinned index kept %v, %d live", os.holds(ix), len(os.live()))
	}
	unpin()
	unpin() // once only
	if n := ix.pins.Load(); n != 0 {
		t.Fatalf("%d pins after unpin", n)
	}
	skew.Add(int64(orderIdle / 2))
	os.dropIdle()
	if !os.holds(ix) {
		t.Fatal("dropped right after it was unpinned")
	}
	skew.Add(int64(orderIdle))
	os.dropIdle()
	if os.holds(ix) {
		t.Fatal("unpinned and idle, yet kept")
	}
}
