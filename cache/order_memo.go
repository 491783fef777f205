package cache

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/tidwall/btree"

	"github.com/kubeindex/kubeindex/query"
)

// A question's first page passes over every entry of its ordered index:
// its total counts every match. The pass is remembered and kept current:
// the handler, applying a change to the index, tells every pass of the
// index what left the tree and what entered it (learn), and a pass whose
// question matches such an entry moves its total by one, and the count of
// matches in the gap between two of its marks the entry lies in. The same
// question asked again, whatever changed meanwhile, takes its total from
// its pass and walks only from the nearest mark before its offset; counts
// asked again take their groups from their pass, whose counter learns
// the changes the same way.
//
// A mark is a place in the index's order, not an entry of it: the matches
// before it are the sum of the gaps up to it, and an entry that leaves the
// tree (a mark's own entry included) or enters it changes one gap. A walk
// from a mark whose entry has left starts at its neighbour (Ascend from a
// pivot), so nothing about a mark moves but a gap's count, and an event
// costs each pass two tests of its question and a binary search of its
// marks. A gap that grows beyond twice markEvery (matches entering in one
// place) would make a page walk far from its mark: the pass is dropped
// and the next question makes a new one.
//
// This is preferred to a counted B-tree per question (the tree's counts
// give GetAt, but only over what the tree holds: a tree per filter would
// hold a copy of the index's entries for each question): a pass is a few
// hundred marks, and a page walks at most about markEvery matches.

// Bounds of the passes remembered.
const (
	// maxPasses is how many questions' passes an index remembers: the
	// least recently asked beyond it is forgotten.
	maxPasses = 8
	// maxPending bounds the changes a pass being made records for its
	// end (the index changes while it scans a snapshot); beyond, it is
	// not remembered.
	maxPending = 1 << 14
)

// markEvery is how many matches lie between two marks of a new pass: a
// page at any offset walks at most about this many matches before its
// rows, and a gap that grows beyond twice as many drops the pass. A
// variable for tests only.
var markEvery = 512

// mark is a place in an index's order and the matches of a pass just
// before it.
type mark struct {
	at orderEntry // an entry, or where it was: the tree may no longer hold it
	// gap is the number of matches from the previous mark (or from the
	// start) up to at, at excluded.
	gap int
}

// pass is one question's pass over an ordered index, kept current by the
// index's changes (learn, under the index's lock): a list's (its marks)
// or counts' (their counter).
type pass struct {
	key string  // the question: passKey, and for counts their groups
	ask *asking // the question's test of an entry; used under the index's lock
	// compare is the question's order (ordering.compare), its marks'.
	compare func(a, b orderEntry) int
	total   int    // the matches
	marks   []mark // in the index's order
	tail    int    // the matches at or after the last mark (all, without marks)
	// counts: the counter of the groups, which are an entry's first
	// grouped values, and its groups as of the last change
	grouped int
	counter *query.Counter
	groups  []query.Group

	made    bool    // scanned; until then the index's changes are pending
	pending []moved // the changes made to the index while it was scanned
	used    uint64  // passes.tick when last asked
	// held: a live window's view follows it (window_follow.go); it is
	// not forgotten for other questions' passes, only when the view ends.
	held bool
}

// passes are the passes an index remembers, guarded by the index's mu.
type passes struct {
	kept []*pass
	tick uint64
}

// moved is what one change did to an index's tree: the entries that left
// it (a deleted one, one replaced by the new) and the one that entered.
type moved struct {
	out   [2]orderEntry
	nout  int
	in    orderEntry
	hasIn bool
}

// passKey is what makes two questions the same for a pass: everything a
// list's walk is kept for (askedBy: selection, scope, filter and sort as
// written), the shard selector, and the filter as parsed, whose literals
// an age reads against the moment of the question.
func passKey(q ListQuery) string {
	shard := ""
	if q.ShardSelector != nil {
		shard = q.ShardSelector.String()
	}
	return askedBy(q) + "\x00" + shard + "\x00" + fmt.Sprint(q.Ask.Filter)
}

