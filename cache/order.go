package cache

import (
	"cmp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tidwall/btree"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/query"
)

// An ordered index holds every object of a resource in the order of one
// sort (its keys, then namespace and name), in a B-tree
// (github.com/tidwall/btree) whose Copy is a copy-on-write snapshot.
// A question under that sort walks the tree in order instead of sorting:
// it evaluates its filter on each entry (on the values the entry holds,
// or those kept on its object, ask_columns.go) to count the matches, and
// keeps the rows of its page as it passes them, whatever the page's
// number. Its later pages walk the snapshot it took (order_ask.go).
//
// An index is built by the first question under its sort and held keys
// and kept while questions use it: the resource's one handler per
// informer applies each event to it (change), and one unused for
// orderIdle, or the least recently used beyond maxOrders, is dropped.
// No index exists before a question asks for one, so the initial sync
// pays nothing for them (a standing index over a column would render
// every pod's row during the sync: BenchmarkInitialSync).

// Bounds of a resource's ordered indexes.
const (
	maxOrders = 12
	orderIdle = 10 * time.Minute
)

// orderEntry is one object in an ordered index: its sort values and then,
// when each has at most one value for it, the values of the index's held
// keys (order.held), which a question's filter and counts read from here
// rather than from the object. An index of one column, path, age or name
// key holding no keys (order.refers: the standing ones, a sort by a
// column) shares its entry's one value with the object's kept values
// instead of copying it (the age's and the name's are among the kept
// column values when there are any); otherwise a build lays every
// entry's values out in one array, in the index's order, so that a walk
// reads memory in sequence, and texts read from the JSON are interned
// (interned). Values an entry holds are never written.
//
// An entry is three words, not four: its values are a pointer to the
// first and their number, without a slice's capacity, which no entry
// uses (an index holds an entry per object: 8 B per object per index,
// BenchmarkHeapPerPod). Its values are made into a slice only by vals,
// of its own number, so a reader can neither read past them nor append
// into the values next to them; a continue token's values are checked
// to be as many as its sort's keys before an entry is made of them
// (checkAsked).
type orderEntry struct {
	o *Object
	v *query.Value // the first of its n values (nil when none)
	n int
}

// entryOf is the entry of o holding vs (which it never writes).
func entryOf(o *Object, vs []query.Value) orderEntry {
	return orderEntry{o: o, v: unsafe.SliceData(vs), n: len(vs)}
}

// vals are the entry's values, a slice whose capacity is their number;
// the caller does not write them.
func (e orderEntry) vals() []query.Value { return unsafe.Slice(e.v, e.n) }

// orders are one resource's ordered indexes.
type orders struct {
	mu sync.Mutex // held to add or drop an index, never while building one
	// set is what the handler walks on each event, read without a lock.
	set    atomic.Pointer[[]*order]
	now    func() time.Time
	events atomic.Uint64 // handler calls, to check idleness now and then
	// standing, when not nil, is what questions over a standing sort
	// wait for until the warmer first builds it (order_standing.go); set
	// before the cache starts.
	standing atomic.Pointer[standingWait]
	// warming is the column warmer's pass under way over the resource,
	// to join (warmPass.help); nil when none is.
	warming atomic.Pointer[warmPass]
	// helping counts the questions rendering rows of that pass
	// (helpWarm), whom the warmer does not step aside for.
	helping atomic.Int32
	// eased is rung as a question joins the warmer (helpWarm,
	// awaitStanding): a worker of the warmer stepping aside for its slot
	// goes on (stepAside). The cache's askSlots.eased; nil: none.
	eased *nudge
	// first, when not nil, is the warmer's first pass over the resource,
	// which questions that come before it can be joined wait for
	// (order_standing.go); set before the cache starts.
	first atomic.Pointer[firstPass]
}

