package cache

import (
	"sync"

	"github.com/kubeindex/kubeindex/ipowner"
)

// listPrep is what a shard makes of a listed object ahead of its one
// handler, on the goroutine reading the list: client-go hands a list to
// the handler only once all of it has arrived, and the handler then works
// alone while nothing else happens (the initial sync's wall time), where
// the list's reader mostly waits for the API server's next bytes.
//
// For each object, its index values and, when the shard's indexes were
// empty as the list began (the initial list), what it holds for the
// address feed; for such a list, the indexes of all its objects as well
// (listStage.byIndex), which the handler adopts whole when it is given
// the first of them, the shard's indexes still empty and the list's
// objects still its initial ones: nothing is served before the shard has
// synced, and the objects it then holds are exactly the list's, each
// handed on. Each object's part is taken once, by the handler (take).
// What a list that failed, or was followed by another before the handler
// took it, made is never used: a new list's stage replaces the last, and
// only a stage whose last page arrived is adopted. Safe for concurrent
// use by the list's reader and the handler.
type listPrep struct {
	ix   *valueIndexes
	feed *ipFeed // nil: the resource holds no addresses

	mu  sync.Mutex
	cur *listStage // the list being read, or the last one read
	// adopted is the stage whose indexes the shard's are, until the
	// handler has been handed each of its objects.
	adopted *listStage
}

// listStage is what was made of one list.
type listStage struct {
	objs map[*Object]preparedObject
	// byIndex are the list's objects' indexes, made as the list is read
	// when the shard's were empty as it began; nil otherwise, or once
	// adopted or given up.
	byIndex map[string]map[string]*postings
	// complete: the list's last page arrived.
	complete bool
}

// preparedObject is what the handler takes of a listed object.
type preparedObject struct {
	// values are its values of each index, in valueIndexes.names' order;
	// nil: none made.
	values [][]string
	// holding is what it holds, as holdingOf reads it for an object of
	// the initial list; held says whether it was made.
	holding ipowner.Holding
	held    bool
	// indexed: the object is in the shard's indexes already (its
	// stage's were adopted). first: its take adopted them; last: it is
	// the adopted stage's last object; left: how many of the stage's
	// objects are still to be taken after it.
	indexed, first, last bool
	left                 int
}

func newListPrep(ix *valueIndexes, feed *ipFeed) *listPrep {
	return &listPrep{ix: ix, feed: feed}
}

// begin starts the stage of a new list (not a next page), dropping what
// the last one made and the handler has not taken.
func (p *listPrep) begin() {
	if p == nil {
		return
	}
	s := &listStage{objs: map[*Object]preparedObject{}}
	if p.ix != nil && p.ix.empty() {
		s.byIndex = p.ix.newMaps()
	}
	p.mu.Lock()
	p.cur = s
	p.mu.Unlock()
}

// ended records that a page of the current list arrived whole; cont is
// its continue token ("" for the last page).
func (p *listPrep) ended(cont string) {
	if p == nil || cont != "" {
		return
	}
	p.mu.Lock()
	if p.cur != nil {
		p.cur.complete = true
	}
	p.mu.Unlock()
}

// prepare makes l's part, reading it as the list holds it (l's input is
// valid only during the call). Index functions and holdingOf are pure
// and the bytes they read the same, so what it makes is what the handler
// would. It is called by the list's reader only, between begin and
// ended.
func (p *listPrep) prepare(l *inList) {
	if p == nil || l == nil || l.Object == nil {
		return
	}
	p.mu.Lock()
	s := p.cur
	p.mu.Unlock()
	if s == nil {
		return
	}
	var po preparedObject
	po.values = p.ix.listValues(l)
	if s.byIndex != nil { // the initial list: its objects' holdings too
		if p.feed != nil {
			po.holding, po.held = holdingOf(p.feed.kind, l.Object, l, true), true
		}
		p.ix.addTo(s.byIndex, l.Object, po.values)
	}
	p.mu.Lock()
	s.objs[l.Object] = po
	p.mu.Unlock()
}

// take returns and forgets o's prepared part (the zero value when there
// is none). initial says whether the handler was given o as part of the
// informer's initial list: only then may a stage's indexes be adopted.
func (p *listPrep) take(o *Object, initial bool) preparedObject {
	if p == nil || o == nil {
		return preparedObject{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.adopted; a != nil {
		if po, ok := a.objs[o]; ok {
			delete(a.objs, o)
			po.indexed, po.left = true, len(a.objs)
			if po.left == 0 {
				p.adopted, po.last = nil, true
			}
			return po
		}
	}
	s := p.cur
	if s == nil {
		return preparedObject{}
	}
	po, ok := s.objs[o]
	if !ok {
		return preparedObject{}
	}
	delete(s.objs, o)
	if s.byIndex != nil {
		if s.complete && initial && p.ix.adopt(s.byIndex) {
			po.indexed, po.first, po.left = true, true, len(s.objs)
			p.cur = nil
			if po.left > 0 {
				p.adopted = s
			} else {
				po.last = true
			}
		}
		// Adopted, or never to be: once this object is in, the indexes
		// are not empty.
		s.byIndex = nil
	}
	return po
}
