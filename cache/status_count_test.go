package cache

import (
	"fmt"
	"testing"

	toolscache "k8s.io/client-go/tools/cache"
)

// syncedFlag is a controller whose sync the test decides.
type syncedFlag struct {
	toolscache.Controller
	synced bool
	asked  int
}

func (f *syncedFlag) HasSynced() bool {
	f.asked++
	return f.synced
}

// listingStore is a store that counts how often it is listed.
type listingStore struct {
	toolscache.Indexer
	listed int
}

func (s *listingStore) ListKeys() []string { s.listed++; return s.Indexer.ListKeys() }
func (s *listingStore) List() []any        { s.listed++; return s.Indexer.List() }

// TestCountWithoutListingTheStore: a shard counts the adds less the deletes
// its handler saw, before its sync and after, and never lists the store to
// count (readiness probes ask continually; a listing is an n-key slice).
func TestCountWithoutListingTheStore(t *testing.T) {
	reg := &syncedFlag{}
	store := &listingStore{Indexer: toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})}
	inf := informer{Indexer: store, Controller: reg}
	for i := range 5 {
		o, err := NewObject(fmt.Appendf(nil, `{"metadata":{"name":"p%d","namespace":"ns"}}`, i), "v1", "Pod")
		if err != nil {
			t.Fatal(err)
		}
		if err := inf.GetStore().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	sh := &shard{informer: inf}
	sh.added.Store(6)
	sh.deleted.Store(1)
	if got := sh.count(); got != 5 {
		t.Fatalf("before sync: %d, want the handler's 6 adds less 1 delete", got)
	}
	reg.synced = true
	sh.deleted.Store(2)
	if got := sh.count(); got != 4 {
		t.Fatalf("after sync: %d, want the handler's 6 adds less 2 deletes", got)
	}
	if store.listed != 0 {
		t.Fatalf("the store was listed %d times to count it", store.listed)
	}
}

// TestSyncIsAskedOfTheInformerUntilTrue: every answer asks whether its
// resource has synced, and the informer's HasSynced takes its queue's
// lock, held while events are applied. Given an informer not yet synced,
// the shard asks it each time; once it has said yes, the shard never asks
// again, and stays synced.
func TestSyncIsAskedOfTheInformerUntilTrue(t *testing.T) {
	reg := &syncedFlag{}
	sh := &shard{informer: informer{Indexer: toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{}), Controller: reg}}
	r := &resourceCache{shards: []*shard{sh}}
	if r.synced() || r.synced() || reg.asked != 2 {
		t.Fatalf("before sync: synced, or the informer asked %d times for 2 questions", reg.asked)
	}
	reg.synced = true
	for range 100 {
		if !r.synced() {
			t.Fatal("not synced after the informer said so")
		}
	}
	if reg.asked != 3 {
		t.Fatalf("the informer was asked %d times; want once more than before, when it said yes", reg.asked)
	}
}
