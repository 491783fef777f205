package cache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestAnAwaitedIndexIsSortedFirst: of indexes built together in parts
// (the standing ones, after the warmer's pass), the one a question waits
// for is sorted by every part before the others and handed over first,
// and every index comes out as its build alone gives it; without the
// look at awaited, the first handed over would be the first of the list.
func TestAnAwaitedIndexIsSortedFirst(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	objs := make([]*Object, 2*minBuildPart+100) // two parts
	for i := range objs {
		objs[i] = orderPod(t, []string{"a", "b"}[i%2], fmt.Sprintf("p%d", i), i+1, r)
	}
	sc := podSchema()
	os := newOrders(time.Now)
	var ixs []*order
	for _, text := range []string{"restarts", "node,-age", "-status.phase,spec.nodeName", "status,-restarts"} {
		keys, err := sc.ParseSort(text)
		if err != nil {
			t.Fatal(err)
		}
		ck, ctext, _ := canonicalSort(keys)
		ix, found := os.join(ck, ctext, nil, sc)
		if found {
			t.Fatalf("%s: found before it was built", text)
		}
		ixs = append(ixs, ix)
	}
	const awaited = 2
	ixs[awaited].awaited.Store(true)
	var mu sync.Mutex
	var order []int
	got := make([][]orderEntry, len(ixs))
	sortedTogether(ixs, objs, 2, func(i int, es []orderEntry) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, i)
		got[i] = es
	})
	if len(order) != len(ixs) || order[0] != awaited {
		t.Fatalf("handed over in the order %v; expect %d first, each once", order, awaited)
	}
	for i, ix := range ixs {
		want := ix.sortedEntries(objs, 1)
		if !slices.EqualFunc(got[i], want, func(a, b orderEntry) bool { return a.o == b.o }) {
			t.Errorf("index %d: built together in parts, not the order of its build alone", i)
		}
	}
}
