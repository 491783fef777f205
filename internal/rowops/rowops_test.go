package rowops

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// row is a key and a version: the same key in two versions is one row
// changed.
type row struct {
	key string
	ver int
}

// apply is the client: ops applied in order to rows; it fails on a
// position out of range.
func apply(rows []row, cur []row, ops []Op) ([]row, error) {
	rows = slices.Clone(rows)
	for n, op := range ops {
		bad := fmt.Errorf("op %d (%s) out of range of %d rows: %+v", n, op.Kind, len(rows), op)
		switch op.Kind {
		case Remove:
			if op.At < 0 || op.At >= len(rows) {
				return nil, bad
			}
			rows = slices.Delete(rows, op.At, op.At+1)
		case Insert:
			if op.At < 0 || op.At > len(rows) {
				return nil, bad
			}
			rows = slices.Insert(rows, op.At, cur[op.Row])
		case Move:
			if op.From < 0 || op.From >= len(rows) {
				return nil, bad
			}
			rows = slices.Delete(rows, op.From, op.From+1)
			if op.To < 0 || op.To > len(rows) {
				return nil, bad
			}
			rows = slices.Insert(rows, op.To, cur[op.Row])
		case Update:
			if op.At < 0 || op.At >= len(rows) {
				return nil, bad
			}
			rows[op.At] = cur[op.Row]
		}
	}
	return rows, nil
}

type differ func(prev, cur []string, changed func(i, j int) bool) []Op

func keys(rows []row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.key
	}
	return out
}

// check diffs prev into cur with diff and applies the ops as a client.
func check(diff differ, prev, cur []row) error {
	ops := diff(keys(prev), keys(cur), func(i, j int) bool { return prev[i] != cur[j] })
	got, err := apply(prev, cur, ops)
	if err != nil {
		return err
	}
	if !slices.Equal(got, cur) {
		return fmt.Errorf("applying %+v to %v gives %v, want %v", ops, prev, got, cur)
	}
	moves := 0
	for _, op := range ops {
		if op.Kind == Move {
			moves++
		}
	}
	if want := minimalMoves(prev, cur); moves != want {
		return fmt.Errorf("%d moves for %v → %v, the fewest is %d", moves, prev, cur, want)
	}
	return nil
}

// minimalMoves is the fewest moves: the rows kept, less a longest run of
// them in the same order in both (quadratic, as written in a textbook).
func minimalMoves(prev, cur []row) int {
	pos := map[string]int{}
	for j, r := range cur {
		pos[r.key] = j
	}
	var s []int
	for _, r := range prev {
		if j, ok := pos[r.key]; ok {
			s = append(s, j)
		}
	}
	best := make([]int, len(s))
	longest := 0
	for i := range s {
		best[i] = 1
		for k := range i {
			if s[k] < s[i] {
				best[i] = max(best[i], best[k]+1)
			}
		}
		longest = max(longest, best[i])
	}
	return len(s) - longest
}

// randomRows draws a window from a universe of keys, in a random order.
func randomRows(rng *rand.Rand, universe, n int) []row {
	perm := rng.Perm(universe)[:min(n, universe)]
	out := make([]row, len(perm))
	for i, k := range perm {
		out[i] = row{key: fmt.Sprint("k", k), ver: rng.IntN(2)}
	}
	return out
}

func TestDiffAgainstAModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		universe := 1 + rng.IntN(12)
		prev := randomRows(rng, universe, rng.IntN(universe+1))
		var cur []row
		switch rng.IntN(3) {
		case 0: // unrelated
			cur = randomRows(rng, universe, rng.IntN(universe+1))
		case 1: // a few changes of a sorted window: shift, move one, update
			cur = slices.Clone(prev)
			for range rng.IntN(3) {
				if len(cur) > 0 {
					i := rng.IntN(len(cur))
					r := cur[i]
					r.ver++
					cur = slices.Delete(cur, i, i+1)
					cur = slices.Insert(cur, rng.IntN(len(cur)+1), r)
				}
			}
		default: // scrolled by a few rows
			cur = slices.Clone(prev)
			if len(cur) > 0 {
				cur = cur[1:]
			}
			cur = append(cur, row{key: "new", ver: 0})
		}
		if err := check(Diff[string], prev, cur); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDiffCases(t *testing.T) {
	r := func(ks ...string) []row {
		out := []row{}
		for _, k := range ks {
			out = append(out, row{key: k})
		}
		return out
	}
	for _, tc := range []struct{ prev, cur []row }{
		{r(), r()},
		{r(), r("a", "b")},
		{r("a", "b"), r()},
		{r("a", "b", "c"), r("c", "a", "b")},
		{r("a", "b", "c"), r("b", "c", "a")},
		{r("a", "b", "c", "d"), r("d", "c", "b", "a")},
		{r("a", "b", "c"), r("x", "a", "b")}, // one inserted above: one in, one out
	} {
		if err := check(Diff[string], tc.prev, tc.cur); err != nil {
			t.Error(err)
		}
	}
	// One row changed in place is one update, nothing else.
	ops := Diff([]string{"a", "b"}, []string{"a", "b"}, func(i, j int) bool { return i == 1 })
	if want := []Op{{Kind: Update, At: 1, Row: 1}}; !slices.Equal(ops, want) {
		t.Errorf("ops %+v, want %+v", ops, want)
	}
	if ops := Diff([]string{"a", "b"}, []string{"a", "b"}, func(i, j int) bool { return false }); len(ops) != 0 {
		t.Errorf("nothing changed, yet ops %+v", ops)
	}
}

// TestTheModelCatchesABrokenDiff: the checks above would notice a diff
// that gets a position wrong or moves more rows than it must.
func TestTheModelCatchesABrokenDiff(t *testing.T) {
	broken := map[string]differ{
		"a move's target counted before its removal": func(prev, cur []string, changed func(i, j int) bool) []Op {
			ops := Diff(prev, cur, changed)
			for i := range ops {
				if ops[i].Kind == Move && ops[i].To > ops[i].From {
					ops[i].To++
				}
			}
			return ops
		},
		"removes from the first": func(prev, cur []string, changed func(i, j int) bool) []Op {
			ops := Diff(prev, cur, changed)
			n := 0
			for n < len(ops) && ops[n].Kind == Remove {
				n++
			}
			slices.Reverse(ops[:n])
			return ops
		},
		"every row moved": func(prev, cur []string, changed func(i, j int) bool) []Op {
			var ops []Op
			for i := len(prev) - 1; i >= 0; i-- {
				ops = append(ops, Op{Kind: Remove, At: i})
			}
			for j := range cur {
				ops = append(ops, Op{Kind: Insert, At: j, Row: j})
			}
			return ops
		},
		"no updates": func(prev, cur []string, changed func(i, j int) bool) []Op {
			return Diff(prev, cur, func(int, int) bool { return false })
		},
	}
	for name, diff := range broken {
		rng := rand.New(rand.NewPCG(3, 4))
		caught := false
		for range 2000 {
			prev := randomRows(rng, 8, rng.IntN(9))
			cur := randomRows(rng, 8, rng.IntN(9))
			if name == "every row moved" { // same rows, reordered: no inserts or removes are due
				cur = slices.Clone(prev)
				rng.Shuffle(len(cur), func(i, j int) { cur[i], cur[j] = cur[j], cur[i] })
			}
			if check(diff, prev, cur) != nil {
				caught = true
				break
			}
		}
		if !caught {
			t.Errorf("the model did not catch a diff where %s", name)
		}
	}
}
