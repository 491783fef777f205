package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/query"
)

// warmed counts the objects of pods whose kept column values are sc's
// values of them; a kept value that differs fails the test.
func warmed(t *testing.T, c *Cache, sc *query.Schema) (n, total int) {
	t.Helper()
	for _, o := range c.byName["pods"].objects() {
		total++
		kv := o.columns.Load()
		if kv == nil || kv.columns == nil {
			continue
		}
		if kv.fingerprint != sc.Fingerprint() {
			t.Fatalf("%s: values kept under another schema", o.Key())
		}
		if want := sc.ColumnValues(o.Raw(), time.Now()); !reflect.DeepEqual(kv.columns, want) {
			t.Fatalf("%s: kept %v, the row's values are %v", o.Key(), kv.columns, want)
		}
		n++
	}
	return n, total
}

// TestColumnsAreWarmedAfterTheSync: once the pods have synced, every
// pod's column values are made and kept, as a question would make them,
// without a question; with LazyColumns none are until a question asks.
func TestColumnsAreWarmedAfterTheSync(t *testing.T) {
	const pods = 700
	srv := listServer(t, benchLayoutFixture(t, pods))
	cfg := &rest.Config{Host: srv.URL, DisableCompression: true}
	sc := query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))

	c, stop := startSyncedPods(t, cfg, Spec{Resource: "pods"}, Options{}, pods)
	deadline := time.Now().Add(time.Minute)
	for {
		n, total := warmed(t, c, sc)
		if n == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pods have their column values a minute after the sync", n, total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A version without values (as one that arrived since) gets them at
	// the warmer's next pass.
	r := c.byName["pods"]
	for i, o := range r.objects() {
		if i%3 == 0 {
			o.columns.Store(nil)
		}
	}
	if !c.warm(t.Context(), r, r.columnSchema(), 1) {
		t.Fatal("warm stopped")
	}
	if n, total := warmed(t, c, sc); n != total {
		t.Errorf("after a pass, %d of %d pods have their column values", n, total)
	}
	// It steps aside while a costly question holds a slot.
	for _, o := range r.objects() {
		o.columns.Store(nil)
	}
	c.asks.held <- struct{}{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan bool)
	go func() { done <- c.warm(ctx, r, r.columnSchema(), 4) }()
	cancel()
	if <-done {
		t.Error("warm went on after its context ended")
	}
	<-c.asks.held
	if n, _ := warmed(t, c, sc); n != 0 {
		t.Errorf("%d pods warmed while a question held a slot", n)
	}
	stop()

	lazy, stop := startSyncedPods(t, cfg, Spec{Resource: "pods"}, Options{LazyColumns: true}, pods)
	defer stop()
	if n, _ := warmed(t, lazy, sc); n != 0 {
		t.Errorf("LazyColumns: %d pods have column values before any question", n)
	}
}

// TestTheFirstPassRendersOnEveryProcessor: a resource's first pass
// after the sync, every row of it, is rendered by as many workers as
// there are processors, each of which renders kept values as the one
// goroutine did; the namespace/name order, which reads no value, is
// built before it.
func TestTheFirstPassRendersOnEveryProcessor(t *testing.T) {
	const pods = 3000
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	srv := listServer(t, benchLayoutFixture(t, pods))
	var passes, workers atomic.Int32
	firstPass := make(chan int32, 1)
	_, ntext, _ := canonicalSort(nil)
	nameID := orderID(ntext, nil, podSchema())
	c, stop := startSyncedPodsWith(t, &rest.Config{Host: srv.URL, DisableCompression: true}, Spec{Resource: "pods"},
		Options{PodSortIndexes: []string{"status"}}, pods, func(c *Cache) {
			c.warmHook = func(stage string) {
				switch stage {
				case "warm":
					if passes.Add(1) == 1 {
						built := false
						for _, ix := range c.byName["pods"].orders.live() {
							select {
							case <-ix.ready:
								built = built || ix.id == nameID && ix.standing
							default:
							}
						}
						if !built {
							t.Error("the first pass begins before the namespace/name order is built")
						}
					}
				case "worker":
					workers.Add(1)
				case "build": // the first pass is over
					if passes.Load() == 1 {
						firstPass <- workers.Load()
					}
				}
			}
		})
	defer stop()
	select {
	case n := <-firstPass:
		if n != 4 {
			t.Errorf("the first pass had %d workers; expect one per processor, 4", n)
		}
	case <-time.After(time.Minute):
		t.Fatal("no standing index built a minute after the sync")
	}
	if n, total := warmed(t, c, podSchema()); n != total {
		t.Errorf("after the first pass, %d of %d pods have their column values", n, total)
	}
}

