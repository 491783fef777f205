package cache

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/btree"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/query"
)

// An ordered index holds every object of a resource in the order of one
// sort (its keys, then namespace and name), in a B-tree
// (github.com/tidwall/btree) whose Copy is a copy-on-write snapshot.
// A question under that sort walks the tree in order instead of sorting:
// it evaluates its filter on each object (from the values kept on the
// object, ask_columns.go) to count the matches, and keeps the rows of
// its page as it passes them, whatever the page's number. Its later
// pages walk the snapshot it took (ask_pages.go).
//
// An index is built by the first question under its sort and kept while
// questions use it: the resource's one handler per informer applies each
// event to it (change), and one unused for orderIdle, or the least
// recently used beyond maxOrders, is dropped. No index exists before a
// question asks for one, so the initial sync pays nothing for them.

// Bounds of a resource's ordered indexes.
const (
	maxOrders = 8
	orderIdle = 10 * time.Minute
)

// orderEntry is one object in an ordered index and its sort values.
type orderEntry struct {
	o  *Object
	vs []query.Value
}

// orders are one resource's ordered indexes.
type orders struct {
	mu sync.Mutex // held to add or drop an index, never while building one
	// set is what the handler walks on each event, read without a lock.
	set    atomic.Pointer[[]*order]
	now    func() time.Time
	events atomic.Uint64 // handler calls, to check idleness now and then
}

// order is one ordered index: its sort, its tree and, while it is being
// built, the changes that arrived meanwhile.
type order struct {
	id     string // schema fingerprint and sort text
	keys   []query.SortKey
	schema *query.Schema
	now    func() time.Time
	ready  chan struct{} // closed once built

	mu       sync.Mutex // guards tree, pending, building
	tree     *btree.BTreeG[orderEntry]
	pending  []orderChange
	building bool

	used atomic.Int64 // unix nanoseconds of the last question
}

// orderChange is an event as an index applies it: the old object's
// entry leaves (when there was one), the new one's enters.
type orderChange struct {
	old, cur    orderEntry
	hasOld, has bool
}

func newOrders(now func() time.Time) *orders { return &orders{now: now} }

// indexable reports whether an ordered index can hold this sort: every
// key's values must be the same whenever they are read.
func indexable(keys []query.SortKey, sc *query.Schema) bool {
	for _, k := range keys {
		if !k.Key.Timeless(sc) {
			return false
		}
	}
	return true
}

// less orders entries as query.CompareSorted orders objects.
func (ix *order) less(a, b orderEntry) bool {
	return query.CompareSorted(ix.keys, a.vs, b.vs, a.o.namespace, a.o.name, b.o.namespace, b.o.name) < 0
}

// entry reads o's sort values (kept on o, so an old version's entry is
// found again exactly: its values were kept when it entered).
func (ix *order) entry(o *Object) orderEntry {
	var r query.Record
	k := kept{o: o, sc: ix.schema, now: ix.now()}
	ix.schema.Fill(&r, o.namespace, o.name, o.raw, k.now, &k)
	return orderEntry{o: o, vs: query.SortValues(ix.keys, &r)}
}

// index returns the resource's index of this sort, building it from the
// shards' stores when there is none; built reports whether this call
// built it. Concurrent callers for one sort wait for one build.
func (os *orders) index(r *resourceCache, keys []query.SortKey, text string, sc *query.Schema) (ix *order, built bool) {
	id := sc.Fingerprint() + "\x00" + text
	now := os.now().UnixNano()
	os.mu.Lock()
	set := os.live()
	for _, ix := range set {
		if ix.id == id {
			os.mu.Unlock()
			ix.used.Store(now)
			<-ix.ready
			return ix, false
		}
	}
	ix = &order{id: id, keys: keys, schema: sc, now: os.now, ready: make(chan struct{}), building: true}
	ix.used.Store(now)
	set = append(os.idle(set, now), ix)
	if len(set) > maxOrders {
		lru := slices.MinFunc(set[:len(set)-1], func(a, b *order) int { return int(a.used.Load() - b.used.Load()) })
		set = slices.DeleteFunc(set, func(x *order) bool { return x == lru })
	}
	os.set.Store(&set)
	os.mu.Unlock()

	ix.build(r.objects())
	return ix, true
}

