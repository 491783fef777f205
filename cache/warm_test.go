package cache

import (
	"context"
	"reflect"
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
	if !c.warm(t.Context(), r, r.columnSchema()) {
		t.Fatal("warm stopped")
	}
	if n, total := warmed(t, c, sc); n != total {
		t.Errorf("after a pass, %d of %d pods have their column values", n, total)
	}
	// It steps aside while a costly question holds a slot.
	for _, o := range r.objects() {
		o.columns.Store(nil)
	}
	c.asks <- struct{}{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan bool)
	go func() { done <- c.warm(ctx, r, r.columnSchema()) }()
	cancel()
	if <-done {
		t.Error("warm went on after its context ended")
	}
	<-c.asks
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