// TestCountsJoinTheWarmersPass: a window's counts by a column, opened
// while the warmer's pass is under way, render their share of its rows
// (and the warmer does not step aside for them meanwhile) rather than
// every row beside it, and count exactly; counts by paths only, which
// render no row, and counts of a narrow selection (a namespace of a
// tenth of the pods), which render only theirs, leave the pass to the
// warmer.
func TestCountsJoinTheWarmersPass(t *testing.T) {
	const pods = 2100 // bench-002 holds 100 of them
	c, r, stop := lazyPods(t, pods)
	defer stop()
	sc := r.columnSchema()
	// pass is a warmer's pass under way, which no worker of the warmer
	// takes: what is rendered of it, a question rendered, noting the
	// questions the warmer would step aside for (aside).
	var mu sync.Mutex
	var aside []int
	pass := func() *warmPass {
		p := &warmPass{objs: r.objects(), sc: sc, worker: func() func([]*Object) {
			work := c.warmWorker(sc, nil, true)
			return func(objs []*Object) {
				mu.Lock()
				aside = append(aside, c.asks.inUse()-c.waitingForWarmer())
				mu.Unlock()
				work(objs)
			}
		}}
		r.orders.joinable(p)
		t.Cleanup(func() { r.orders.joinable(nil) })
		return p
	}
	groups := func(b []byte) map[string]int {
		t.Helper()
		var body struct {
			Counts struct {
				Groups []struct {
					Values []any
					Count  int
				}
			}
		}
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, g := range body.Counts.Groups {
			out[fmt.Sprint(g.Values...)] += g.Count
		}
		return out
	}
	counted := func(ns string, keys []query.Key) map[string]int {
		t.Helper()
		w, err := c.Window("pods", WindowQuery{Namespace: ns, Ask: &Ask{Schema: podSchema(), Now: time.Now()}, Limit: 1, GroupBy: keys}, make(chan struct{}, 1))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			if m, ok := w.Next(); ok && m.Type == WindowFull {
				return groups(append(append([]byte{}, m.raw...), m.rawTail...))
			}
			if time.Now().After(deadline) {
				t.Fatal("no counts a minute after the window opened")
			}
		}
	}
	keys, err := podSchema().ParseKeys("groupBy", "status,node", 2, false)
	if err != nil {
		t.Fatal(err)
	}
	// The counts as the pods' rows give them, read apart (nothing kept).
	counter := query.NewCounter(keys)
	for _, o := range r.objects() {
		var rec query.Record
		sc.Fill(&rec, o.Namespace(), o.Name(), o.Raw(), time.Now(), nil)
		counter.Add(&rec)
	}
	want := groups(append(append([]byte(`{"counts":`), encodeCounts(keys, counter)...), '}'))

	// And once they have rendered their share, while they count.
	counting := func() {
		mu.Lock()
		aside = append(aside, c.asks.inUse()-c.waitingForWarmer())
		mu.Unlock()
	}
	countHold.Store(&counting)
	p := pass()
	got := counted("", keys)
	countHold.Store(nil)
	if next := int(p.next.Load()); next < len(p.objs) {
		t.Errorf("%d of the pass's %d pods handed out once the counts were made: the counts rendered the rows beside the pass", next, len(p.objs))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("counts by status and node %v; expect %v", got, want)
	}
	if len(aside) < 2 {
		t.Fatalf("%d looks at the slots while the counts rendered and counted", len(aside))
	}
	for _, n := range aside {
		if n > 0 {
			t.Fatalf("while the counts rendered rows of the pass or counted, %d questions held a slot that the warmer would step aside for", n)
		}
	}
	if n, total := warmed(t, c, sc); n != total {
		t.Errorf("after the counts, %d of %d pods have their column values", n, total)
	}

	for _, o := range r.objects() {
		o.columns.Store(nil)
	}
	byPath, err := podSchema().ParseKeys("groupBy", "spec.nodeName", 2, false)
	if err != nil {
		t.Fatal(err)
	}
	p = pass()
	counted("", byPath)
	if next := p.next.Load(); next != 0 {
		t.Errorf("counts by a path took %d pods of the warmer's pass; expect none (they render no row)", next)
	}
	counted("bench-002", keys)
	if next := p.next.Load(); next != 0 {
		t.Errorf("counts of one namespace took %d pods of the warmer's pass; expect none (they render theirs only)", next)
	}
}

