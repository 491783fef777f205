package cache

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/ipowner"
)

// prepHarness is a shard's indexes and list preparation, driven as the
// informer drives them (a list read, then its objects handed to the
// handler one by one), beside client-go's indexer fed the same events.
type prepHarness struct {
	t    *testing.T
	ix   *valueIndexes
	prep *listPrep
	lw   *listWatch
	view map[string]*Object // the broker's view, kept after the indexes
	ref  toolscache.Indexer
}

func newPrepHarness(t *testing.T, feed *ipFeed) *prepHarness {
	funcs := toolscache.Indexers{nsIndex: namespaceIndexFunc}
	sames := map[string]sameValues{nsIndex: sameNamespace}
	for _, s := range []indexers.Spec{{Name: "node", Type: indexers.NodeName}, {Name: "ip", Type: indexers.PodIP},
		{Name: "image", Path: "spec.containers.#.image"}, {Name: "app", Label: "app"}} {
		addIndex(funcs, sames, s.Normalized())
	}
	h := &prepHarness{t: t, view: map[string]*Object{}, ref: toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, funcs)}
	h.ix = newValueIndexes(funcs, sames, func(ns, name string) *Object { return h.view[ns+"/"+name] })
	h.prep = newListPrep(h.ix, feed)
	h.lw = &listWatch{res: &Resource{Plural: "pods"}, shape: Shape{APIVersion: "v1", Kind: "Pod"}, prep: h.prep}
	return h
}

