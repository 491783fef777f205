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
// kept, changed, repeated, dropped; the stored object's annotation alone
// changed, as make bench's churn does, or its labels, owners, node or
// address rewritten to the same values) and deletes, the deletes
// carrying a last state that is not the object stored (as a watch's do),
// some with other values, some of objects never added. Some pods' long
// containers are held in pieces. After every event each index answers,
// for every value, the objects client-go's answers, and lists the same
// values.
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

// indexedPod is what a test pod is made of (render).
type indexedPod struct {
	ns, name          string
	app, node, ip     int
	images            []int
	owner             int
	long, spaced      bool // containers past chunkMin; members written with spaces
	stamp, generation int  // an annotation, and what changes no indexed value
}

// render is p's JSON, as a watch event's object.
func (p indexedPod) render() []byte {
	sp := ""
	if p.spaced {
		sp = " "
	}
	var containers []string
	for i, img := range p.images {
		c := fmt.Sprintf(`{"name":"c%d","image":"img-%d"`, i, img)
		if p.long {
			c += `,"command":["` + strings.Repeat("x", chunkMin) + `"]`
		}
		containers = append(containers, c+"}")
	}
	return fmt.Appendf(nil, `{"metadata":{"namespace":%q,"name":%q,"resourceVersion":"%d","labels":{"app":%s"app-%d","gen":"%d"},`+
		`"annotations":{"stamp":"%d"},"ownerReferences":[{"kind":"ReplicaSet",%s"name":"rs-%d","uid":"u-%d"}]},`+
		`"spec":{"nodeName":%s"node-%d","containers":[%s]},"status":{"podIP":"10.0.0.%d","podIPs":[%s{"ip":"10.0.0.%d"}]}}`,
		p.ns, p.name, p.stamp, sp, p.app, p.generation, p.stamp, sp, p.owner, p.owner, sp, p.node, strings.Join(containers, ","), p.ip, sp, p.ip)
}

// valueSpecs are the indexes the tests of the value indexes keep: make
// bench's five, the image's path as a path.
var valueSpecs = []indexers.Spec{{Name: "node", Type: indexers.NodeName}, {Name: "ip", Type: indexers.PodIP},
	{Name: "owner", Type: indexers.Owner}, {Name: "image", Path: "spec.containers.#.image"}, {Name: "app", Label: "app"}}