// TestTheWarmerGoesOnWhenTheQuestionEnds: the warmer's workers step
// aside while a costly question holds a slot, and go on as soon as the
// question releases it, or joins the pass (a window's counts, helpWarm),
// or waits for the standing indexes (awaitStanding): not at a later look,
// so that a short question stalls the pass for its own time only, and
// one that needs the pass never for long.
func TestTheWarmerGoesOnWhenTheQuestionEnds(t *testing.T) {
	defer func(d time.Duration) { warmAsideLook = d }(warmAsideLook)
	warmAsideLook = time.Hour // only what the question does ends a step aside
	const pods = 2000
	c, r, stop := lazyPods(t, pods)
	defer stop()
	sc := r.columnSchema()
	sorts, err := podSorts([]string{"status"})
	if err != nil {
		t.Fatal(err)
	}
	_, status, _ := canonicalSort(sorts[1])
	aside := make(chan struct{}, 1)
	c.warmHook = func(stage string) {
		if stage == "aside" {
			select {
			case aside <- struct{}{}:
			default:
			}
		}
	}
	within := func(what string, ch <-chan bool) {
		t.Helper()
		select {
		case ok := <-ch:
			if !ok {
				t.Fatalf("%s: the pass stopped", what)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: the warmer's pass not over a minute later", what)
		}
	}
	for _, tc := range []struct {
		name string
		// ease is what the question holding a slot does once the
		// warmer steps aside for it; passed waits for the pass's end.
		ease func(release func(), passed func(string))
	}{
		{"the question ends", func(release func(), passed func(string)) {
			release()
			passed("after the slot's release")
		}},
		{"the question joins the pass", func(release func(), passed func(string)) {
			leave := r.orders.helpWarm(sc, true)
			passed("while counts that joined it hold their slot")
			leave()
			release()
		}},
		{"the question waits for the standing indexes", func(release func(), passed func(string)) {
			r.orders.expectStanding([]string{status})
			waited := make(chan struct{})
			go func() {
				r.orders.awaitStanding(status, nil)
				close(waited)
			}()
			passed("while a question waiting for the standing indexes holds its slot")
			r.orders.standingDone()
			<-waited
			release()
			r.orders.standing.Store(nil)
		}},
	} {
		for _, o := range r.objects() {
			o.columns.Store(nil)
		}
		select {
		case <-aside: // the last pass's
		default:
		}
		release, err := c.asks.take(QueryBudget)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan bool, 1)
		go func() { done <- c.warm(t.Context(), r, sc, 2) }()
		select {
		case <-aside:
		case <-time.After(time.Minute):
			t.Fatalf("%s: the warmer did not step aside for a question holding a slot", tc.name)
		}
		tc.ease(release, func(what string) { within(tc.name+", "+what, done) })
		if n, total := warmed(t, c, sc); n != total {
			t.Errorf("%s: after the pass, %d of %d pods have their column values", tc.name, n, total)
		}
	}
}

// TestCountsWaitForTheWarmersFirstPass: a window's counts by a column
// opened before the warmer's first pass over the pods can be joined
// (the warmer looking for the sync, or building the namespace/name
// order) wait for it, counted as helping the warmer, and join it, rather
// than render every row alone while the warmer steps aside for them; and
// count every pod.
func TestCountsWaitForTheWarmersFirstPass(t *testing.T) {
	defer func(d time.Duration) { warmAsideLook = d }(warmAsideLook)
	warmAsideLook = time.Hour // a step aside for the counts would hold the pass
	const pods = 2100
	c, r, stop := lazyPods(t, pods)
	defer stop()
	sc := r.columnSchema()
	r.orders.expectFirstPass() // as Start does for a warmer
	keys, err := podSchema().ParseKeys("groupBy", "status,node", 2, false)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Window("pods", WindowQuery{Ask: &Ask{Schema: podSchema(), Now: time.Now()}, Limit: 1, GroupBy: keys}, make(chan struct{}, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for deadline := time.Now().Add(time.Minute); c.waitingForWarmer() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the counts are not counted as waiting for the warmer")
		}
	}
	if n, _ := warmed(t, c, sc); n != 0 {
		t.Fatalf("%d pods rendered before the warmer's first pass", n)
	}
	done := make(chan bool, 1)
	go func() { done <- c.warm(t.Context(), r, sc, 1) }()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("the pass stopped")
		}
	case <-time.After(time.Minute):
		t.Fatal("the warmer's pass not over a minute later: it stepped aside for the counts")
	}
	var body struct {
		Counts struct {
			Groups []struct{ Count int }
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if m, ok := w.Next(); ok && m.Type == WindowFull {
			if err := json.Unmarshal(append(append([]byte{}, m.raw...), m.rawTail...), &body); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no counts a minute after the pass")
		}
	}
	total := 0
	for _, g := range body.Counts.Groups {
		total += g.Count
	}
	if total != pods {
		t.Errorf("the counts count %d pods; expect %d", total, pods)
	}
	if n, total := warmed(t, c, sc); n != total {
		t.Errorf("after the pass, %d of %d pods have their column values", n, total)
	}
}

// lazyPods is a synced cache of n pods of the bench layout with no column
// warmer (Options.LazyColumns: the test makes the passes) and its pods.
func lazyPods(t *testing.T, n int) (*Cache, *resourceCache, func()) {
	t.Helper()
	srv := listServer(t, benchLayoutFixture(t, n))
	c, stop := startSyncedPods(t, &rest.Config{Host: srv.URL, DisableCompression: true}, Spec{Resource: "pods"}, Options{LazyColumns: true}, n)
	return c, c.byName["pods"], stop
}