// find is the made pass of the question key, or nil; marks it used.
func (ps *passes) find(key string) *pass {
	for _, p := range ps.kept {
		if p.key == key && p.made {
			ps.tick++
			p.used = ps.tick
			return p
		}
	}
	return nil
}

// begin remembers p, being made, unless another pass of its question is
// being made (then p is made for its question only), forgetting the
// least recently asked beyond maxPasses.
func (ps *passes) begin(p *pass) {
	if slices.ContainsFunc(ps.kept, func(k *pass) bool { return k.key == p.key }) {
		return
	}
	// Beyond maxPasses of questions, the least recently asked goes; the
	// views' passes are not counted, and stay.
	if free := slices.DeleteFunc(slices.Clone(ps.kept), func(k *pass) bool { return k.held }); !p.held && len(free) >= maxPasses {
		lru := slices.MinFunc(free, func(a, b *pass) int { return cmp.Compare(a.used, b.used) })
		ps.kept = slices.DeleteFunc(ps.kept, func(k *pass) bool { return k == lru })
	}
	ps.tick++
	p.used = ps.tick
	ps.kept = append(ps.kept, p)
}

// forget drops the pass of the question key.
func (ps *passes) forget(key string) {
	ps.kept = slices.DeleteFunc(ps.kept, func(p *pass) bool { return p.key == key })
}

// finish makes p current, its pending changes learnt, when it is still
// remembered.
func (ps *passes) finish(p *pass) {
	if !slices.Contains(ps.kept, p) {
		return
	}
	ok := true
	for _, mv := range p.pending {
		if ok = p.learn(mv); !ok {
			break
		}
	}
	p.pending, p.made = nil, true
	if !ok {
		ps.kept = slices.DeleteFunc(ps.kept, func(k *pass) bool { return k == p })
	}
}

// learn tells every pass a change of the index: a pass being made keeps
// it for its end, a made one learns it now; one that can no longer be
// kept bounded is forgotten.
func (ps *passes) learn(mv moved) {
	if len(ps.kept) == 0 {
		return
	}
	ps.kept = slices.DeleteFunc(ps.kept, func(p *pass) bool {
		if !p.made {
			p.pending = append(p.pending, mv)
			return len(p.pending) > maxPending
		}
		return !p.learn(mv)
	})
}

// learn moves p by one change; false when a gap grew beyond its bound.
func (p *pass) learn(mv moved) bool {
	for _, e := range mv.out[:mv.nout] {
		if p.ask.match(e) {
			p.shift(e, -1)
		}
	}
	if mv.hasIn && p.ask.match(mv.in) {
		return p.shift(mv.in, 1) <= 2*markEvery
	}
	return true
}

// shift counts a match entering (by 1) or leaving (-1) at e's place, and
// returns the matches of the gap it lies in.
func (p *pass) shift(e orderEntry, by int) int {
	p.total += by
	if p.counter != nil {
		p.counter.AddRows(e.vals()[:p.grouped], by)
		p.groups = nil
		return 0
	}
	// the first mark after e: e lies in its gap, or in the tail
	j := sort.Search(len(p.marks), func(i int) bool { return p.compare(p.marks[i].at, e) > 0 })
	if j == len(p.marks) {
		p.tail += by
		return p.tail
	}
	p.marks[j].gap += by
	return p.marks[j].gap
}

// passView is a pass as of a snapshot of its index: the snapshot, the
// matches, and where a page at some offset starts walking.
type passView struct {
	w     ordering
	snap  *btree.BTreeG[orderEntry]
	total int
	from  *orderEntry // the mark to walk from; nil: the start
	n     int         // the matches before from
}

