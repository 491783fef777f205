package cache

import (
	"cmp"
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/query"
)

// Column values made ahead of questions. A question over a Table column
// reads every object's row, and rendering a row (decoding the object) is
// by far the largest part of it; the values are kept with the object's
// version (ask_columns.go), so only the first question over a column
// pays, but that one waited for every row of the resource: a dashboard's
// first sort by a column at 100,000 pods.
//
// So once a resource has synced (never before: the initial sync does not
// pay for it), one goroutine for the whole cache renders the rows of its
// objects that have no values kept, a batch at a time, stepping aside
// while a costly question runs, and comes back every warmEvery for the
// versions that arrived since (an ordered index's handler makes a new
// version's values itself, and a question the ones it reads first). A
// resource's first pass, every row of it, which the standing indexes and
// a dashboard's first screen wait for, is rendered on every processor;
// the later ones, a few changed versions each, on the one goroutine.
// What it keeps is what the first question over a column would keep, so
// the memory is the same as after that question; Options.LazyColumns
// leaves it to the questions. Right after a resource's first pass it
// builds the resource's standing ordered indexes (order_standing.go),
// which read those values.

// Pace of the column warmer.
const (
	// warmBatch objects are rendered between two looks at the questions
	// running.
	warmBatch = 256
	// warmEvery is how often the warmer looks for versions without
	// values, once every resource it warms has synced.
	warmEvery = 10 * time.Second
	// warmWait is how often it looks for a resource's sync (and, at
	// most, how long it steps aside for a costly question without a
	// nudge: warm_aside.go).
	warmWait = 100 * time.Millisecond
)

// columnSchema is the schema of the resource's Table columns when the
// cache renders them itself: a built-in kind with the API server's
// printer (a custom resource's columns come from its CRD, which the
// server reads), whose values may be kept (Timeless). Nil otherwise.
func (r *resourceCache) columnSchema() *query.Schema {
	gr := schema.GroupResource{Group: r.res.Group, Resource: r.res.Plural}
	if !table.HasPrinter(gr) {
		return nil
	}
	sc := query.NewSchema(table.ForResource(gr))
	if !sc.Timeless() {
		return nil
	}
	return sc
}

