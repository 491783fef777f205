package cache

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kubeindex/kubeindex/query"
)

// minBuildPart is the fewest objects a goroutine of a build takes: below
// it, the build runs on the caller's goroutine alone.
const minBuildPart = 4096

// sortedEntries are the entries of objs in the index's order. A first
// question under a sort waits for it: the objects are split into at most
// parts parts (a question's build: as many as there are processors,
// GOMAXPROCS), each part's entries are read and sorted on a goroutine of
// its own, and the sorted parts are merged. The result is the one a
// single sort of every entry gives: compare is a total order (ties end at
// namespace and name, which are unique), so any sort and merge of the
// same entries agree.
func (ix *order) sortedEntries(objs []*Object, parts int) []orderEntry {
	var out []orderEntry
	sortedTogether([]*order{ix}, objs, parts, func(_ int, es []orderEntry) { out = es })
	return out
}

// sortedTogether is sortedEntries of several indexes in one walk: each
// part reads an object's entries for every index at once (its kept
// values loaded once), then sorts each index's, those a question waits
// for (awaited) first, looked at before each sort; the part that sorts
// an index last merges its parts and hands them to done (i: the index's
// place in ixs), before it sorts the next. So a question that comes
// while several are built (the standing indexes after the warmer's pass)
// waits for its own index's sort, not for all of them. done is called
// once per index, on the goroutines of the parts.
func sortedTogether(ixs []*order, objs []*Object, parts int, done func(i int, es []orderEntry)) {
	parts = max(1, min(parts, len(objs)/minBuildPart))
	sorted := make([][][]orderEntry, len(ixs)) // by index, by part
	left := make([]atomic.Int32, len(ixs))     // parts yet to sort each index
	for i := range ixs {
		sorted[i] = make([][]orderEntry, parts)
		left[i].Store(int32(parts))
	}
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*len(objs)/parts, (p+1)*len(objs)/parts
		part := func() {
			es := make([][]orderEntry, len(ixs))
			seen := make([][]map[string]string, len(ixs))
			for i, ix := range ixs {
				es[i], seen[i] = make([]orderEntry, hi-lo), make([]map[string]string, ix.width())
			}
			for j, o := range objs[lo:hi] {
				for i, ix := range ixs {
					e := ix.entry(o)
					if !ix.refers { // else the object's kept values: shared already (warm.go), and never written
						vs := e.vals() // the entry's own, not shared yet
						for v := range vs {
							vs[v] = sameText(vs[v], &seen[i][v])
						}
					}
					es[i][j] = e
				}
			}
			todo := make([]bool, len(ixs))
			for i := range todo {
				todo[i] = true
			}
			for range ixs {
				i := nextToSort(ixs, todo)
				todo[i] = false
				slices.SortFunc(es[i], ixs[i].compare)
				sorted[i][p] = es[i]
				if left[i].Add(-1) == 0 {
					done(i, mergeParts(sorted[i], ixs[i].compare))
				}
			}
		}
		if p == parts-1 {
			part()
		} else {
			wg.Go(part)
		}
	}
	wg.Wait()
}

// nextToSort is the first index of ixs still to sort (todo) that a
// question waits for, or else the first still to sort.
func nextToSort(ixs []*order, todo []bool) int {
	first := -1
	for i, ix := range ixs {
		if !todo[i] {
			continue
		}
		if ix.awaited.Load() {
			return i
		}
		if first < 0 {
			first = i
		}
	}
	return first
}

// mergeParts merges sorted runs into one, two at a time.
func mergeParts(sorted [][]orderEntry, compare func(a, b orderEntry) int) []orderEntry {
	for len(sorted) > 1 {
		var next [][]orderEntry
		for i := 0; i < len(sorted); i += 2 {
			if i+1 == len(sorted) {
				next = append(next, sorted[i])
				continue
			}
			next = append(next, mergeEntries(sorted[i], sorted[i+1], compare))
		}
		sorted = next
	}
	return sorted[0]
}

// buildTogether builds indexes that joined the set, none built yet, from
// one listing of objs made after they all joined (see build), in one walk
// (sortedTogether) on at most parts goroutines.
func buildTogether(ixs []*order, objs []*Object, parts int) {
	sortedTogether(ixs, objs, parts, func(i int, es []orderEntry) { ixs[i].finish(es) })
}

// maxSameTexts bounds the texts of one key a part of a build remembers.
const maxSameTexts = 4096

// sameText is v with its text, if any, replaced by an equal one seen
// before at the same place in this part, so that equal texts of
// different entries are one string: a comparison of two (a tie on a
// node, a status) ends at their pointers instead of reading both.
// Beyond maxSameTexts distinct texts (names, addresses), the rest are
// left as they are.
func sameText(v query.Value, seen *map[string]string) query.Value {
	s, ok := v.AsText()
	if !ok {
		return v
	}
	if *seen == nil {
		*seen = map[string]string{}
	}
	if c, ok := (*seen)[s]; ok {
		return query.Text(c)
	}
	if len(*seen) < maxSameTexts {
		(*seen)[s] = s
	}
	return v
}

// mergeEntries merges two sorted runs into a new one.
func mergeEntries(a, b []orderEntry, compare func(a, b orderEntry) int) []orderEntry {
	out := make([]orderEntry, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if compare(b[0], a[0]) < 0 {
			out, b = append(out, b[0]), b[1:]
		} else {
			out, a = append(out, a[0]), a[1:]
		}
	}
	return append(append(out, a...), b...)
}
