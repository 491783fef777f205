package cache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/indexers"
)

// TestValueIndexesAgreeWithClientGo holds the shard's indexes to
// client-go's indexer fed the same events: random adds, updates (values
// kept, changed, repeated, dropped) and deletes, the deletes carrying a
// last state that is not the object stored (as a watch's do), some with
// other values, some of objects never added. After every event each index
// answers, for every value, the objects client-go's answers, and lists
// the same values.
func TestValueIndexesAgreeWithClientGo(t *testing.T) {
	// With a small maxSorted, values pass from ordered slices to sets.
	for _, sorted := range []int{maxSorted, maxFew + 4} {
		t.Run(fmt.Sprintf("maxSorted=%d", sorted), func(t *testing.T) {
			defer func(was int) { maxSorted = was }(maxSorted)
			maxSorted = sorted
			testValueIndexesAgreeWithClientGo(t)
		})
	}
}

func testValueIndexesAgreeWithClientGo(t *testing.T) {
	funcs := toolscache.Indexers{nsIndex: namespaceIndexFunc}
	for _, s := range []indexers.Spec{{Name: "node", Type: indexers.NodeName}, {Name: "ip", Type: indexers.PodIP},
		{Name: "image", Path: "spec.containers.#.image"}, {Name: "app", Label: "app"}} {
		s = s.Normalized()
		funcs[s.Name] = objectIndexFunc(s.Rooted())
	}
	view := map[string]*Object{} // the broker's view, as the handler keeps it after the indexes
	ix := newValueIndexes(funcs, func(ns, name string) *Object { return view[ns+"/"+name] })
	prep := newListPrep(ix, nil)
	prep.begin()
	ref := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, funcs)
	r := rand.New(rand.NewPCG(1, 2))
	pod := func(name string) *Object {
		ns := fmt.Sprintf("ns-%d", r.IntN(3))
		if name == "" {
			name = fmt.Sprintf("p-%d", r.IntN(40))
		}
		imgs := []string{fmt.Sprintf(`{"name":"a","image":"img-%d"}`, r.IntN(4))}
		for range r.IntN(3) { // more containers, sometimes the same image again
			imgs = append(imgs, fmt.Sprintf(`{"name":"b","image":"img-%d"}`, r.IntN(4)))
		}
		raw := fmt.Sprintf(`{"metadata":{"namespace":%q,"name":%q,"labels":{"app":"app-%d"}},"spec":{"nodeName":"node-%d","containers":[%s]},"status":{"podIPs":[{"ip":"10.0.0.%d"}]}}`,
			ns, name, r.IntN(2), r.IntN(30), strings.Join(imgs, ","), r.IntN(20))
		o, err := NewObject([]byte(raw), "v1", "Pod")
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	for step := range 3000 {
		o := pod("")
		switch r.IntN(8) {
		case 0, 1, 2, 3: // values made ahead, as a list's are while it is read
			prep.prepare(&inList{Object: o})
		case 4: // a new list began: what was made ahead and not taken is dropped
			prep.begin()
		}
		stored, exists, _ := ref.Get(o)
		switch {
		case r.IntN(4) == 0: // a delete: the last state, perhaps with other values, perhaps of nothing stored
			last := o
			if exists && r.IntN(2) == 0 {
				last, _ = NewObject(stored.(*Object).Raw(), "v1", "Pod") // same values, not the object stored
			}
			ref.Delete(last)
			ix.remove(last)
			delete(view, last.Key())
		case exists:
			ref.Update(o)
			ix.set(o, prep.take(o, false))
			view[o.Key()] = o
		default: // not of an initial list: what is made ahead here is never all handed on
			ref.Add(o)
			ix.set(o, prep.take(o, false))
			view[o.Key()] = o
		}
		for name := range funcs {
			want, got := ref.ListIndexFuncValues(name), ix.ListIndexFuncValues(name)
			want = slices.DeleteFunc(want, func(v string) bool { keys, _ := ref.IndexKeys(name, v); return len(keys) == 0 })
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d, index %s: values %v; client-go %v", step, name, got, want)
			}
			for _, v := range want {
				w, _ := ref.ByIndex(name, v)
				g, _ := ix.ByIndex(name, v)
				if !sameObjects(g, w) {
					t.Fatalf("step %d, index %s, value %s: %d objects; client-go %d", step, name, v, len(g), len(w))
				}
			}
		}
	}
}

