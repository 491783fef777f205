package cache

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
)

// valueIndexes are a shard's indexes by value: the namespace index and the
// configured ones, each value → the objects whose index function gives it.
// They replace client-go's indexer (toolscache.NewIndexer), whose every
// value holds a set of the objects' keys: a map per value, which for an
// index of one value per object (a pod's IP) is a map per object, the
// largest part of the store's memory (BenchmarkHeapPerPod). Here a value
// holds its objects in a slice while they are few and in a set of
// pointers beyond; no key string is stored.
//
// They are kept by the shard's one event handler (set, remove), as the
// ordered indexes are, after the informer's store has the event: an
// answer by index value is the objects of the events handed on so far,
// which is what the resource's streams and positions say too. What they
// hold of an object is found by its key, never read from what an event
// says (a watch's delete carries the object's last state, not the object
// stored; client-go's indexer finds the stored one too): the object
// under a key before an event is the broker's view's (stored), which the
// same handler keeps, after these. Reads are safe for concurrent use
// with the handler.
type valueIndexes struct {
	// funcs take an *Object, or an *inList (listValues): namespaceIndexFunc
	// and objectIndexFunc's.
	funcs toolscache.Indexers
	// stored is the object the handler last handed on under a namespace
	// and name, nil if none; the handler calls set and remove before it
	// hands the event on.
	stored func(namespace, name string) *Object

	mu      sync.RWMutex
	byIndex map[string]map[string]*postings // index → value → objects

	// names are the indexes in one order, that of prepared values
	// (listPrep) and of an object's postings (Object.posted); fs and
	// sames are their functions and sameValues in that order.
	names []string
	fs    []toolscache.IndexFunc
	sames []sameValues
}

// sameValues reports whether an index function gives an object's next
// version (same key) the values it gave the one before, without reading
// them: it reads only what the two hold alike. Nil: never known.
type sameValues func(old, cur *Object) bool

// postings are the objects holding one value: up to maxFew in a slice
// in no order, up to maxSorted in a slice ordered by key (bySortedKey),
// more in a set. Never empty while in an index. A set costs several
// times the eight bytes per object of a slice; most values (a node's
// pods, a ReplicaSet's) hold tens to hundreds of objects, which a binary
// search finds and a copy of at most maxSorted pointers moves.
//
// Each object keeps the postings it is in (Object.posted), so that an
// update or a delete finds them without the index functions reading the
// version before again; value is the index's key of them.
type postings struct {
	few   []*Object
	many  map[*Object]struct{}
	value string
}

// maxFew is how many objects a value holds in a slice in no order:
// finding one is a scan of the slice. maxSorted is how many it holds in
// an ordered slice before a set. A variable for the tests.
const maxFew = 8

var maxSorted = 1024

// newValueIndexes makes the indexes of funcs; sames, by index name, say
// when an update leaves an object's values as they were (none: the
// values are read again on every update).
func newValueIndexes(funcs toolscache.Indexers, sames map[string]sameValues, stored func(namespace, name string) *Object) *valueIndexes {
	ix := &valueIndexes{funcs: funcs, stored: stored, byIndex: map[string]map[string]*postings{}}
	for name := range funcs {
		ix.byIndex[name] = map[string]*postings{}
		ix.names = append(ix.names, name)
	}
	slices.Sort(ix.names)
	for _, name := range ix.names {
		ix.fs = append(ix.fs, funcs[name])
		ix.sames = append(ix.sames, sames[name])
	}
	return ix
}

// sameNamespace is the namespace index's sameValues: an update is of
// the same key.
func sameNamespace(old, cur *Object) bool { return old.namespace == cur.namespace }