// order is one ordered index: its sort, its tree and, while it is being
// built, the changes that arrived meanwhile.
type order struct {
	id   string // schema fingerprint, sort text, held keys
	keys []query.SortKey
	// held are keys whose values the entries hold after the sort
	// values: the filter and group keys of the questions that asked for
	// this index, by name.
	held []query.Key
	// refers: the entries share their one value with their objects'
	// kept values (referred).
	refers bool
	schema *query.Schema
	// compare is compareSorted (a field so that a test can break it).
	compare func(a, b orderEntry) int
	now     func() time.Time
	ready   chan struct{} // closed once built
	// awaited: a question waits for the build under way (index), which
	// then sorts this index before the others it builds with it
	// (sortedTogether).
	awaited atomic.Bool

	mu       sync.Mutex // guards tree, pending, building, passes
	tree     *btree.BTreeG[orderEntry]
	pending  []orderChange
	building bool
	passes   passes // questions' passes over it (order_memo.go)

	used atomic.Int64 // unix nanoseconds of the last question
	// pins are the live windows' views loaded from the index: a pinned
	// index is never dropped as idle (pin).
	pins atomic.Int32
	// standing: built after the sync whether asked or not, and never
	// dropped (order_standing.go). Guarded by orders.mu.
	standing bool
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

// holdable reports whether an ordered index can hold these keys' values.
func holdable(keys []query.Key, sc *query.Schema) bool {
	return !slices.ContainsFunc(keys, func(k query.Key) bool { return !k.Timeless(sc) })
}

// compareSorted orders entries as query.CompareSorted orders objects.
func (ix *order) compareSorted(a, b orderEntry) int {
	return query.CompareSorted(ix.keys, a.vals(), b.vals(), a.o.namespace, a.o.name, b.o.namespace, b.o.name)
}

func (ix *order) less(a, b orderEntry) bool { return ix.compare(a, b) < 0 }

// entry reads o's sort values and held values (kept on o, so an old
// version's entry is found again exactly: its values were kept when it
// entered).
func (ix *order) entry(o *Object) orderEntry {
	k := kept{o: o, sc: ix.schema, now: ix.now()}
	if ix.refers {
		return entryOf(o, ix.referred(&k))
	}
	var r query.Record
	ix.schema.Fill(&r, o.namespace, o.name, o.recordRaw(), k.now, &k)
	vs := make([]query.Value, len(ix.keys), len(ix.keys)+len(ix.held))
	for i, sk := range ix.keys {
		vs[i] = interned(sk.Key, sk.Key.First(&r))
	}
	var buf [4]query.Value
	for _, hk := range ix.held {
		hv := hk.Values(&r, buf[:0])
		switch len(hv) {
		case 0:
			vs = append(vs, query.Missing())
		case 1:
			vs = append(vs, interned(hk, hv[0]))
		default: // several: a question reads the object
			return entryOf(o, vs[:len(ix.keys):len(ix.keys)])
		}
	}
	return entryOf(o, vs)
}

// referable reports whether an index of this sort holding these keys
// can share its entries' values with their objects' kept values: one
// column key (of a Timeless schema, or it would not be indexable: its
// values are kept), one path or age key, or the name key where the
// schema's Name column holds it, and nothing held.
func referable(keys []query.SortKey, held []query.Key, sc *query.Schema) bool {
	if len(keys) != 1 || len(held) > 0 {
		return false
	}
	_, column := keys[0].Key.Column()
	_, inColumn := sc.KeptColumn(keys[0].Key)
	return column || inColumn || keys[0].Key.ReadsJSON()
}

// noValue is the value of an entry whose object has none for its key,
// shared by every such entry; never written.
var noValue = []query.Value{query.Missing()}

// referred is the first value of the index's one sort key as k's object
// keeps it (its kept column values, or its kept path values, an age's
// among the columns when they are kept; read and kept now if they are
// not yet; the name's Name column value, when kept), a slice of one
// value that the entry shares rather than copies. Kept values are
// immutable, and an entry is found by its value (equal whether shared or
// not), so an old version's entry is found again exactly.
func (ix *order) referred(k *kept) []query.Value {
	key := ix.keys[0].Key
	if i, ok := key.Column(); ok {
		if cols := k.Columns(); i < len(cols) {
			return cols[i : i+1 : i+1]
		}
		return noValue
	}
	if key.ReadsJSON() {
		if vs := k.Read(key); len(vs) > 0 {
			return vs[:1:1]
		}
		return noValue
	}
	// The name: its Name column's kept value when there is one (never
	// made here: a sort by name renders no row) and it is the name.
	if i, ok := ix.schema.KeptColumn(key); ok {
		if cols := k.kept(); i < len(cols) {
			if s, _ := cols[i].AsText(); s == k.o.name {
				return cols[i : i+1 : i+1]
			}
		}
	}
	return []query.Value{query.Text(k.o.name)}
}

// interned is v as an entry holds it: interned when it was read from
// the JSON (a path's), as it is otherwise: a column's, the name's and the
// namespace's texts live with the object already (in its kept values, in
// its key), and interning one held by a single object (a name, an
// address) would cost more than the entry it is for.
func interned(k query.Key, v query.Value) query.Value {
	if k.Path() == "" {
		return v
	}
	return v.Interned()
}

// width is the number of values an entry holding every held key has.
func (ix *order) width() int { return len(ix.keys) + len(ix.held) }

// index returns the resource's index answering this sort (canonicalSort:
// the sort's own, or the one read backwards), building it from the
// shards' stores when there is none; built reports whether this call
// built it. Concurrent callers for one sort wait for one build, and
// callers for a standing sort the column warmer has yet to build wait for
// the warmer's (awaitStanding).
func (os *orders) index(r *resourceCache, keys []query.SortKey, held []query.Key, sc *query.Schema) (w ordering, built bool) {
	ck, ctext, reverse := canonicalSort(keys)
	os.awaitStanding(ctext, held)
	ix, found := os.join(ck, ctext, held, sc)
	w = ordering{ix: ix, reverse: reverse, keys: keys}
	if found {
		select {
		case <-ix.ready:
		default:
			ix.awaited.Store(true)
			<-ix.ready
		}
		return w, false
	}
	ix.build(r.objects())
	return w, true
}

// orderID names the index of a sort holding some keys' values.
func orderID(text string, held []query.Key, sc *query.Schema) string {
	var id strings.Builder
	id.WriteString(sc.Fingerprint() + "\x00" + text)
	for _, k := range held {
		id.WriteString("\x00" + k.String())
	}
	return id.String()
}

// has reports whether the index of this sort and keys exists (built or
// being built).
func (os *orders) has(text string, held []query.Key, sc *query.Schema) bool {
	id := orderID(text, held, sc)
	return slices.ContainsFunc(os.live(), func(ix *order) bool { return ix.id == id })
}

// join returns the index of this sort holding these keys, found among
// the live ones or, when there is none, a new one in the set, being
// built: the caller builds it. held is in the order heldKeys gives.
func (os *orders) join(keys []query.SortKey, text string, held []query.Key, sc *query.Schema) (ix *order, found bool) {
	return os.joinAs(keys, text, held, sc, false)
}

// joinAs is join, the index made standing when standing is true (a
// standing index stays so).
func (os *orders) joinAs(keys []query.SortKey, text string, held []query.Key, sc *query.Schema, standing bool) (ix *order, found bool) {
	id := orderID(text, held, sc)
	now := os.now().UnixNano()
	os.mu.Lock()
	defer os.mu.Unlock()
	set := os.live()
	for _, ix := range set {
		if ix.id == id {
			ix.used.Store(now)
			ix.standing = ix.standing || standing
			return ix, true
		}
	}
	ix = &order{id: id, keys: keys, held: held, refers: referable(keys, held, sc), schema: sc, now: os.now, ready: make(chan struct{}), building: true, standing: standing}
	ix.compare = ix.compareSorted
	ix.used.Store(now)
	set = append(os.idle(set, now), ix)
	// Beyond maxOrders asked for, the least recently used goes, pinned
	// last; standing indexes are not counted, and stay.
	asked := slices.DeleteFunc(slices.Clone(set[:len(set)-1]), func(x *order) bool { return x.standing })
	if len(asked)+1 > maxOrders && !standing || len(asked) > maxOrders {
		lru := slices.MinFunc(asked, func(a, b *order) int {
			return cmp.Or(cmp.Compare(min(a.pins.Load(), 1), min(b.pins.Load(), 1)), cmp.Compare(a.used.Load(), b.used.Load()))
		})
		set = slices.DeleteFunc(set, func(x *order) bool { return x == lru })
	}
	os.set.Store(&set)
	return ix, false
}

// live is the current set of indexes; the caller must not modify it.
func (os *orders) live() []*order {
	if p := os.set.Load(); p != nil {
		return *p
	}
	return nil
}

// holds reports whether ix is still one of the live indexes, which the
// handler keeps: once dropped, an index is never kept again.
func (os *orders) holds(ix *order) bool { return slices.Contains(os.live(), ix) }

// idle is set without the indexes unused since orderIdle before now,
// neither pinned nor standing, in a new slice; os.mu is held.
func (os *orders) idle(set []*order, now int64) []*order {
	return slices.DeleteFunc(slices.Clone(set), func(ix *order) bool {
		return !ix.standing && ix.pins.Load() == 0 && now-ix.used.Load() > int64(orderIdle)
	})
}

// pin keeps ix from being dropped as idle until the returned unpin is
// called (once): a live window's view, loaded from the index, uses it
// without asking questions of it, and a window opened again, or a page
// of the window's question, would otherwise build it again. unpin marks
// the index used, so that it is kept for orderIdle after.
func (os *orders) pin(ix *order) (unpin func()) {
	ix.pins.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			ix.used.Store(os.now().UnixNano())
			ix.pins.Add(-1)
		})
	}
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
func (ix *order) build(objs []*Object) { ix.buildIn(objs, runtime.GOMAXPROCS(0)) }

