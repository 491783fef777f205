package cache

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/query"
)

// TestPassesAgreeWithAFreshPass: a question's pages at every offset, from
// the pass remembered for it (walked from its marks, a few matches
// apart) or from a new one, are the matches of a fresh scan of the index
// as it is now; the same question asked again with nothing changed reuses
// its pass, and any change to the index makes a new one.
func TestPassesAgreeWithAFreshPass(t *testing.T) {
	old := markEvery
	markEvery = 3
	t.Cleanup(func() { markEvery = old })
	m := newOrderModel(t)
	sc := podSchema()
	for range 80 {
		m.event()
	}
	keys, err := sc.ParseSort("-restarts")
	if err != nil {
		t.Fatal(err)
	}
	phase, err := sc.Key("status.phase")
	if err != nil {
		t.Fatal(err)
	}
	ix, _ := m.os.join(keys, "-restarts", []query.Key{phase}, sc)
	ix.build(m.objects())
	now := time.Now()
	var last map[string]*pass
	for round := range 60 {
		changed := m.r.IntN(2) == 0
		if changed {
			for range 1 + m.r.IntN(3) {
				m.event()
			}
			last = map[string]*pass{}
		}
		if last == nil {
			last = map[string]*pass{}
		}
		text := []string{"", "status.phase=Running", "status.phase=Pending"}[m.r.IntN(3)]
		var flt query.Filter
		if text != "" {
			if flt, err = sc.ParseFilter([]string{text}, now); err != nil {
				t.Fatal(err)
			}
		}
		ask := newAsking(ix, &filter{}, flt, flt.Compile(), now)
		q := ListQuery{Ask: &Ask{Schema: sc, Filter: flt, Sort: keys, SortText: "-restarts", FilterText: text}}
		var want []string
		ix.snapshot().Scan(func(e orderEntry) bool {
			if ask.match(e) {
				want = append(want, e.o.Key())
			}
			return true
		})
		p := ix.passOver(passKey(q), ask)
		if prev := last[text]; prev != nil && p != prev {
			t.Fatalf("round %d, %q: nothing changed, yet a new pass", round, text)
		}
		if prev := last[text]; changed && prev != nil && p == prev {
			t.Fatalf("round %d, %q: the index changed, yet the same pass", round, text)
		}
		last[text] = p
		if p.total != len(want) {
			t.Fatalf("round %d, %q: total %d; expect %d", round, text, p.total, len(want))
		}
		limit := 1 + m.r.IntN(7)
		for off := range len(want) + 2 {
			var got []string
			for _, e := range p.page(ask, off, limit) {
				got = append(got, e.o.Key())
			}
			exp := want[min(off, len(want)):]
			exp = exp[:min(limit, len(exp))]
			if !slices.Equal(got, exp) {
				t.Fatalf("round %d, %q, offset %d limit %d: %v; expect %v", round, text, off, limit, got, exp)
			}
		}
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
