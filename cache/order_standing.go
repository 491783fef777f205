package cache

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/query"
)

// Standing indexes: the ordered indexes of the pod sorts a dashboard asks
// by clicking a column header (Options.PodSortIndexes), and the
// namespace/name order its unsorted view opens with, are built ahead of
// the questions, so that the first click finds its index ready rather
// than waiting for a build over every pod. They are built after the
// sync (never during it: the initial sync pays nothing for them), by the
// column warmer: the namespace/name order, which reads no value, before
// its first pass (standBare), the others right after it has kept the
// pods' column values, which they read: those a question waits for
// first, then the rest
// together, in one walk over the pods and a sort each, on every
// processor. A question over a standing sort of columns asked before
// they are first built joins the warmer's pass and waits for its own
// index (awaitStanding) instead of rendering every row itself. The
// handler keeps them as it keeps every index; they are never dropped
// (neither idle nor least recently used), and not counted in maxOrders.
// A descending sort reads its key's index backwards (order_reverse.go),
// so one index serves both directions of a column. LazyColumns builds
// none.

// podResource is the resource whose sorts PodSortIndexes names.
var podResource = schema.GroupResource{Resource: "pods"}

// DefaultPodSortIndexes are the pod sorts of the dashboard's column
// headers a dashboard of pods is sorted by most (what is failing, what
// restarts, where, how old): its flag's default. Each standing index
// costs memory per pod for good, so the default leaves the rest (ready,
// ip, name) to the first question, as for any other key.
var DefaultPodSortIndexes = []string{"status", "restarts", "node", "age"}

// podSorts parses Options.PodSortIndexes against the pods' Table columns:
// each a sort as the sort parameter takes it. The namespace/name order
// comes first, when there is any.
func podSorts(texts []string) ([][]query.SortKey, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	sc := query.NewSchema(table.ForResource(podResource))
	out := [][]query.SortKey{nil}
	for _, text := range texts {
		keys, err := sc.ParseSort(text)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", text, err)
		}
		if len(keys) == 0 {
			continue
		}
		if !indexable(keys, sc) {
			return nil, fmt.Errorf("%q: its values change with the clock; an index cannot hold them", text)
		}
		out = append(out, keys)
	}
	return out, nil
}

// ValidatePodSortIndexes reports what is wrong with pod sorts for
// Options.PodSortIndexes.
func ValidatePodSortIndexes(texts []string) error {
	_, err := podSorts(texts)
	return err
}

// standing returns the sorts r keeps standing indexes of, under sc (its
// columnSchema); none but for pods.
func (c *Cache) standing(r *resourceCache) [][]query.SortKey {
	if (schema.GroupResource{Group: r.res.Group, Resource: r.res.Plural}) != podResource {
		return nil
	}
	return c.podSorts
}

// stand builds r's standing indexes that do not exist yet, on the
// caller's goroutine (the column warmer's) and as many more as there
// are processors: those a question waits for first (awaitStanding), then
// the rest together, from one listing of the objects, each object's
// values read once for all of them, one sort each (buildTogether).
// false when ctx ended before they were joined.
func (c *Cache) stand(ctx context.Context, r *resourceCache, sc *query.Schema) bool {
	if !c.stepAside(ctx) {
		return false
	}
	start := time.Now()
	var ixs []*order
	var texts []string
	for _, keys := range c.standing(r) {
		ck, text, _ := canonicalSort(keys)
		if ix, found := r.orders.joinAs(ck, text, nil, sc, true); !found {
			ixs, texts = append(ixs, ix), append(texts, text)
		}
	}
	r.orders.standingDone() // a question waiting now waits for its own index's build
	if len(ixs) == 0 {
		return true
	}
	if c.warmHook != nil {
		c.warmHook("build")
	}
	first, rest := r.orders.standing.Load().wantedFirst(ixs, texts)
	n := 0
	for _, group := range [][]*order{first, rest} {
		if len(group) > 0 {
			objs := r.objects() // after the indexes joined the set: see build
			buildTogether(group, objs, runtime.GOMAXPROCS(0))
			n = len(objs)
			if c.warmHook != nil {
				c.warmHook("built")
			}
		}
	}
	c.opts.Logger.Debug("standing ordered indexes built", "resource", r.res.Name, "indexes", len(ixs),
		"first", len(first), "objects", n, "took", time.Since(start).Round(time.Millisecond))
	return true
}

// standBare builds r's standing indexes that read no value, the
// namespace/name order, before the warmer's first pass over r (which
// they need not wait for): a dashboard's first screen asks for that
// order, and so finds it built rather than building it beside the
// pass's workers. false when ctx ended.
func (c *Cache) standBare(ctx context.Context, r *resourceCache, sc *query.Schema) bool {
	if !c.stepAside(ctx) {
		return false
	}
	var ixs []*order
	for _, keys := range c.standing(r) {
		if len(keys) > 0 {
			continue
		}
		ck, text, _ := canonicalSort(keys)
		if ix, found := r.orders.joinAs(ck, text, nil, sc, true); !found {
			ixs = append(ixs, ix)
		}
	}
	if len(ixs) > 0 {
		buildTogether(ixs, r.objects(), runtime.GOMAXPROCS(0)) // after the indexes joined the set: see build
	}
	return true
}

// standingWait is what a question over a standing sort of Table columns
// waits for while the column warmer has yet to build the standing
// indexes the first time: rather than render every row itself,
// competing with the warmer for the same work, it takes batches of the
// warmer's pass (warmPass) and then waits for the index the warmer
// builds. The questions waiting are counted, so that the warmer does not
// step aside for them (stepAside).
type standingWait struct {
	texts   []string // the standing sorts, canonical (canonicalSort)
	waiting atomic.Int32
	// joined is closed once every standing index is in the set (being
	// built or built), or the warmer stopped: a question then waits for
	// its own index only.
	joined chan struct{}
	once   sync.Once
	// wanted are the texts questions wait for, as bits of texts: their
	// indexes are built before the others.
	wanted atomic.Uint64
}

