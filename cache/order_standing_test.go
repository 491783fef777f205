package cache

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestStandingIndexesAreReadyForTheFirstSort: after the sync, the pods'
// standing indexes (the sorts configured and the namespace/name order)
// are built without a question, and are what a build from scratch gives;
// a first question of a configured sort, ascending or descending, builds
// nothing; the handler keeps them through changes; they are never
// dropped, neither idle nor beyond maxOrders, which does not count them.
// With LazyColumns, or none configured, there are none.
func TestStandingIndexesAreReadyForTheFirstSort(t *testing.T) {
	const pods = 600
	srv := listServer(t, benchLayoutFixture(t, pods))
	cfg := &rest.Config{Host: srv.URL, DisableCompression: true}
	sc := podSchema()
	c, stop := startSyncedPods(t, cfg, Spec{Resource: "pods"}, Options{PodSortIndexes: []string{"restarts", "-node"}}, pods)
	defer stop()
	r := c.byName["pods"]
	names := func() []string {
		var out []string
		for _, ix := range r.orders.live() {
			out = append(out, strings.Join(strings.Split(ix.id, "\x00")[1:], " "))
		}
		slices.Sort(out)
		return out
	}
	want := []string{"", "node", "restarts"}
	deadline := time.Now().Add(time.Minute)
	for !slices.Equal(names(), want) || slices.ContainsFunc(r.orders.live(), func(ix *order) bool {
		select {
		case <-ix.ready:
			return false
		default:
			return true
		}
	}) {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the sync the indexes are %q; expect %q, built", names(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, ix := range r.orders.live() {
		if !ix.standing {
			t.Errorf("index %q is not standing", ix.id)
		}
		if err := ix.check(r.objects()); err != nil {
			t.Error(err)
		}
	}
	for _, text := range []string{"restarts", "-restarts", "node", "-node", ""} {
		keys, err := sc.ParseSort(text)
		if err != nil {
			t.Fatal(err)
		}
		w, built := r.orders.index(r, keys, nil, sc)
		if built || !w.ix.standing {
			t.Errorf("sort %q: built %v, from a standing index %v", text, built, w.ix.standing)
		}
		list, err := c.List("pods", ListQuery{Limit: 10, Ask: &Ask{Schema: sc, Sort: keys, SortText: text, Now: time.Now()}})
		if err != nil || list.Total != pods || len(list.Items) != 10 {
			t.Fatalf("sort %q: %d of %d items, %v", text, len(list.Items), list.Total, err)
		}
	}
	if got := names(); !slices.Equal(got, want) {
		t.Errorf("after the questions the indexes are %q; expect %q", got, want)
	}

	// Kept through changes: deletes and updates, as the handler applies
	// them.
	objs := r.objects()
	for i, o := range objs[:50] {
		if i%2 == 0 {
			r.orders.change(o, nil)
			continue
		}
		raw := strings.Replace(string(o.Raw()), `"restartCount":`, `"restartCount":7`, 1)
		cur, err := NewObject([]byte(raw), "v1", "Pod")
		if err != nil {
			t.Fatal(err)
		}
		r.orders.change(o, cur)
		objs[i] = cur
	}
	var store []*Object
	for i, o := range objs {
		if i >= 50 || i%2 == 1 {
			store = append(store, o)
		}
	}
	for _, ix := range r.orders.live() {
		if err := ix.check(store); err != nil {
			t.Errorf("after changes: %v", err)
		}
	}

	// Never dropped: idle, or beyond maxOrders of indexes asked for.
	for _, ix := range r.orders.live() {
		ix.used.Store(0)
	}
	r.orders.dropIdle()
	for i := range maxOrders + 2 {
		keys, _ := sc.ParseSort("restarts")
		other, _ := r.orders.join(keys, fmt.Sprint("restarts#", i), nil, sc)
		other.build(nil)
	}
	standing := 0
	for _, ix := range r.orders.live() {
		if ix.standing {
			standing++
		}
	}
	if n := len(r.orders.live()); standing != len(want) || n != maxOrders+len(want) {
		t.Errorf("idle and beyond maxOrders: %d standing indexes of %d live; expect %d of %d", standing, n, len(want), maxOrders+len(want))
	}

	for name, opts := range map[string]Options{
		"LazyColumns": {LazyColumns: true, PodSortIndexes: []string{"restarts"}},
		"none":        {},
	} {
		c, stop := startSyncedPods(t, cfg, Spec{Resource: "pods"}, opts, pods)
		for deadline := time.Now().Add(time.Minute); !opts.LazyColumns; time.Sleep(20 * time.Millisecond) {
			if n, total := warmed(t, c, sc); n == total { // the warmer's pass is done
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the warmer has not finished a minute after the sync", name)
			}
		}
		if n := len(c.byName["pods"].orders.live()); n != 0 {
			t.Errorf("%s: %d indexes before any question", name, n)
		}
		stop()
	}
}

// TestPodSortIndexesAreValidated: a sort that is not one (an unknown
// column, a bad path) or whose values move with the clock is an error
// naming it.
func TestPodSortIndexesAreValidated(t *testing.T) {
	if err := ValidatePodSortIndexes(DefaultPodSortIndexes); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for _, bad := range []string{"bogus..", "-"} {
		if err := ValidatePodSortIndexes([]string{"status", bad}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := New(&rest.Config{Host: "http://127.0.0.1"}, nil, Options{PodSortIndexes: []string{"a..b"}}); err == nil {
		t.Error("New took a bad pod sort")
	}
}