// sameMembers is the sameValues of an index function reading only the
// members of root (indexers.Spec.Rooted, Spec.Members; nil: any of
// it): root byte for byte as it was (a pod's spec and status when its
// annotations change), or, in both objects, its members (its labels and
// owners when the metadata changed, its containers when the node did).
// Members are read where Build noted them; one held in several pieces
// (a pod's containers) is joined into a pooled buffer.
func sameMembers(root string, members []string) sameValues {
	if root == "" {
		return nil
	}
	return func(old, cur *Object) bool {
		if sameSection(old, cur, root) {
			return true
		}
		if members == nil {
			return false
		}
		a, b := old.doc(root), cur.doc(root)
		if !a.IsObject() || !b.IsObject() {
			return false
		}
		if a.Pieces == nil && b.Pieces == nil {
			for _, m := range members {
				if !bytes.Equal(a.Member(m), b.Member(m)) {
					return false
				}
			}
			return true
		}
		bufA, bufB := joinBuffers.Get().(*[]byte), joinBuffers.Get().(*[]byte)
		defer putJoinBuffer(bufA)
		defer putJoinBuffer(bufB)
		for _, m := range members {
			va, afterA := a.MemberIn((*bufA)[:0], m)
			vb, afterB := b.MemberIn((*bufB)[:0], m)
			same := bytes.Equal(va, vb)
			*bufA, *bufB = afterA, afterB
			if !same {
				return false
			}
		}
		return true
	}
}

// listValues are l's values of every index, in names' order, reading it
// as the list holds it (inList); nil when there are no indexes. Safe for
// concurrent use with everything else.
func (ix *valueIndexes) listValues(l *inList) [][]string {
	if ix == nil || len(ix.names) == 0 {
		return nil
	}
	vs := make([][]string, len(ix.names))
	for i, f := range ix.fs {
		vs[i] = ix.distinct(f(l))
	}
	return vs
}

// sameSection reports whether old and cur hold the top-level member
// root byte for byte alike. A section held in pieces is compared as it
// is, its pieces listed on the stack: an update makes no slice of them.
func sameSection(old, cur *Object, root string) bool {
	var pa, pb [maxPieces][]byte
	a, b := old.docIn(root, pa[:0]), cur.docIn(root, pb[:0])
	return a.Equal(&b)
}

// empty reports whether the indexes hold no object: every object has a
// namespace index value ("" when cluster-scoped).
func (ix *valueIndexes) empty() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.byIndex[nsIndex]) == 0
}

// newMaps are empty indexes of ix's names, to fill with addTo.
func (ix *valueIndexes) newMaps() map[string]map[string]*postings {
	m := make(map[string]map[string]*postings, len(ix.names))
	for _, name := range ix.names {
		m[name] = map[string]*postings{}
	}
	return m
}

// addTo adds o, whose values (in names' order) are vs, to byIndex, made
// by newMaps and not shared.
func (ix *valueIndexes) addTo(byIndex map[string]map[string]*postings, o *Object, vs [][]string) {
	posted := make([]*postings, 0, countValues(vs))
	for i, name := range ix.names {
		for _, v := range vs[i] {
			posted = append(posted, post(byIndex[name], v, o))
		}
	}
	o.posted = posted
}

// countValues is how many values vs holds in all.
func countValues(vs [][]string) int {
	n := 0
	for _, v := range vs {
		n += len(v)
	}
	return n
}

// adopt makes byIndex (newMaps, filled by addTo) the indexes when they
// hold no object, and reports whether it did.
func (ix *valueIndexes) adopt(byIndex map[string]map[string]*postings) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if len(ix.byIndex[nsIndex]) != 0 {
		return false
	}
	for _, name := range ix.names {
		ix.byIndex[name] = byIndex[name]
	}
	return true
}