// wantedFirst splits ixs (of these texts, in their order) into those a
// question waits for and the rest (w may be nil: none waits).
func (w *standingWait) wantedFirst(ixs []*order, texts []string) (first, rest []*order) {
	if w == nil {
		return nil, ixs
	}
	wanted := w.wanted.Load()
	for i, ix := range ixs {
		if at := slices.Index(w.texts, texts[i]); at >= 0 && wanted&(1<<at) != 0 {
			first = append(first, ix)
		} else {
			rest = append(rest, ix)
		}
	}
	return first, rest
}

// joinable offers the warmer's pass under way (nil: none) to the
// questions that wait for the standing indexes, and to those about to
// render the rows it renders (helpWarm).
func (os *orders) joinable(p *warmPass) {
	os.warming.Store(p)
	if p != nil {
		os.firstPassOpen()
	}
}

// firstPass is the column warmer's first pass over a resource as the
// questions that come before it can be joined see it (the warmer looks
// for the sync every warmWait, then builds the namespace/name order):
// ready is closed once it can (joinable), or the warmer stopped. Such a
// question about to render every row (a window's counts by a column) or
// waiting for the standing indexes waits for it, counted as helping the
// warmer (which does not step aside for it), and joins it, rather than
// render every row alone beside a warmer stepping aside for it.
type firstPass struct {
	ready chan struct{}
	once  sync.Once
}

// expectFirstPass makes questions wait for the warmer's first pass over
// the resource (awaitFirstPass): called before the warmer starts.
func (os *orders) expectFirstPass() {
	os.first.Store(&firstPass{ready: make(chan struct{})})
}

// firstPassOpen lets the questions waiting for the warmer's first pass
// go on: it can be joined, or the warmer stopped.
func (os *orders) firstPassOpen() {
	if f := os.first.Load(); f != nil {
		f.once.Do(func() { close(f.ready) })
	}
}

// awaitFirstPass waits until the warmer's first pass over the resource,
// when one is expected, can be joined, or the warmer stopped.
func (os *orders) awaitFirstPass() {
	if f := os.first.Load(); f != nil {
		<-f.ready
	}
}

// helpWarm renders, on the caller's goroutine, batches of the warmer's
// pass under way over the resource under sc, if any, until none is
// left: a question about to render every row (a window's counts by a
// column) does its share of the pass instead of rendering the same rows
// beside it, then reads the values kept. The warmer does not step aside
// for it (stepAside), when it holds a slot (slot), until leave: it
// renders what the question needs, and what is left of the question
// reads the values kept, beside the standing indexes' build.
func (os *orders) helpWarm(sc *query.Schema, slot bool) (leave func()) {
	leave = func() {}
	if slot {
		os.helping.Add(1)
		os.eased.ring()
		leave = sync.OnceFunc(func() { os.helping.Add(-1) })
	}
	os.awaitFirstPass()
	p := os.warming.Load()
	if p == nil || p.sc.Fingerprint() != sc.Fingerprint() {
		leave() // no pass to help: the warmer steps aside for the rows rendered
		return func() {}
	}
	p.help()
	return leave
}

// renderedSorts are the canonical texts of the sorts among these that
// read Table columns: those whose index the warmer builds from the rows
// it renders, and a question would render every row to build. The
// namespace/name order, or one by age or a path, costs a question far
// less, and is not waited for.
func renderedSorts(sorts [][]query.SortKey) []string {
	var texts []string
	for _, keys := range sorts {
		if query.NeedsCells(keys) {
			_, text, _ := canonicalSort(keys)
			texts = append(texts, text)
		}
	}
	return texts
}

// expectStanding makes questions over these sorts (canonical texts) wait
// for the warmer's first build of them: called before the warmer starts,
// which calls standingDone after.
func (os *orders) expectStanding(texts []string) {
	if len(texts) == 0 {
		return
	}
	os.standing.Store(&standingWait{texts: texts[:min(len(texts), 64)], joined: make(chan struct{})})
}

// standingDone lets the questions waiting for the standing indexes wait
// for their own index's build instead: every standing index is in the
// set, or the warmer stopped.
func (os *orders) standingDone() {
	if w := os.standing.Load(); w != nil {
		w.once.Do(func() { close(w.joined) })
	}
}

// awaitStanding waits, when the sort of this text holding no keys is a
// standing one the warmer has yet to build, until its index is in the
// set (the caller then waits for its build: index), rendering rows of
// the warmer's pass meanwhile (the question holds a slot for the work,
// and does its share of it instead of all of it); the warmer builds the
// indexes questions wait for before the others (stand).
func (os *orders) awaitStanding(text string, held []query.Key) {
	w := os.standing.Load()
	if w == nil || len(held) > 0 {
		return
	}
	at := slices.Index(w.texts, text)
	if at < 0 {
		return
	}
	select {
	case <-w.joined:
		return
	default:
	}
	w.waiting.Add(1)
	os.eased.ring()
	defer w.waiting.Add(-1)
	w.wanted.Or(1 << at)
	os.awaitFirstPass()
	if p := os.warming.Load(); p != nil {
		p.help() // the rows the build reads, rendered with the warmer
	}
	<-w.joined
}

// waitingForWarmer is the number of questions waiting for r's
// standing indexes or rendering rows of its warmer's pass.
func (r *resourceCache) waitingForWarmer() int {
	n := int(r.orders.helping.Load())
	if w := r.orders.standing.Load(); w != nil {
		n += int(w.waiting.Load())
	}
	return n
}