// buildIn is build reading and sorting the entries in at most parts
// parts, each on a goroutine (order_build.go).
func (ix *order) buildIn(objs []*Object, parts int) { ix.finish(ix.sortedEntries(objs, parts)) }

// finish lays out a build's sorted entries, loads the tree from them,
// applies the changes recorded meanwhile and makes the index ready.
func (ix *order) finish(entries []orderEntry) {
	if !ix.refers {
		w := ix.width()
		slab := make([]query.Value, 0, len(entries)*w)
		for i, e := range entries {
			slab = append(slab, e.vals()...)
			entries[i] = entryOf(e.o, slab[len(slab)-e.n:])
		}
	}
	tree := btree.NewBTreeGOptions(ix.less, btree.Options{NoLocks: true})
	load(tree, entries)
	ix.mu.Lock()
	ix.tree = tree
	for _, ch := range ix.pending {
		ix.apply(ch)
	}
	ix.pending, ix.building = nil, false
	ix.mu.Unlock()
	close(ix.ready)
}

// load fills an empty tree with sorted entries: those at even places
// first, in order (Load: appended to the last leaf), then those at odd
// places, in order (SetHint). A tree loaded in order alone splits each
// full leaf in two and never touches the left half again: every leaf
// half full, in an array sized for a full one, about twice the entries'
// own size. Here each of those halves then takes the odd entries of its
// range (the gaps between its entries, and one at each end), which fill
// it without a split: the leaves end nearly full
// (BenchmarkHeapPerPod/with-column-indexes, B/pod-indexes). The tree is
// the same set either way; only its memory differs.
func load(tree *btree.BTreeG[orderEntry], entries []orderEntry) {
	for i := 0; i < len(entries); i += 2 {
		tree.Load(entries[i])
	}
	var hint btree.PathHint
	for i := 1; i < len(entries); i += 2 {
		tree.SetHint(entries[i], &hint)
	}
}