// set records o as the object under its key, in place of any before. po
// is what was made of o ahead (listPrep.take): its values, or that it is
// in the indexes already.
func (ix *valueIndexes) set(o *Object, po preparedObject) {
	if ix == nil || o == nil {
		return
	}
	prev := ix.stored(o.namespace, o.name)
	if prev == o || po.indexed && prev == nil {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if po.indexed { // prev is the same key earlier in the list
		ix.reindex(prev, nil, nil)
		return
	}
	ix.reindex(prev, o, po.values)
}

// remove records that the object under o's key is gone.
func (ix *valueIndexes) remove(o *Object) {
	if ix == nil || o == nil {
		return
	}
	prev := ix.stored(o.namespace, o.name)
	if prev == nil {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.reindex(prev, nil, nil)
}

// reindex replaces old (nil: none) by cur (nil: none) in every index;
// prepared, when not nil, are cur's values (listValues). Values an index
// function gives twice count once. old's values are those of the
// postings it is in (old.posted), and cur's, when its index's
// sameValues says they are old's, are not read either: only their
// postings change, old for cur, and when that is so of every index cur
// keeps old's list of them.
func (ix *valueIndexes) reindex(old, cur *Object, prepared [][]string) {
	var was []*postings
	if old != nil {
		was, old.posted = old.posted, nil
	}
	var same uint64 // bit i: index i's values are old's
	if old != nil && cur != nil && prepared == nil && len(ix.names) <= 64 {
		for i, f := range ix.sames {
			if f != nil && f(old, cur) {
				same |= 1 << i
			}
		}
		if same == 1<<len(ix.names)-1 {
			for _, p := range was {
				p.replace(old, cur)
			}
			cur.posted = was
			return
		}
	}
	var kept []*postings
	if cur != nil {
		n := len(was)
		if prepared != nil {
			n = countValues(prepared)
		}
		kept = make([]*postings, 0, max(n, 1))
	}
	for i, name := range ix.names {
		values := ix.byIndex[name]
		n := 0 // was holds the postings of each index in turn
		for n < len(was) && values[was[n].value] == was[n] {
			n++
		}
		olds := was[:n]
		was = was[n:]
		if same&(1<<i) != 0 {
			for _, p := range olds {
				p.replace(old, cur)
			}
			kept = append(kept, olds...)
			continue
		}
		var is []string
		switch {
		case prepared != nil:
			is = prepared[i]
		case cur != nil:
			is = ix.distinct(ix.fs[i](cur))
		}
		for _, p := range olds {
			if !slices.Contains(is, p.value) {
				p.remove(old)
				if p.empty() {
					delete(values, p.value)
				}
			}
		}
		for _, v := range is {
			p := valueIn(olds, v)
			if p != nil {
				p.replace(old, cur)
			} else {
				p = post(values, v, cur)
			}
			kept = append(kept, p)
		}
	}
	if cur != nil {
		cur.posted = kept
	}
}

// valueIn returns the postings of value v among ps, nil if none.
func valueIn(ps []*postings, v string) *postings {
	for _, p := range ps {
		if p.value == v {
			return p
		}
	}
	return nil
}

// post adds o to the postings of value v in values, and returns them.
func post(values map[string]*postings, v string, o *Object) *postings {
	p := values[v]
	if p == nil {
		p = &postings{few: []*Object{o}, value: v}
		values[v] = p
		return p
	}
	p.add(o)
	return p
}

// distinct are an index function's values, each once (none on an error).
func (ix *valueIndexes) distinct(vs []string, err error) []string {
	if err != nil {
		return nil
	}
	if len(vs) < 2 || sortedDistinct(vs) {
		return vs
	}
	// The function's slice is not ours to sort: a copy of its length.
	out := slices.Clone(vs)
	slices.Sort(out)
	return slices.Compact(out)
}

// sortedDistinct reports whether vs is in order, each value once.
func sortedDistinct(vs []string) bool {
	for i := 1; i < len(vs); i++ {
		if vs[i-1] >= vs[i] {
			return false
		}
	}
	return true
}

func (p *postings) add(o *Object) {
	switch n := len(p.few); {
	case p.many != nil:
		p.many[o] = struct{}{}
	case n < maxFew:
		p.few = append(p.few, o)
	case n < maxSorted:
		if n == maxFew {
			slices.SortFunc(p.few, keyOrder)
		}
		// A list comes in key order (etcd's, nearly always the same):
		// its next object sorts after the last, without a search.
		if keyOrder(p.few[n-1], o) < 0 {
			p.few = append(p.few, o)
			return
		}
		i, _ := slices.BinarySearchFunc(p.few, o, keyOrder)
		p.few = slices.Insert(p.few, i, o)
	default:
		p.many = make(map[*Object]struct{}, n+1)
		for _, x := range p.few {
			p.many[x] = struct{}{}
		}
		p.many[o] = struct{}{}
		p.few = nil
	}
}

func (p *postings) remove(o *Object) {
	if p.many != nil {
		delete(p.many, o)
		return
	}
	i, ok := p.find(o)
	switch {
	case !ok:
	case len(p.few) > maxFew:
		p.few = slices.Delete(p.few, i, i+1) // keeps the order
	default:
		last := len(p.few) - 1
		p.few[i] = p.few[last]
		p.few[last] = nil
		p.few = p.few[:last]
	}
}

func (p *postings) replace(old, cur *Object) {
	if p.many != nil {
		delete(p.many, old)
		p.many[cur] = struct{}{}
		return
	}
	if i, ok := p.find(old); ok && (len(p.few) <= maxFew || compareKeys(old, cur) == 0) {
		p.few[i] = cur
		return
	}
	p.remove(old)
	p.add(cur)
}

// find returns where o is in few, ok when it is there; where it would go
// in an ordered few when not.
func (p *postings) find(o *Object) (int, bool) {
	if len(p.few) <= maxFew {
		i := slices.Index(p.few, o)
		return i, i >= 0
	}
	i, _ := slices.BinarySearchFunc(p.few, o, keyOrder)
	for j := i; j < len(p.few) && keyOrder(p.few[j], o) == 0; j++ {
		if p.few[j] == o {
			return j, true
		}
	}
	return i, false
}

// keyOrder is compareKeys, the order of a value's postings: a variable
// so that tests can count the comparisons.
var keyOrder = compareKeys

// compareKeys orders objects by namespace, then name.
func compareKeys(a, b *Object) int {
	if c := strings.Compare(a.namespace, b.namespace); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

func (p *postings) empty() bool { return len(p.few) == 0 && len(p.many) == 0 }

func (p *postings) len() int { return len(p.few) + len(p.many) }

// each calls f on every object of p.
func (p *postings) each(f func(*Object)) {
	for _, o := range p.few {
		f(o)
	}
	for o := range p.many {
		f(o)
	}
}

var errNoIndex = errors.New("no such index")

// ByIndex returns the objects whose index function gives value, in no
// order.
func (ix *valueIndexes) ByIndex(index, value string) ([]any, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	values, ok := ix.byIndex[index]
	if !ok {
		return nil, errNoIndex
	}
	p := values[value]
	if p == nil {
		return nil, nil
	}
	out := make([]any, 0, p.len())
	p.each(func(o *Object) { out = append(out, o) })
	return out, nil
}

// IndexKeys returns the keys of the objects ByIndex returns.
func (ix *valueIndexes) IndexKeys(index, value string) ([]string, error) {
	objs, err := ix.ByIndex(index, value)
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.(*Object).Key()
	}
	return keys, err
}

// ListIndexFuncValues returns the values the index holds, in no order.
func (ix *valueIndexes) ListIndexFuncValues(index string) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	values := ix.byIndex[index]
	out := make([]string, 0, len(values))
	for v := range values {
		out = append(out, v)
	}
	return out
}

// Index returns the objects sharing any of obj's values of the index.
func (ix *valueIndexes) Index(index string, obj any) ([]any, error) {
	f, ok := ix.funcs[index]
	if !ok {
		return nil, errNoIndex
	}
	vs, err := f(obj)
	if err != nil {
		return nil, err
	}
	seen := map[*Object]bool{}
	var out []any
	for _, v := range vs {
		objs, _ := ix.ByIndex(index, v)
		for _, o := range objs {
			if !seen[o.(*Object)] {
				seen[o.(*Object)] = true
				out = append(out, o)
			}
		}
	}
	return out, nil
}

// GetIndexers returns the index functions.
func (ix *valueIndexes) GetIndexers() toolscache.Indexers { return ix.funcs }

// AddIndexers is refused: the indexes are fixed when the shard is made.
func (ix *valueIndexes) AddIndexers(toolscache.Indexers) error {
	return errors.New("cache: indexes are fixed when the cache is built")
}

// indexedStore is an informer's store with a shard's valueIndexes: what
// the cache reads as a client-go Indexer. The informer writes the store;
// the shard's handler keeps the indexes (valueIndexes.change).
type indexedStore struct {
	toolscache.Store
	*valueIndexes
}

var _ toolscache.Indexer = indexedStore{}