// TestValueIndexesTakePrepared: values made ahead (a list's, while it is
// read) are the ones the object's set uses, without calling the index
// function again, and are taken once; dropped ones are made again.
func TestValueIndexesTakePrepared(t *testing.T) {
	calls := 0
	counted := func(obj any) ([]string, error) { calls++; return namespaceIndexFunc(obj) }
	ix := newValueIndexes(toolscache.Indexers{nsIndex: counted, "other": namespaceIndexFunc}, func(string, string) *Object { return nil })
	pod := func(name string) *Object {
		o, err := NewObject([]byte(`{"metadata":{"namespace":"a","name":"`+name+`"}}`), "v1", "Pod")
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	indexed := func(want ...*Object) {
		t.Helper()
		got, _ := ix.ByIndex(nsIndex, "a")
		var w []any
		for _, o := range want {
			w = append(w, o)
		}
		if !sameObjects(got, w) {
			t.Fatalf("namespace a holds %d objects, want %d", len(got), len(want))
		}
	}
	p1, p2 := pod("p1"), pod("p2")
	prep := newListPrep(ix, nil)
	prep.begin()
	prep.prepare(&inList{Object: p1})
	ix.set(p1, prep.take(p1, false))
	indexed(p1)
	if calls != 1 {
		t.Errorf("prepared, then set: the index function ran %d times, want 1", calls)
	}
	if left := len(prep.cur.objs); left != 0 {
		t.Errorf("%d prepared values left after set, want 0", left)
	}
	prep.prepare(&inList{Object: p2})
	prep.begin()
	ix.set(p2, prep.take(p2, false))
	indexed(p1, p2)
	if calls != 3 {
		t.Errorf("prepared, forgotten, set: the index function ran %d times in all, want 3", calls)
	}
}

// sameObjects reports whether a and b hold the same objects (pointers),
// in any order.
func sameObjects(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[any]int{}
	for _, o := range a {
		seen[o]++
	}
	for _, o := range b {
		if seen[o]--; seen[o] < 0 {
			return false
		}
	}
	return true
}

// TestPostingsTakeAListInKeyOrderWithoutSearching: a list comes in key
// order, and a value's ordered postings take each next object with one
// comparison (after the last), not a binary search; objects out of
// order still go where they sort.
func TestPostingsTakeAListInKeyOrderWithoutSearching(t *testing.T) {
	compared := 0
	defer func(was func(a, b *Object) int) { keyOrder = was }(keyOrder)
	keyOrder = func(a, b *Object) int { compared++; return compareKeys(a, b) }
	obj := func(ns, name string) *Object {
		o, err := NewObject(fmt.Appendf(nil, `{"metadata":{"namespace":%q,"name":%q}}`, ns, name), "v1", "Pod")
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	p := &postings{}
	n := min(maxSorted, 500)
	for i := range n {
		before := compared
		p.add(obj("ns", fmt.Sprintf("p-%04d", i)))
		if i > maxFew && compared-before != 1 {
			t.Fatalf("object %d of a list in key order: %d comparisons, want 1", i, compared-before)
		}
	}
	for _, name := range []string{"p-0000a", "a", "p-0250x"} { // out of order
		p.add(obj("ns", name))
	}
	if !slices.IsSortedFunc(p.few, compareKeys) || len(p.few) != n+3 {
		t.Fatalf("postings of %d objects, in key order %v", len(p.few), slices.IsSortedFunc(p.few, compareKeys))
	}
}

// TestDistinctValues: an index function's values, each once and in
// order, without touching its slice; values already so are taken as
// they are, without an allocation (a list's objects are many).
func TestDistinctValues(t *testing.T) {
	ix := &valueIndexes{}
	for _, tc := range []struct{ in, want []string }{
		{nil, nil},
		{[]string{"a"}, []string{"a"}},
		{[]string{"a", "b", "c"}, []string{"a", "b", "c"}},
		{[]string{"shop", "mesh"}, []string{"mesh", "shop"}},
		{[]string{"b", "a", "b", "c", "a"}, []string{"a", "b", "c"}},
		{[]string{"a", "a"}, []string{"a"}},
	} {
		in := slices.Clone(tc.in)
		if got := ix.distinct(in, nil); !slices.Equal(got, tc.want) {
			t.Errorf("distinct(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("distinct(%q) changed its input to %q", tc.in, in)
		}
	}
	if got := ix.distinct([]string{"a"}, errNoIndex); got != nil {
		t.Errorf("distinct of an error = %q, want none", got)
	}
	sorted := []string{"10.0.0.1", "fd00::1"}
	if n := testing.AllocsPerRun(100, func() { ix.distinct(sorted, nil) }); n != 0 {
		t.Errorf("distinct of values in order: %v allocations, want 0", n)
	}
}