// live is the current set of indexes; the caller must not modify it.
func (os *orders) live() []*order {
	if p := os.set.Load(); p != nil {
		return *p
	}
	return nil
}

// idle is set without the indexes unused since orderIdle before now, in
// a new slice.
func (os *orders) idle(set []*order, now int64) []*order {
	return slices.DeleteFunc(slices.Clone(set), func(ix *order) bool { return now-ix.used.Load() > int64(orderIdle) })
}

// dropIdle drops the indexes no question used for orderIdle.
func (os *orders) dropIdle() {
	os.mu.Lock()
	defer os.mu.Unlock()
	set := os.live()
	if kept := os.idle(set, os.now().UnixNano()); len(kept) != len(set) {
		os.set.Store(&kept)
	}
}

// objects are every object of the resource, from the shards' stores.
func (r *resourceCache) objects() []*Object {
	var out []*Object
	for _, sh := range r.shards {
		for _, it := range sh.informer.GetIndexer().List() {
			out = append(out, it.(*Object))
		}
	}
	return out
}

// build fills the tree from the stores' objects, listed after the index
// joined the set, then applies the changes the handler recorded
// meanwhile. Every event whose handler ran before the index joined the
// set was in the store before the listing; every later one is pending.
// Replaying a change whose result the listing already holds removes an
// entry that is not there and sets one that is: the tree ends as the
// store is.
func (ix *order) build(objs []*Object) {
	entries := make([]orderEntry, len(objs))
	for i, o := range objs {
		entries[i] = ix.entry(o)
	}
	slices.SortFunc(entries, func(a, b orderEntry) int {
		return query.CompareSorted(ix.keys, a.vs, b.vs, a.o.namespace, a.o.name, b.o.namespace, b.o.name)
	})
	tree := btree.NewBTreeGOptions(ix.less, btree.Options{NoLocks: true})
	for _, e := range entries {
		tree.Load(e)
	}
	ix.mu.Lock()
	ix.tree = tree
	for _, ch := range ix.pending {
		ix.apply(ch)
	}
	ix.pending, ix.building = nil, false
	ix.mu.Unlock()
	close(ix.ready)
}

// apply makes one change to the tree; ix.mu is held.
func (ix *order) apply(ch orderChange) {
	if ch.hasOld {
		ix.tree.Delete(ch.old)
	}
	if ch.has {
		ix.tree.Set(ch.cur)
	}
}

// snapshot is the tree as it is now, which later changes do not touch.
func (ix *order) snapshot() *btree.BTreeG[orderEntry] {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.tree.Copy()
}

// change applies an event (old or cur nil for an add or a delete) to
// every index. It runs on the informer's handler: the entries are read
// before any lock is taken (a new version's column values are made here,
// once, and kept on it), and the lock is held for two tree operations.
func (os *orders) change(old, cur *Object) {
	set := os.live()
	if len(set) == 0 {
		return
	}
	for _, ix := range set {
		ch := orderChange{hasOld: old != nil, has: cur != nil}
		if old != nil {
			ch.old = ix.entry(old)
		}
		if cur != nil {
			ch.cur = ix.entry(cur)
		}
		ix.mu.Lock()
		if ix.building {
			ix.pending = append(ix.pending, ch)
		} else {
			ix.apply(ch)
		}
		ix.mu.Unlock()
	}
	if os.events.Add(1)%1024 == 0 {
		os.dropIdle()
	}
}

// handlerObject is the object an informer handler was given: a delete
// seen only on a relist comes as a tombstone holding the last version.
func handlerObject(obj any) *Object {
	switch o := obj.(type) {
	case *Object:
		return o
	case toolscache.DeletedFinalStateUnknown:
		if x, ok := o.Obj.(*Object); ok {
			return x
		}
	}
	return nil
}
