package cache

import (
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestOrderStatsSayWhenSettled: OrderStats count the standing indexes
// the warmer has yet to build, and once none is pending every standing
// index is built and every pod's column values are kept (the warmer's
// first pass is done: what a harness waits for before reading a settled
// heap); an index a question builds counts as asked. With LazyColumns
// nothing is pending, ever.
func TestOrderStatsSayWhenSettled(t *testing.T) {
	const pods = 600
	srv := listServer(t, benchLayoutFixture(t, pods))
	cfg := &rest.Config{Host: srv.URL, DisableCompression: true}
	c, stop := startSyncedPods(t, cfg, Spec{Resource: "pods"}, Options{PodSortIndexes: []string{"restarts", "-node"}}, pods)
	defer stop()
	stats := func(c *Cache) OrderStats {
		st := c.OrderStats()
		if len(st) != 1 || st[0].Resource != "pods" {
			t.Fatalf("OrderStats: %+v, expect one of pods", st)
		}
		return st[0]
	}
	deadline := time.Now().Add(time.Minute)
	for stats(c).StandingPending > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the sync: %+v", stats(c))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := stats(c); got != (OrderStats{Resource: "pods", Standing: 3}) {
		t.Errorf("settled: %+v, expect 3 standing (restarts, node, namespace/name), none asked or pending", got)
	}
	r := c.byName["pods"]
	for _, ix := range r.orders.live() {
		select {
		case <-ix.ready:
		default:
			t.Errorf("index %q counted as built while being built", ix.id)
		}
	}
	for _, o := range r.objects() {
		if kv := o.columns.Load(); kv == nil || kv.columns == nil {
			t.Fatalf("settled, but %s has no kept column values", o.Key())
		}
	}
	sc := podSchema()
	keys, err := sc.ParseSort("ip")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.List("pods", ListQuery{Limit: 10, Ask: &Ask{Schema: sc, Sort: keys, SortText: "ip", Now: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if got := stats(c); got != (OrderStats{Resource: "pods", Asked: 1, Standing: 3}) {
		t.Errorf("after a sort by ip: %+v, expect 1 asked and 3 standing", got)
	}

	lazy, stopLazy := startSyncedPods(t, cfg, Spec{Resource: "pods"}, Options{LazyColumns: true, PodSortIndexes: []string{"restarts"}}, pods)
	defer stopLazy()
	if got := stats(lazy); got != (OrderStats{Resource: "pods"}) {
		t.Errorf("with LazyColumns: %+v, expect nothing", got)
	}
}
