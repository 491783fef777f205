package cache

import (
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/tidwall/btree"

	"github.com/kubeindex/kubeindex/query"
)

// TestAColumnIndexSharesKeptValues: the entries of an index of one
// column, or one path, holding no keys are the objects' kept values
// themselves, not copies, after a build and after an update the handler
// applied; an index holding keys copies its values.
func TestAColumnIndexSharesKeptValues(t *testing.T) {
	const pods = 300
	_, r, stop := lazyPods(t, pods)
	defer stop()
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
		return len(e.vals()) == 1 && len(kept) > 0 && unsafe.SliceData(e.vals()) == unsafe.SliceData(kept)
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
		if kv := e.o.columns.Load(); kv != nil && unsafe.SliceData(e.vals()) == unsafe.SliceData(kv.columns[col:]) {
			t.Fatalf("restarts holding status: %s's entry shares its object's values", e.o.Key())
		}
		return true
	})
	if !restarts.refers || !age.refers || filtered.refers {
		t.Errorf("refers: restarts %v, path %v, holding keys %v", restarts.refers, age.refers, filtered.refers)
	}
}

// TestAgeAndNameIndexesShareTheKeptColumns: an object whose column
// values are kept keeps no copy of its age: the age index's entries,
// after a build and after an update the handler applied, are its kept Age
// column value, which is the age key's value read from the JSON; and the
// column warmer, asked for the age of a standing sort, keeps the column
// values alone. The name index's entries are the kept Name column's
// values, and, built before any column value is kept, the names.
func TestAgeAndNameIndexesShareTheKeptColumns(t *testing.T) {
	const pods = 300
	c, r, stop := lazyPods(t, pods)
	defer stop()
	sc := podSchema()
	ageKey, err := sc.Key("age")
	if err != nil {
		t.Fatal(err)
	}
	col, ok := sc.KeptColumn(ageKey)
	if !ok {
		t.Fatal("the pods' schema has no Age column for the age key")
	}
	index := func(sort string) *order {
		keys, err := sc.ParseSort(sort)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := r.orders.index(r, keys, nil, sc)
		return w.ix
	}
	nameKey, err := sc.Key("name")
	if err != nil {
		t.Fatal(err)
	}
	if at, ok := sc.KeptColumn(nameKey); !ok || at != 0 {
		t.Fatalf("the name's kept column is %d, %v; want the first", at, ok)
	}
	early := index("namespace") // a copy of each namespace (namespace is no column)
	lazyNames := index("name")
	lazyNames.tree.Scan(func(e orderEntry) bool {
		if s, _ := e.vals()[0].AsText(); len(e.vals()) != 1 || s != e.o.name || e.o.columns.Load() != nil {
			t.Fatalf("name, no column value kept: %s's entry is %v", e.o.Key(), e.vals())
		}
		return true
	})
	r.orders.mu.Lock() // drop it, to build it again
	set := slices.DeleteFunc(slices.Clone(r.orders.live()), func(ix *order) bool { return ix == lazyNames })
	r.orders.set.Store(&set)
	r.orders.mu.Unlock()
	index("restarts") // keeps every pod's column values
	age, names := index("age"), index("name")
	objs := r.objects()
	next, err := NewObject(objs[0].Raw(), "v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	r.orders.change(objs[0], next)
	for _, ix := range []*order{age, names} {
		if err := ix.check(append([]*Object{next}, objs[1:]...)); err != nil {
			t.Fatal(err)
		}
	}
	if !age.refers || !names.refers || !lazyNames.refers || early.refers {
		t.Errorf("refers: age %v, name %v (%v before columns), namespace %v", age.refers, names.refers, lazyNames.refers, early.refers)
	}
	names.tree.Scan(func(e orderEntry) bool {
		kv := e.o.columns.Load()
		if kv == nil || len(e.vals()) != 1 || unsafe.SliceData(e.vals()) != unsafe.SliceData(kv.columns) {
			t.Fatalf("name: %s's entry holds a copy of its value", e.o.Key())
		}
		return true
	})
	n := 0
	age.tree.Scan(func(e orderEntry) bool {
		kv := e.o.columns.Load()
		if kv == nil || len(kv.paths) > 0 || len(e.vals()) != 1 || unsafe.SliceData(e.vals()) != unsafe.SliceData(kv.columns[col:]) {
			t.Fatalf("age: %s's entry holds a copy of its value (paths kept %d)", e.o.Key(), len(kv.paths))
		}
		if want := ageKey.ReadJSON(e.o.Raw()); len(want) != 1 || query.Compare(e.vals()[0], want[0]) != 0 {
			t.Fatalf("age: %s's entry is %v, its JSON's age %v", e.o.Key(), e.vals(), want)
		}
		n++
		return true
	})
	if n != pods {
		t.Fatalf("the age index holds %d entries, want %d", n, pods)
	}
	fresh, err := NewObject(objs[1].Raw(), "v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	c.warmWorker(sc, []query.Key{ageKey}, true)([]*Object{fresh})
	kv := fresh.columns.Load()
	if kv == nil || kv.columns == nil || len(kv.paths) > 0 {
		t.Fatalf("the warmer kept %+v for a pod, want its column values alone", kv)
	}
	k := kept{o: fresh, sc: sc, now: time.Now()}
	if got := k.Read(ageKey); len(got) != 1 || unsafe.SliceData(got) != unsafe.SliceData(kv.columns[col:]) {
		t.Fatalf("the age read after the warmer is %v, not the kept column's", got)
	}
}

// TestAnEntryIsThreeWords: an ordered index's entry is its object, a
// pointer to its values and their number, and gives back exactly its
// values: none past them, none to append into.
func TestAnEntryIsThreeWords(t *testing.T) {
	if got, want := unsafe.Sizeof(orderEntry{}), 3*unsafe.Sizeof(uintptr(0)); got != want {
		t.Errorf("an entry takes %d bytes, want %d", got, want)
	}
	slab := []query.Value{query.Num(1), query.Text("a"), query.Num(3), query.Missing()}
	for _, r := range [][2]int{{0, 0}, {0, 2}, {1, 3}, {3, 4}} {
		lo, hi := r[0], r[1]
		e := entryOf(&Object{}, slab[lo:hi])
		got := e.vals()
		if len(got) != hi-lo || cap(got) != hi-lo || !slices.Equal(got, slab[lo:hi]) {
			t.Errorf("the entry of slab[%d:%d] gives %v (cap %d)", lo, hi, got, cap(got))
		}
	}
	if vs := entryOf(&Object{}, nil).vals(); len(vs) != 0 {
		t.Errorf("an entry of no values gives %v", vs)
	}
}

// TestLoadKeepsEveryEntryInOrder: load gives the tree the entries it was
// given, in their order, whatever their number.
func TestLoadKeepsEveryEntryInOrder(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 63, 64, 127, 1000, 4097} {
		entries := make([]orderEntry, n)
		for i := range entries {
			entries[i] = entryOf(&Object{name: string(rune('a' + i%26))}, []query.Value{query.Num(float64(i))})
		}
		tree := btree.NewBTreeGOptions(func(a, b orderEntry) bool { return query.Compare(a.vals()[0], b.vals()[0]) < 0 }, btree.Options{NoLocks: true})
		load(tree, entries)
		got := tree.Items()
		if !slices.EqualFunc(got, entries, func(a, b orderEntry) bool { return a.o == b.o }) {
			t.Fatalf("%d entries: the tree holds %d, or not in their order", n, len(got))
		}
	}
}

// TestTheKeptAgeIsTheJSONs: the age read from an object's kept column
// values is the one its JSON gives, a pod without a creationTimestamp
// included (no value, not a missing one); a filter on it agrees.
func TestTheKeptAgeIsTheJSONs(t *testing.T) {
	sc := podSchema()
	ageKey, err := sc.Key("age")
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{
		`{"metadata":{"namespace":"a","name":"old","creationTimestamp":"2026-01-02T03:04:05Z"},"status":{"phase":"Running"}}`,
		`{"metadata":{"namespace":"a","name":"none"},"status":{"phase":"Pending"}}`,
		`{"metadata":{"namespace":"a","name":"bad","creationTimestamp":"yesterday"}}`,
	} {
		o, err := NewObject([]byte(raw), "v1", "Pod")
		if err != nil {
			t.Fatal(err)
		}
		k := kept{o: o, sc: sc, now: time.Now()}
		k.Columns() // kept
		got, want := k.Read(ageKey), ageKey.ReadJSON(o.Raw())
		if !slices.EqualFunc(got, want, func(a, b query.Value) bool { return query.Compare(a, b) == 0 }) {
			t.Fatalf("%s: the kept age is %v (%d values), its JSON's %v (%d)", o.Key(), got, len(got), want, len(want))
		}
		if kv := o.columns.Load(); len(kv.paths) > 0 {
			t.Fatalf("%s: the age kept apart from the column values", o.Key())
		}
		flt, err := sc.ParseFilter([]string{"age>1h"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var rec query.Record
		sc.Fill(&rec, o.Namespace(), o.Name(), o.Raw(), k.now, &k)
		if got, want := flt.Match(&rec), flt.Match(sc.Record(o.Namespace(), o.Name(), o.Raw(), k.now)); got != want {
			t.Fatalf("%s: age>1h matches %v from the kept values, %v from the JSON", o.Key(), got, want)
		}
	}
}
