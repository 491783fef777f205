package cache

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/query"
)

// TestPassesAgreeWithAFreshPass: a question's pages at every offset, from
// the pass remembered for it (walked from its marks, a few matches
// apart) or from a new one, are the matches of a fresh scan of the index
// as it is now, and its counts are a fresh count, whatever changed since
// the pass was made: the handler's changes (adds, updates, deletes, in
// and out of the matches, marks' own entries among them) move the passes
// remembered, which are asked again after changes, not made again.
// Questions sorted by restarts descending read the index of restarts
// ascending backwards (a few entries of a run held at a time, so long
// runs are read forwards from their start); those ascending, forwards.
func TestPassesAgreeWithAFreshPass(t *testing.T) {
	old, oldRun := markEvery, reverseRun
	markEvery, reverseRun = 3, 4
	t.Cleanup(func() { markEvery, reverseRun = old, oldRun })
	m := newOrderModel(t)
	sc := podSchema()
	for range 80 {
		m.event()
	}
	key := func(name string) query.Key {
		k, err := sc.Key(name)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	asc, err := sc.ParseSort("restarts")
	if err != nil {
		t.Fatal(err)
	}
	desc, _ := sc.ParseSort("-restarts")
	ix, _ := m.os.join(asc, "restarts", []query.Key{key("status.phase")}, sc)
	ix.build(m.objects())
	orderings := map[string]ordering{"restarts": {ix: ix, keys: asc}, "-restarts": {ix: ix, reverse: true, keys: desc}}
	groupBy := []query.Key{key("status.phase"), key("spec.nodeName")}
	byGroup, _ := m.os.join([]query.SortKey{{Key: groupBy[0]}, {Key: groupBy[1]}}, "status.phase,spec.nodeName", []query.Key{key("status.phase")}, sc)
	byGroup.build(m.objects())
	now := time.Now()
	remembered := func(ix *order, k string) *pass {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		for _, p := range ix.passes.kept {
			if p.key == k {
				return p
			}
		}
		return nil
	}
	last := map[string]*pass{}
	seen := map[string]int{} // m.rv when each question was last asked
	reused := 0              // passes asked again after a change
	for round := range 200 {
		changed := m.r.IntN(2) == 0
		if changed {
			for range 1 + m.r.IntN(4) {
				m.event()
			}
		}
		if err := ix.check(m.objects()); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		text := []string{"", "status.phase=Running", "status.phase=Pending"}[m.r.IntN(3)]
		sortText := []string{"restarts", "-restarts"}[m.r.IntN(2)]
		w := orderings[sortText]
		var flt query.Filter
		if text != "" {
			if flt, err = sc.ParseFilter([]string{text}, now); err != nil {
				t.Fatal(err)
			}
		}
		ask := newAsking(ix, &filter{}, flt, flt.Compile(), now)
		q := ListQuery{Ask: &Ask{Schema: sc, Filter: flt, Sort: w.keys, SortText: sortText, FilterText: text}}
		var want []string
		entries := ix.snapshot().Items()
		slices.SortFunc(entries, w.compare) // a fresh sort, not a reading
		for _, e := range entries {
			if ask.match(e) {
				want = append(want, e.o.Key())
			}
		}
		text = sortText + " " + text
		limit := 1 + m.r.IntN(7)
		for off := range len(want) + 2 {
			v := w.passOver(passKey(q), ask, off)
			if v.total != len(want) {
				t.Fatalf("round %d, %q: total %d; expect %d", round, text, v.total, len(want))
			}
			var got []string
			for _, e := range v.page(ask, off, limit) {
				got = append(got, e.o.Key())
			}
			exp := want[min(off, len(want)):]
			exp = exp[:min(limit, len(exp))]
			if !slices.Equal(got, exp) {
				t.Fatalf("round %d, %q, offset %d limit %d: %v; expect %v", round, text, off, limit, got, exp)
			}
		}
		p := remembered(ix, passKey(q))
		if p == nil {
			t.Fatalf("round %d, %q: no pass remembered", round, text)
		}
		changed = seen[text] != m.rv // since this question was asked
		if prev := last[text]; prev != nil && !changed && p != prev {
			t.Fatalf("round %d, %q: nothing changed, yet a new pass", round, text)
		}
		if changed && p == last[text] {
			reused++
		}
		last[text] = p

		// The counts of the same filter, by phase and node.
		cask := newAsking(byGroup, &filter{}, flt, flt.Compile(), now)
		wantGroups := map[string]int{}
		byGroup.snapshot().Scan(func(e orderEntry) bool {
			if cask.match(e) {
				wantGroups[fmt.Sprint(e.vals()[:2])]++
			}
			return true
		})
		ckey := passKey(q) + "\x00groupBy"
		total, groups := byGroup.countPass(ckey, cask, groupBy)
		gotGroups := map[string]int{}
		for _, g := range groups {
			gotGroups[fmt.Sprint(g.Values)] = g.Count
		}
		if total != len(want) || !maps.Equal(gotGroups, wantGroups) {
			t.Fatalf("round %d, %q: counts %d %v; expect %d %v", round, text, total, gotGroups, len(want), wantGroups)
		}
		if cp := remembered(byGroup, ckey); changed && cp == last["counts"+text] {
			reused++
		} else {
			last["counts"+text] = cp
		}
		seen[text] = m.rv
	}
	if reused == 0 {
		t.Fatal("no pass was asked again after a change")
	}
}

// TestPassKeyTellsQuestionsApart: questions that may match differently
// never share a pass: another filter literal, an age read at another
// moment, another selection or shard.
func TestPassKeyTellsQuestionsApart(t *testing.T) {
	sc := podSchema()
	now := time.Now()
	q := func(text string, at time.Time, edit func(*ListQuery)) string {
		flt, err := sc.ParseFilter([]string{text}, at)
		if err != nil {
			t.Fatal(err)
		}
		lq := ListQuery{Ask: &Ask{Schema: sc, Filter: flt, SortText: "-restarts", FilterText: text}}
		if edit != nil {
			edit(&lq)
		}
		return passKey(lq)
	}
	base := q("age>1h", now, nil)
	if again := q("age>1h", now, nil); again != base {
		t.Fatalf("the same question, two keys:\n%q\n%q", base, again)
	}
	for name, other := range map[string]string{
		"another moment": q("age>1h", now.Add(time.Second), nil),
		"another filter": q("age>2h", now, nil),
		"a namespace":    q("age>1h", now, func(l *ListQuery) { l.Namespace = "a" }),
		"a scope":        q("age>1h", now, func(l *ListQuery) { l.Namespaces = []string{"a", "b"} }),
		"a label":        q("age>1h", now, func(l *ListQuery) { l.LabelSelector = "app=x" }),
		"an index value": q("age>1h", now, func(l *ListQuery) { l.Index, l.Value = "node", "n1" }),
	} {
		if other == base {
			t.Errorf("%s: the same key %q", name, fmt.Sprint(other))
		}
	}
}

// TestViewsPassesAreKept: beyond maxPasses questions, the least recently
// asked question's pass is forgotten, never a pass a live window's view
// follows (held), which goes only when the view forgets it.
func TestViewsPassesAreKept(t *testing.T) {
	var ps passes
	ps.begin(&pass{key: "view", held: true})
	for i := range 2 * maxPasses {
		ps.begin(&pass{key: fmt.Sprint("question ", i)})
	}
	keys := func() []string {
		var out []string
		for _, p := range ps.kept {
			out = append(out, p.key)
		}
		return out
	}
	if len(ps.kept) != maxPasses+1 || ps.kept[0].key != "view" {
		t.Fatalf("passes kept %q; expect the view's and the last %d questions'", keys(), maxPasses)
	}
	ps.forget("view")
	if slices.Contains(keys(), "view") || len(ps.kept) != maxPasses {
		t.Fatalf("passes kept after the view forgot its own: %q", keys())
	}
}
