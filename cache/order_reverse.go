package cache

import (
	"github.com/tidwall/btree"

	"github.com/kubeindex/kubeindex/query"
)

// A sort by one key descending (`sort=-x`) is answered from the index of
// x ascending, read backwards, rather than from an index of its own: the
// two orders are one another reversed but for what CompareSorted keeps
// the same either way, missing values last and ties by namespace and
// name ascending. So a backward reading takes x's entries from the last
// one with a value to the first, each run of equal values forwards, and
// then the entries without a value, forwards.
//
// A sort of several keys keeps an index of its own: a key missing inside
// a tie of the keys before it sits last in both orders, which a reading
// by runs of the last key alone does not give.

// ordering is an ordered index read in a question's order: its own
// (forward), or reversed.
type ordering struct {
	ix      *order
	reverse bool
	keys    []query.SortKey // the question's sort
}

// canonicalSort is the sort whose index answers keys, its text (the
// index's name: the keys' names, however the question wrote them), and
// whether that index is read backwards: one key descending reads the
// index of that key ascending.
func canonicalSort(keys []query.SortKey) ([]query.SortKey, string, bool) {
	if len(keys) != 1 || !keys[0].Desc {
		return keys, query.SortText(keys), false
	}
	asc := []query.SortKey{{Key: keys[0].Key}}
	return asc, query.SortText(asc), true
}

// compare orders entries as the question's sort orders them.
func (w ordering) compare(a, b orderEntry) int {
	if !w.reverse {
		return w.ix.compare(a, b)
	}
	return query.CompareSorted(w.keys, a.vals(), b.vals(), a.o.namespace, a.o.name, b.o.namespace, b.o.name)
}

func (w ordering) less(a, b orderEntry) bool { return w.compare(a, b) < 0 }

// reverseRun is how many entries of one value a backward reading holds
// to turn them forwards; a longer run is read forwards from its start,
// found by a search, so a reading costs about one visit per entry and
// holds at most this many. A variable for tests only.
var reverseRun = 256

// lowest is an object below every object in the order of namespace and
// name (an object has a name).
var lowest = &Object{}

// scan visits the entries of snap, an index's snapshot, in the question's
// order from the first not before from (nil: from the first), until visit
// returns false.
func (w ordering) scan(snap *btree.BTreeG[orderEntry], from *orderEntry, visit func(orderEntry) bool) {
	if !w.reverse {
		if from == nil {
			snap.Scan(visit)
		} else {
			snap.Ascend(*from, visit)
		}
		return
	}
	missing := entryOf(lowest, []query.Value{query.Missing()})
	if from == nil || !from.vals()[0].IsMissing() {
		top := missing // the entries with a value are below it
		if from != nil {
			if !w.run(snap, *from, visit) {
				return
			}
			top = entryOf(lowest, from.vals()[:1])
		}
		if !w.backwards(snap, top, visit) {
			return
		}
		from = &missing
	}
	snap.Ascend(*from, visit)
}

// run visits, forwards, the entries from `from` on that have its value;
// false when visit stopped.
func (w ordering) run(snap *btree.BTreeG[orderEntry], from orderEntry, visit func(orderEntry) bool) bool {
	more := true
	snap.Ascend(from, func(e orderEntry) bool {
		if query.Compare(e.vals()[0], from.vals()[0]) != 0 {
			return false
		}
		more = visit(e)
		return more
	})
	return more
}

// backwards visits the entries below top (a lowest entry of a value) run
// by run, the runs from the last to the first, each run's entries
// forwards; false when visit stopped.
func (w ordering) backwards(snap *btree.BTreeG[orderEntry], top orderEntry, visit func(orderEntry) bool) bool {
	held := make([]orderEntry, 0, min(reverseRun, 64))
	forwards := func() bool {
		for i := len(held) - 1; i >= 0; i-- {
			if !visit(held[i]) {
				return false
			}
		}
		return true
	}
	for {
		held = held[:0]
		stopped, long := false, false
		snap.Descend(top, func(e orderEntry) bool {
			if len(held) > 0 && query.Compare(e.vals()[0], held[0].vals()[0]) != 0 {
				if !forwards() {
					stopped = true
					return false
				}
				held = held[:0]
			}
			if len(held) == reverseRun {
				long = true
				return false
			}
			held = append(held, e)
			return true
		})
		switch {
		case stopped:
			return false
		case !long:
			return forwards() // the first run
		}
		// A long run: forwards from its lowest place, then below it.
		top = entryOf(lowest, held[0].vals()[:1])
		if !w.run(snap, top, visit) {
			return false
		}
	}
}