func testValueIndexesAgreeWithClientGo(t *testing.T) {
	funcs := toolscache.Indexers{nsIndex: namespaceIndexFunc}
	sames := map[string]sameValues{nsIndex: sameNamespace}
	for _, s := range valueSpecs {
		addIndex(funcs, sames, s.Normalized())
	}
	view := map[string]*Object{}    // the broker's view, as the handler keeps it after the indexes
	made := map[string]indexedPod{} // what each stored object was made of
	ix := newValueIndexes(funcs, sames, func(ns, name string) *Object { return view[ns+"/"+name] })
	prep := newListPrep(ix, nil)
	prep.begin()
	ref := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, funcs)
	r := rand.New(rand.NewPCG(1, 2))
	object := func(p indexedPod) *Object {
		o, err := NewObject(p.render(), "v1", "Pod")
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	for step := range 3000 {
		p := indexedPod{ns: fmt.Sprintf("ns-%d", r.IntN(3)), name: fmt.Sprintf("p-%d", r.IntN(40)), app: r.IntN(2), node: r.IntN(30),
			ip: r.IntN(20), owner: r.IntN(3), long: r.IntN(2) == 0, images: []int{r.IntN(4)}, stamp: step}
		for range r.IntN(3) { // more containers, sometimes the same image again
			p.images = append(p.images, r.IntN(4))
		}
		if was, ok := made[p.ns+"/"+p.name]; ok && r.IntN(2) == 0 {
			p = was // the stored pod changed where no index reads, or written otherwise
			p.stamp = step
			switch r.IntN(4) {
			case 0:
				p.generation++
			case 1:
				p.spaced = !p.spaced
			}
		}
		o := object(p)
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
			delete(made, last.Key())
		case exists:
			ref.Update(o)
			ix.set(o, prep.take(o, false))
			view[o.Key()], made[o.Key()] = o, p
		default: // not of an initial list: what is made ahead here is never all handed on
			ref.Add(o)
			ix.set(o, prep.take(o, false))
			view[o.Key()], made[o.Key()] = o, p
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

// TestUpdatesReadOnlyChangedValues: an update reads an index's values
// only when what its function reads changed (the old version's never:
// they are its postings'), and the object's postings are then the new
// version's: an annotation's change, the churn of make bench, reads
// none, even with the spec held in pieces, and allocates nothing; a
// label's change only the
// label index's, a node's only the node index's; the same labels,
// owners and addresses written otherwise (not byte for byte) read those
// again; a delete reads nothing.
func TestUpdatesReadOnlyChangedValues(t *testing.T) {
	calls := map[string]int{}
	funcs := toolscache.Indexers{nsIndex: namespaceIndexFunc}
	sames := map[string]sameValues{nsIndex: sameNamespace}
	for _, s := range valueSpecs {
		addIndex(funcs, sames, s.Normalized())
	}
	for name, f := range funcs {
		funcs[name] = func(obj any) ([]string, error) { calls[name]++; return f(obj) }
	}
	var stored *Object
	ix := newValueIndexes(funcs, sames, func(string, string) *Object { return stored })
	p := indexedPod{ns: "a", name: "p", images: []int{1, 2}, long: true}
	// Long containers are held in pieces from their second sighting.
	mustObject(t, p.render())
	mustObject(t, indexedPod{ns: "a", name: "p", images: []int{3}, long: true}.render())
	hand := func(when string, q indexedPod, want ...string) {
		t.Helper()
		clear(calls)
		o := mustObject(t, q.render())
		if q.long && o.chunks == nil {
			t.Fatalf("%s: the long containers are not held in pieces", when)
		}
		ix.set(o, preparedObject{})
		stored = o
		var read []string
		for name, n := range calls {
			read = append(read, fmt.Sprintf("%s×%d", name, n))
		}
		slices.Sort(read)
		slices.Sort(want)
		if !slices.Equal(read, want) {
			t.Fatalf("%s: index functions read %v, want %v", when, read, want)
		}
		for name := range funcs {
			vs, _ := funcs[name](o)
			for _, v := range vs {
				if objs, _ := ix.ByIndex(name, v); len(objs) != 1 || objs[0] != o {
					t.Fatalf("%s: index %s, value %s holds %v, want the new version alone", when, name, v, objs)
				}
			}
		}
		if n := len(ix.ListIndexFuncValues("owner")); n != 2 {
			t.Fatalf("%s: %d owner values, want 2", when, n)
		}
	}
	hand("an add", p, nsIndex+"×1", "app×1", "image×1", "ip×1", "node×1", "owner×1")
	p.stamp++
	hand("an annotation's change", p)
	// Nor does it allocate: no values read, no pieces listed, the
	// postings' list kept.
	next := p
	next.stamp++
	a, b := stored, mustObject(t, next.render())
	if allocs := testing.AllocsPerRun(20, func() {
		o := a
		if stored == a {
			o = b
		}
		ix.set(o, preparedObject{})
		stored = o
	}); allocs != 0 {
		t.Errorf("an annotation's change allocated %v times", allocs)
	}
	p.generation++
	hand("a label's change", p, "app×1")
	p.node++
	hand("a node's change", p, "node×1")
	p.spaced = true
	hand("the same labels, owners and addresses written otherwise", p, "app×1", "ip×1", "owner×1")
	p.images = []int{3}
	hand("an image's change", p, "image×1")
	clear(calls)
	ix.remove(stored)
	if len(calls) != 0 {
		t.Fatalf("a delete read %v", calls)
	}
	for name := range funcs {
		if vs := ix.ListIndexFuncValues(name); len(vs) != 0 {
			t.Fatalf("index %s holds %v after the delete", name, vs)
		}
	}
}

// mustObject is NewObject of a pod's JSON.
func mustObject(t *testing.T, raw []byte) *Object {
	t.Helper()
	o, err := NewObject(raw, "v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestValueIndexesTakePrepared: values made ahead (a list's, while it is
// read) are the ones the object's set uses, without calling the index
// function again, and are taken once; dropped ones are made again.
func TestValueIndexesTakePrepared(t *testing.T) {
	calls := 0
	counted := func(obj any) ([]string, error) { calls++; return namespaceIndexFunc(obj) }
	ix := newValueIndexes(toolscache.Indexers{nsIndex: counted, "other": namespaceIndexFunc}, nil, func(string, string) *Object { return nil })
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
