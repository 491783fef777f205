package cache

import (
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/tidwall/btree"
	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/query"
)

// TestAColumnIndexSharesKeptValues: the entries of an index of one
// column, or one path, holding no keys are the objects' kept values
// themselves, not copies, after a build and after an update the handler
// applied; an index holding keys copies its values.
func TestAColumnIndexSharesKeptValues(t *testing.T) {
	const pods = 300
	srv := listServer(t, benchLayoutFixture(t, pods))
	c, stop := startSyncedPods(t, &rest.Config{Host: srv.URL, DisableCompression: true}, Spec{Resource: "pods"}, Options{LazyColumns: true}, pods)
	defer stop()
	r := c.byName["pods"]
	sc := podSchema()
	index := func(sort, filter string) *order {
		keys, err := sc.ParseSort(sort)
		if err != nil {
			t.Fatal(err)
		}
		var held []query.Key
		if filter != "" {
			f, err := sc.ParseFilter([]string{filter}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			held = heldKeys(f.Compile(), nil)
		}
		w, _ := r.orders.index(r, keys, held, sc)
		return w.ix
	}
	restarts, age, filtered := index("restarts", ""), index("metadata.creationTimestamp", ""), index("restarts", "status=Running")
	col, _ := restarts.keys[0].Key.Column()
	objs := r.objects()
	// an update, as the handler applies it: the new version's entry is
	// made by the handler
	next, err := NewObject(objs[0].Raw(), "v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	r.orders.change(objs[0], next)
	for _, ix := range []*order{restarts, age, filtered} {
		if err := ix.check(append([]*Object{next}, objs[1:]...)); err != nil {
			t.Fatal(err)
		}
	}
	shared := func(e orderEntry, kept []query.Value) bool {
		return len(e.vs) == 1 && len(kept) > 0 && unsafe.SliceData(e.vs) == unsafe.SliceData(kept)
	}
	restarts.tree.Scan(func(e orderEntry) bool {
		if kv := e.o.columns.Load(); kv == nil || !shared(e, kv.columns[col:]) {
			t.Fatalf("restarts: %s's entry holds a copy of its value", e.o.Key())
		}
		return true
	})
	age.tree.Scan(func(e orderEntry) bool {
		kv := e.o.columns.Load()
		if kv == nil || len(kv.paths) == 0 || !shared(e, kv.paths[0].values) {
			t.Fatalf("metadata.creationTimestamp: %s's entry holds a copy of its value", e.o.Key())
		}
		return true
	})
	filtered.tree.Scan(func(e orderEntry) bool {
		if kv := e.o.columns.Load(); kv != nil && unsafe.SliceData(e.vs) == unsafe.SliceData(kv.columns[col:]) {
			t.Fatalf("restarts holding status: %s's entry shares its object's values", e.o.Key())
		}
		return true
	})
	if !restarts.refers || !age.refers || filtered.refers {
		t.Errorf("refers: restarts %v, path %v, holding keys %v", restarts.refers, age.refers, filtered.refers)
	}
}

// TestLoadKeepsEveryEntryInOrder: load gives the tree the entries it was
// given, in their order, whatever their number.
func TestLoadKeepsEveryEntryInOrder(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 63, 64, 127, 1000, 4097} {
		entries := make([]orderEntry, n)
		for i := range entries {
			entries[i] = orderEntry{o: &Object{name: string(rune('a' + i%26))}, vs: []query.Value{query.Num(float64(i))}}
		}
		tree := btree.NewBTreeGOptions(func(a, b orderEntry) bool { return query.Compare(a.vs[0], b.vs[0]) < 0 }, btree.Options{NoLocks: true})
		load(tree, entries)
		got := tree.Items()
		if !slices.EqualFunc(got, entries, func(a, b orderEntry) bool { return a.o == b.o }) {
			t.Fatalf("%d entries: the tree holds %d, or not in their order", n, len(got))
		}
	}
}