// prepList is a pod list of n items, names drawn from fewer keys than
// n so that a key may come twice, as a test server may send it.
func prepList(r *rand.Rand, n int, cont string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":%q},"items":[`, cont)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		imgs := []string{fmt.Sprintf(`{"name":"a","image":"img-%d"}`, r.IntN(4))}
		for range r.IntN(3) {
			imgs = append(imgs, fmt.Sprintf(`{"name":"b","image":"img-%d"}`, r.IntN(4)))
		}
		fmt.Fprintf(&b, `{"metadata":{"namespace":"ns-%d","name":"p-%d","uid":"u-%d","creationTimestamp":"2026-01-02T03:04:05Z","labels":{"app":"app-%d"}},`+
			`"spec":{"nodeName":"node-%d","hostNetwork":%v,"containers":[%s]},`+
			`"status":{"phase":%q,"startTime":"2026-01-02T03:04:0%dZ","podIPs":[{"ip":"10.0.%d.%d"}]}}`,
			r.IntN(3), r.IntN(n), r.Uint32(), r.IntN(2), r.IntN(30), r.IntN(5) == 0, strings.Join(imgs, ","),
			[]string{"Running", "Pending", "Succeeded"}[r.IntN(3)], r.IntN(10), r.IntN(4), r.IntN(60))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// read reads a whole list (one page) as ListWithContext does.
func (h *prepHarness) read(body []byte) *objectList {
	h.t.Helper()
	h.prep.begin()
	l, err := h.lw.decodeList(bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	h.prep.ended(l.Continue)
	return l
}

// hand gives o to the handler as the informer would: an add, or an
// update of the key stored.
func (h *prepHarness) hand(o *Object, initial bool) {
	if _, exists, _ := h.ref.Get(o); exists {
		h.ref.Update(o)
		h.ix.set(o, h.prep.take(o, false))
	} else {
		h.ref.Add(o)
		h.ix.set(o, h.prep.take(o, initial))
	}
	h.view[o.Key()] = o
}

// replace hands l on as a relist: the keys it no longer has deleted,
// then its objects.
func (h *prepHarness) replace(l *objectList, initial bool) {
	keep := map[string]bool{}
	for _, o := range l.Items {
		keep[o.Key()] = true
	}
	for key, o := range h.view {
		if !keep[key] {
			h.ref.Delete(o)
			h.ix.remove(o)
			delete(h.view, key)
		}
	}
	for _, o := range l.Items {
		h.hand(o, initial)
	}
}

// count is how many objects the indexes hold (by the namespace index).
func (h *prepHarness) count() int {
	n := 0
	for _, v := range h.ix.ListIndexFuncValues(nsIndex) {
		objs, _ := h.ix.ByIndex(nsIndex, v)
		n += len(objs)
	}
	return n
}

// agree fails unless every index answers what client-go's does.
func (h *prepHarness) agree(when string) {
	h.t.Helper()
	for name := range h.ix.funcs {
		want, got := h.ref.ListIndexFuncValues(name), h.ix.ListIndexFuncValues(name)
		want = slices.DeleteFunc(want, func(v string) bool { keys, _ := h.ref.IndexKeys(name, v); return len(keys) == 0 })
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			h.t.Fatalf("%s, index %s: values %v; client-go %v", when, name, got, want)
		}
		for _, v := range want {
			w, _ := h.ref.ByIndex(name, v)
			g, _ := h.ix.ByIndex(name, v)
			if !sameObjects(g, w) {
				h.t.Fatalf("%s, index %s, value %s: %d objects; client-go %d", when, name, v, len(g), len(w))
			}
		}
	}
}

// TestInitialListIndexesAdopted: the initial list's indexes are made as
// it is read, and the handler takes them whole with its first object
// (then holding every object of the list, which nothing reads before the
// shard has synced); once it has been handed each object, keys sent
// twice included, the indexes are those client-go's indexer makes of
// the same events. Small postings limits take values through every form.
func TestInitialListIndexesAdopted(t *testing.T) {
	defer func(was int) { maxSorted = was }(maxSorted)
	for _, sorted := range []int{maxSorted, maxFew + 4} {
		maxSorted = sorted
		for seed := range uint64(20) {
			r := rand.New(rand.NewPCG(seed, uint64(sorted)))
			h := newPrepHarness(t, nil)
			l := h.read(prepList(r, 40+r.IntN(200), ""))
			for i, o := range l.Items {
				h.hand(o, true)
				if i == 0 && h.count() != len(l.Items) {
					t.Fatalf("seed %d: after the first object the indexes hold %d objects, want the list's %d", seed, h.count(), len(l.Items))
				}
			}
			h.agree(fmt.Sprintf("seed %d, maxSorted %d", seed, sorted))
			if h.prep.adopted != nil || h.prep.cur != nil {
				t.Fatalf("seed %d: a stage is kept once its objects were all handed on", seed)
			}
		}
	}
}

// TestListPrepRelists: what is made of a list the handler never gets
// (one that fails midway, one that a newer list replaces before the
// handler takes it) never reaches the indexes, and a relist that arrives
// while the handler is handing on an adopted list leaves both intact:
// after every sequence the indexes are client-go's.
func TestListPrepRelists(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		when := func(s string) string { return fmt.Sprintf("seed %d, %s", seed, s) }

		// A list cut short, then a whole one: only the second is indexed.
		h := newPrepHarness(t, nil)
		body := prepList(r, 100, "")
		h.prep.begin()
		if _, err := h.lw.decodeList(bytes.NewReader(body[:len(body)*2/3])); err == nil {
			t.Fatal("a list cut short decoded")
		}
		l := h.read(prepList(r, 100, ""))
		h.replace(l, true)
		h.agree(when("after a list that failed midway"))

		// A list read, then another before the handler took the first:
		// the first is handed on without its stage, then the second.
		h = newPrepHarness(t, nil)
		first := h.read(prepList(r, 80, ""))
		second := h.read(prepList(r, 80, ""))
		h.replace(first, true)
		h.agree(when("the first of two lists"))
		h.replace(second, false)
		h.agree(when("the second of two lists"))

		// The handler adopts a list, a relist arrives halfway through
		// handing it on, then the relist is handed on.
		h = newPrepHarness(t, nil)
		first = h.read(prepList(r, 80, ""))
		for _, o := range first.Items[:40] {
			h.hand(o, true)
		}
		second = h.read(prepList(r, 80, ""))
		for _, o := range first.Items[40:] {
			h.hand(o, true)
		}
		h.agree(when("an adopted list, a relist read meanwhile"))
		h.replace(second, false)
		h.agree(when("the relist"))

		// A page that is not the last is never adopted.
		h = newPrepHarness(t, nil)
		l = h.read(prepList(r, 30, "more"))
		h.hand(l.Items[0], true)
		if n := h.count(); n != 1 {
			t.Fatalf("seed %d: a page not the last was adopted: %d objects indexed after its first", seed, n)
		}
	}
}

// TestListPreparesHoldings: an initial list's objects have what they
// hold for the address feed read as they are read, the same as the
// handler reads from the stored object; a relist's (the indexes no
// longer empty) are left to the handler.
func TestListPreparesHoldings(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	h := newPrepHarness(t, &ipFeed{kind: ipowner.Pod})
	l := h.read(prepList(r, 60, ""))
	began := 0
	for _, o := range l.Items {
		po := h.prep.take(o, true)
		if !po.held {
			t.Fatalf("%s: no holding made as the list was read", o.Key())
		}
		if want := holdingOf(ipowner.Pod, o, o, true); !reflect.DeepEqual(po.holding, want) {
			t.Fatalf("%s: made %+v, the handler makes %+v", o.Key(), po.holding, want)
		}
		if po.holding.Begin != 0 {
			began++
		}
		h.ix.set(o, po)
		h.view[o.Key()] = o
	}
	if began == 0 {
		t.Fatal("no holding has a beginning: the test reads no start times")
	}
	l = h.read(prepList(r, 20, ""))
	if po := h.prep.take(l.Items[0], false); po.held || po.values == nil {
		t.Fatalf("a relist's object: holding made %v, values %v; want values only", po.held, po.values)
	}
}
