package cache

import (
	"fmt"
	"sync"

	"github.com/tidwall/btree"

	"github.com/kubeindex/kubeindex/query"
)

// A question's first page passes over every entry of its ordered index:
// its total counts every match. The pass is remembered with the index's
// generation (the changes applied to it so far): the same question asked
// again before the index changes, at any offset, takes its total from the
// pass and walks only from the nearest mark, a match every markEvery,
// instead of passing over the index again; counts asked again take their
// groups from it. Any change to the index makes every pass remembered for
// it useless; the next question's pass replaces them.

// Bounds of the passes remembered.
const (
	// maxPasses is how many questions' passes an index remembers for one
	// generation.
	maxPasses = 8
)

// markEvery is how many matches lie between two marks of a pass: a page
// at any offset walks at most this many matches before its rows. A
// variable for tests only.
var markEvery = 512

// pass is one question's pass over a snapshot of an ordered index: a
// list's (its snapshot and marks) or counts' (their groups).
type pass struct {
	key    string // the question: passKey, and for counts their groups
	gen    uint64 // the index's generation the snapshot is of
	snap   *btree.BTreeG[orderEntry]
	total  int           // the matches
	marks  []orderEntry  // match i*markEvery, in order
	groups []query.Group // counts: the counts by group
}

// passes are the passes an index remembers, all of its latest generation
// seen.
type passes struct {
	mu   sync.Mutex
	gen  uint64
	kept []*pass
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

// find is the pass of the question key at generation gen, or nil.
func (ps *passes) find(key string, gen uint64) *pass {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.gen != gen {
		return nil
	}
	for _, p := range ps.kept {
		if p.key == key {
			return p
		}
	}
	return nil
}

// keep remembers p, forgetting every pass of an older generation and,
// beyond maxPasses, the oldest.
func (ps *passes) keep(p *pass) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	switch {
	case p.gen > ps.gen || ps.kept == nil:
		ps.gen, ps.kept = p.gen, []*pass{p}
	case p.gen == ps.gen:
		if len(ps.kept) == maxPasses {
			ps.kept = append(ps.kept[:0], ps.kept[1:]...)
		}
		ps.kept = append(ps.kept, p)
	}
}

// passOver is the pass of the question key, asked by ask, over ix: the
// one remembered for ix's current generation or a new one, made over a
// snapshot and remembered.
func (ix *order) passOver(key string, ask *asking) *pass {
	snap, gen := ix.snapshotAt()
	if p := ix.passes.find(key, gen); p != nil {
		return p
	}
	p := &pass{key: key, gen: gen, snap: snap}
	snap.Scan(func(e orderEntry) bool {
		if !ask.match(e) {
			return true
		}
		if p.total%markEvery == 0 {
			p.marks = append(p.marks, e)
		}
		p.total++
		return true
	})
	ix.passes.keep(p)
	return p
}

// page is at most limit matches (0: all) after the first offset, walked
// from the mark before offset.
func (p *pass) page(ask *asking, offset, limit int) []orderEntry {
	if offset >= p.total {
		return nil
	}
	at := offset / markEvery
	n := at * markEvery // the mark's place among the matches
	var page []orderEntry
	p.snap.Ascend(p.marks[at], func(e orderEntry) bool {
		if !ask.match(e) {
			return true
		}
		if n++; n <= offset {
			return true
		}
		page = append(page, e)
		return limit == 0 || len(page) < limit
	})
	return page
}