// warmColumns keeps the column values of every object of the resources
// with a columnSchema made, until ctx ends. It runs on one goroutine
// (which questions waiting for it join: warmPass), a resource's first
// pass on as many more as there are processors, and builds the standing
// indexes right after a resource's pass (stand); the resources with
// standing indexes go first.
func (c *Cache) warmColumns(ctx context.Context) {
	defer func() {
		for _, r := range c.resources {
			r.orders.firstPassOpen()
			r.orders.standingDone()
		}
	}()
	type target struct {
		r  *resourceCache
		sc *query.Schema
	}
	var ts []target
	for _, r := range c.resources {
		if sc := r.columnSchema(); sc != nil {
			ts = append(ts, target{r, sc})
		}
	}
	slices.SortStableFunc(ts, func(a, b target) int {
		return cmp.Compare(min(len(c.standing(b.r)), 1), min(len(c.standing(a.r)), 1))
	})
	if len(ts) == 0 {
		return
	}
	// warmedAt is each target's count of new versions when its last pass
	// began: a resource with none since is not listed again, so an idle
	// cluster costs the warmer nothing every warmEvery.
	warmedAt := make([]int64, len(ts))
	for {
		all := true
		for i, t := range ts {
			if !t.r.synced() {
				all = false
				continue
			}
			n := t.r.versionsHandled()
			if n == warmedAt[i] { // nothing new, or nothing at all
				t.r.orders.standingDone()
				continue
			}
			if !c.pass(ctx, t.r, t.sc, warmedAt[i] == 0) {
				return
			}
			t.r.orders.standingDone()
			warmedAt[i] = n
		}
		wait := warmEvery
		if !all {
			wait = warmWait
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// pass is one pass of the warmer over r: its rows' values kept (warm),
// then its standing indexes built (stand). The first, over every row,
// builds the namespace/name order before it (it reads no value, and a
// dashboard's first screen asks for it) and renders on every processor;
// a later one, the versions that arrived since, on this goroutine.
// false when ctx ended.
func (c *Cache) pass(ctx context.Context, r *resourceCache, sc *query.Schema, first bool) bool {
	workers := 1
	if first {
		workers = runtime.GOMAXPROCS(0)
		if !c.standBare(ctx, r, sc) {
			return false
		}
	}
	return c.warm(ctx, r, sc, workers) && c.stand(ctx, r, sc)
}

// warm makes the column values of r's objects that have none kept under
// sc, and the values of the path and age keys of its standing sorts, a
// batch at a time on as many goroutines as workers (the caller's one of
// them), each stepping aside for costly questions before each batch; a
// question waiting for the standing indexes, or about to render the
// rows, joins the pass (warmPass.help). false when ctx ended.
func (c *Cache) warm(ctx context.Context, r *resourceCache, sc *query.Schema, workers int) bool {
	var paths []query.Key
	for _, keys := range c.standing(r) {
		for _, k := range keys {
			if k.Key.ReadsJSON() && !slices.ContainsFunc(paths, func(p query.Key) bool { return p.KeptName() == k.Key.KeptName() }) {
				paths = append(paths, k.Key)
			}
		}
	}
	pods := schema.GroupResource{Group: r.res.Group, Resource: r.res.Plural} == podResource
	p := &warmPass{objs: r.objects(), sc: sc, worker: func() func([]*Object) { return c.warmWorker(sc, paths, pods) }}
	r.orders.joinable(p)
	defer r.orders.joinable(nil)
	if c.warmHook != nil {
		c.warmHook("warm")
	}
	var stopped atomic.Bool
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(func() {
			if !c.warmShare(ctx, p) {
				stopped.Store(true)
			}
		})
	}
	ok := c.warmShare(ctx, p)
	wg.Wait()
	return ok && !stopped.Load()
}

// warmShare renders batches of the warmer's pass p until none is left,
// stepping aside for costly questions before taking each (a batch is
// never held while the worker waits); false when ctx ended.
func (c *Cache) warmShare(ctx context.Context, p *warmPass) bool {
	if c.warmHook != nil {
		c.warmHook("worker")
	}
	work := p.worker()
	for {
		if !c.stepAside(ctx) {
			return false
		}
		batch := p.take()
		if batch == nil {
			return true
		}
		work(batch)
	}
}

// warmPass is one pass of the column warmer over a resource's objects,
// handed out a batch at a time to the warmer's workers and to the
// questions that join it: each object is rendered by one of them.
type warmPass struct {
	objs   []*Object
	sc     *query.Schema // the columns rendered
	next   atomic.Int64
	worker func() func([]*Object) // a new worker's rendering of a batch
}

// take is the next batch not handed out yet; nil when none is left.
func (p *warmPass) take() []*Object {
	i := int(p.next.Add(warmBatch)) - warmBatch
	if i >= len(p.objs) {
		return nil
	}
	return p.objs[i:min(i+warmBatch, len(p.objs))]
}

// help renders batches of the pass until none is left, on the caller's
// goroutine: a question waiting for the pass's result does its share.
func (p *warmPass) help() {
	work := p.worker()
	for batch := p.take(); batch != nil; batch = p.take() {
		work(batch)
	}
}

// warmWorker renders batches of objects on one goroutine: their column
// values under sc, and the values of paths, kept on each object that
// lacks them; an age is not kept apart, its value being among the column
// values (query.Schema.KeptColumn). With pods (sc is the pods' schema),
// a pod's row is read from its copy with stand-ins (warm_row.go).
func (c *Cache) warmWorker(sc *query.Schema, paths []query.Key, pods bool) func([]*Object) {
	fp := sc.Fingerprint()
	paths = slices.DeleteFunc(slices.Clone(paths), func(p query.Key) bool {
		_, ok := sc.KeptColumn(p)
		return ok
	})
	k := kept{sc: sc}
	var seen []map[string]string // by column
	var scratch []byte           // an object with chunks joined, or a pod's copy (what is kept is copied)
	var missing []query.Key      // paths not kept on the object
	var add []keptPath           // their values (keepWith copies them)
	var rows *podRows
	if pods {
		rows = &podRows{}
	}
	return func(objs []*Object) {
		k.now = c.opts.Now()
		for _, o := range objs {
			kv := o.columns.Load()
			has := kv != nil && kv.fingerprint == fp && kv.columns != nil
			missing = missing[:0]
			for _, p := range paths {
				if !kv.holds(p.KeptName()) {
					missing = append(missing, p)
				}
			}
			if has && len(missing) == 0 {
				continue
			}
			add = add[:0]
			var vs []query.Value
			if len(missing) > 0 || rows == nil {
				raw := o.flatInto(&scratch)
				for _, p := range missing {
					add = append(add, keptPath{name: p.KeptName(), values: p.ReadJSON(raw)})
				}
				if !has {
					vs = sc.ColumnValues(raw, k.now)
				}
			} else { // no paths: the row alone, and from the copy
				ok := false
				if cp, standIns := rows.copyOf(o, &scratch); standIns {
					vs, ok = sc.ScannedColumnValues(cp, k.now)
				}
				if !ok {
					vs = sc.ColumnValues(o.flatInto(&scratch), k.now)
				}
			}
			k.o = o
			if !has {
				if len(seen) < len(vs) {
					seen = append(seen, make([]map[string]string, len(vs)-len(seen))...)
				}
				for i := range vs {
					vs[i] = shareText(vs[i], o, &seen[i])
				}
			}
			k.keepWith(vs, add)
		}
	}
}

// maxShared bounds the texts of one column a pass remembers to share.
const maxShared = 4096

// shareText is v with its text, if any, replaced by an equal one the
// object or the pass holds already: the object's name, or a text of the
// same column seen before in this pass (a status, a node, "<none>"), so
// that the values kept for many objects hold each repeated text once,
// without interning (unique.Make) the texts only one object has.
func shareText(v query.Value, o *Object, seen *map[string]string) query.Value {
	s, ok := v.AsText()
	if !ok {
		return v
	}
	if s == o.name {
		return query.Text(o.name)
	}
	if *seen == nil {
		*seen = map[string]string{}
	}
	if c, ok := (*seen)[s]; ok {
		return query.Text(c)
	}
	if len(*seen) < maxShared {
		(*seen)[s] = s
	}
	return v
}

// versionsHandled is how many objects the resource's handler has added or
// replaced so far: every version that may lack kept column values.
func (r *resourceCache) versionsHandled() int64 {
	var n int64
	for _, sh := range r.shards {
		n += sh.added.Load() + sh.modified.Load()
	}
	return n
}