// view is p as of snap (taken with p current), walking to offset.
func (p *pass) view(w ordering, snap *btree.BTreeG[orderEntry], offset int) passView {
	v := passView{w: w, snap: snap, total: p.total}
	before := 0
	for i := range p.marks {
		if before+p.marks[i].gap > offset {
			break
		}
		before += p.marks[i].gap
		v.from, v.n = &p.marks[i].at, before
	}
	if v.from != nil {
		at := *v.from // the marks change after the lock is left
		v.from = &at
	}
	return v
}

// passOver is the pass of the question key, asked by ask, over w's index
// as it is now, in w's order, viewed for a page at offset: the one
// remembered, current, or a new one, made over a snapshot and remembered.
func (w ordering) passOver(key string, ask *asking, offset int) passView {
	ix := w.ix
	ix.mu.Lock()
	snap := ix.tree.Copy()
	if p := ix.passes.find(key); p != nil {
		v := p.view(w, snap, offset)
		ix.mu.Unlock()
		return v
	}
	p := &pass{key: key, ask: ask.again(), compare: w.compare}
	ix.passes.begin(p)
	ix.mu.Unlock()

	w.makePass(snap, p, ask)
	v := p.view(w, snap, offset)
	ix.mu.Lock()
	ix.passes.finish(p)
	ix.mu.Unlock()
	return v
}

// makePass counts the matches of snap in w's order into p, a mark
// every markEvery of them; p is not yet made, so the index's changes
// wait in its pending.
func (w ordering) makePass(snap *btree.BTreeG[orderEntry], p *pass, ask *asking) {
	w.scan(snap, nil, func(e orderEntry) bool {
		if !ask.match(e) {
			return true
		}
		if p.total%markEvery == 0 {
			p.marks = append(p.marks, mark{at: e, gap: p.tail})
			p.tail = 0
		}
		p.total++
		p.tail++
		return true
	})
}

// countPass is the total and groups of the counts question key, asked by
// ask, over ix sorted by its groupBy keys (grouped of them) as it is now:
// those of the pass remembered, current, or of a new one, made over a
// snapshot and remembered. Equal groups come in runs: a run is counted by
// a comparison with the previous entry, not a lookup per object.
func (ix *order) countPass(key string, ask *asking, groupBy []query.Key) (int, []query.Group) {
	ix.mu.Lock()
	snap := ix.tree.Copy()
	if p := ix.passes.find(key); p != nil {
		if p.groups == nil {
			p.groups = p.counter.Groups()
		}
		total, groups := p.total, slices.Clone(p.groups)
		ix.mu.Unlock()
		return total, groups
	}
	p := &pass{key: key, ask: ask.again(), compare: ix.compare, grouped: len(groupBy), counter: query.NewCounter(groupBy)}
	ix.passes.begin(p)
	ix.mu.Unlock()

	var run []query.Value
	n := 0
	snap.Scan(func(e orderEntry) bool {
		if !ask.match(e) {
			return true
		}
		if g := e.vals()[:p.grouped]; n > 0 && slices.Equal(g, run) {
			n++
		} else {
			if n > 0 {
				p.counter.AddRows(run, n)
			}
			run, n = g, 1
		}
		return true
	})
	if n > 0 {
		p.counter.AddRows(run, n)
	}
	p.total, p.groups = p.counter.Total(), p.counter.Groups()
	total, groups := p.total, slices.Clone(p.groups)
	ix.mu.Lock()
	ix.passes.finish(p)
	ix.mu.Unlock()
	return total, groups
}

// page is at most limit matches (0: all) after the first offset, walked
// from the mark before offset.
func (v passView) page(ask *asking, offset, limit int) []orderEntry {
	if offset >= v.total {
		return nil
	}
	n := v.n // the matches before the walk's start
	var page []orderEntry
	visit := func(e orderEntry) bool {
		if !ask.match(e) {
			return true
		}
		if n++; n <= offset {
			return true
		}
		page = append(page, e)
		return limit == 0 || len(page) < limit
	}
	v.w.scan(v.snap, v.from, visit)
	return page
}
