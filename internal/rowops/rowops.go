// Package rowops computes the row operations that turn one window of rows
// into another: what a live window sends instead of its rows. It is pure
// and knows nothing of objects, queries or streams.
package rowops

import "slices"

// Kind is what an operation does.
type Kind uint8

const (
	// Remove removes the row at At.
	Remove Kind = iota
	// Insert inserts cur[Row] at At.
	Insert
	// Move removes the row at From, then inserts cur[Row] (its new state)
	// at To.
	Move
	// Update replaces the row at At with cur[Row].
	Update
)

func (k Kind) String() string { return [...]string{"remove", "insert", "move", "update"}[k] }

// Op is one operation on the client's array of rows, at the positions
// the array has when the operation applies (after the ones before it).
type Op struct {
	Kind     Kind
	At       int // Remove, Insert, Update
	From, To int // Move
	Row      int // the index in cur of the row an Insert, Move or Update carries
}

// Diff returns the operations that turn prev into cur, applied in order:
// removes first (the rows of prev not in cur, from the last), then moves
// (of the fewest rows: those off a longest run kept in order), then
// inserts (in cur's order), then updates of rows kept in place whose
// content changed (changed(i, j): prev[i] and cur[j] are the same row in
// two states). Keys are unique within each of prev and cur.
//
// Its cost is O(n log n) plus O(n) per move, for windows of n rows.
func Diff[K comparable](prev, cur []K, changed func(i, j int) bool) []Op {
	var ops []Op
	at := make(map[K]int, len(cur)) // key → index in cur
	for j, k := range cur {
		at[k] = j
	}
	// Removes, from the last, so the positions before stay valid. w is
	// what the client holds after them, as indexes into cur.
	w := make([]int, 0, len(prev))
	was := make(map[int]int, len(prev)) // index in cur → index in prev, of the rows kept
	for i := len(prev) - 1; i >= 0; i-- {
		j, ok := at[prev[i]]
		if !ok {
			ops = append(ops, Op{Kind: Remove, At: i})
			continue
		}
		w = append(w, j)
		was[j] = i
	}
	slices.Reverse(w)
	// The rows of a longest increasing run of w stay; every other one is
	// moved, in cur's order, to just after the row that precedes it in
	// cur (already in place by then), which leaves w in cur's order.
	stays := longestIncreasing(w)
	moves := make(map[int]bool, len(w)-len(stays))
	for p, j := range w {
		if !stays[p] {
			moves[j] = true
		}
	}
	kept := slices.Sorted(slices.Values(w)) // in cur's order
	for n, j := range kept {
		if !moves[j] {
			continue
		}
		from := slices.Index(w, j)
		w = slices.Delete(w, from, from+1)
		to := 0
		if n > 0 {
			to = slices.Index(w, kept[n-1]) + 1
		}
		w = slices.Insert(w, to, j)
		ops = append(ops, Op{Kind: Move, From: from, To: to, Row: j})
	}
	// Inserts in cur's order: each lands where it is in cur, since every
	// row before it is there already.
	for j := range cur {
		if _, ok := was[j]; !ok {
			ops = append(ops, Op{Kind: Insert, At: j, Row: j})
		}
	}
	for _, j := range kept {
		if !moves[j] && changed(was[j], j) {
			ops = append(ops, Op{Kind: Update, At: j, Row: j})
		}
	}
	return ops
}

// longestIncreasing marks (by index in s) the elements of one longest strictly increasing
// subsequence of s (patience sorting).
func longestIncreasing(s []int) map[int]bool {
	tails := []int{}            // index in s of the smallest tail of each length
	prev := make([]int, len(s)) // index in s of the element before, in its run
	for i, v := range s {
		n, _ := slices.BinarySearchFunc(tails, v, func(t, v int) int { return s[t] - v })
		if n > 0 {
			prev[i] = tails[n-1]
		} else {
			prev[i] = -1
		}
		if n == len(tails) {
			tails = append(tails, i)
		} else {
			tails[n] = i
		}
	}
	keep := make(map[int]bool, len(tails))
	if len(tails) == 0 {
		return keep
	}
	for i := tails[len(tails)-1]; i >= 0; i = prev[i] {
		keep[i] = true
	}
	return keep
}