// apply makes one change to the tree, and tells the passes over it
// what left and what entered; ix.mu is held.
func (ix *order) apply(ch orderChange) {
	var mv moved
	if ch.hasOld {
		if prev, ok := ix.tree.Delete(ch.old); ok {
			mv.out[0], mv.nout = prev, 1
		}
	}
	if ch.has {
		if prev, ok := ix.tree.Set(ch.cur); ok {
			mv.out[mv.nout] = prev
			mv.nout++
		}
		mv.in, mv.hasIn = ch.cur, true
	}
	ix.passes.learn(mv)
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

// heldKeys are the distinct keys of a filter and of a grouping, ordered
// by name: what an index for them holds, and its identity.
func heldKeys(flt *query.Compiled, groupBy []query.Key) []query.Key {
	var out []query.Key
	if flt != nil {
		out = append(out, flt.Keys()...)
	}
	out = append(out, groupBy...)
	slices.SortFunc(out, func(a, b query.Key) int { return strings.Compare(a.String(), b.String()) })
	return slices.CompactFunc(out, func(a, b query.Key) bool { return a.String() == b.String() })
}

// heldPlaces maps keys to their places among an entry's values (after the
// sort values).
func heldPlaces(ix *order, keys []query.Key) []int {
	at := make([]int, len(keys))
	for i, k := range keys {
		at[i] = len(ix.keys) + slices.IndexFunc(ix.held, func(h query.Key) bool { return h.String() == k.String() })
	}
	return at
}
