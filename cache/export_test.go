package cache

import (
	"strings"
	"sync"

	"github.com/kubeindex/kubeindex/ipowner"
	"github.com/kubeindex/kubeindex/query"
)

// Test-only entry points, compiled only with the tests.

// LookupIP is LookupAddress without a moment or a port.
func (c *Cache) LookupIP(ip string) (IPLookup, error) {
	return c.LookupAddress(ipowner.Query{IP: ip})
}

// OrderedIndexes are the sorts of a resource's ordered indexes.
func (c *Cache) OrderedIndexes(resource string) []string {
	var out []string
	for _, ix := range c.byName[resource].orders.live() {
		out = append(out, strings.Split(ix.id, "\x00")[1])
	}
	return out
}

// OrderedIndexFor names, as OrderedIndexes does, the index answering a
// sort: its own, or the one it reads backwards.
func OrderedIndexFor(keys []query.SortKey) string {
	_, text, _ := canonicalSort(keys)
	return text
}

// DropIdleOrderedIndexes drops the resource's ordered indexes idle as of
// the cache's clock, as the handler does now and then.
func (c *Cache) DropIdleOrderedIndexes(resource string) {
	c.byName[resource].orders.dropIdle()
}

// AnswerNarrowFromSelection makes every question whose selection narrows
// (a namespace, an index value) be answered from its selection, until
// the test ends.
func AnswerNarrowFromSelection(t interface{ Cleanup(func()) }) {
	old := narrowShare
	narrowShare = 0
	t.Cleanup(func() { narrowShare = old })
}

// LoadViewsFromSnapshots makes every live window's view be loaded from a
// snapshot of the objects rather than from an ordered index, until the
// test ends.
func LoadViewsFromSnapshots(t interface{ Cleanup(func()) }) {
	viewsFromIndexes = false
	t.Cleanup(func() { viewsFromIndexes = true })
}

// HoldCounts makes the counts of views' rows wait until release is
// called (or the test ends) before they begin.
func HoldCounts(t interface{ Cleanup(func()) }) (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	hold := func() { <-ch }
	countHold.Store(&hold)
	t.Cleanup(func() { release(); countHold.Store(nil) })
	return release
}

// CheckOrderedIndexes reports how any ordered index of the resource
// differs from one built from scratch over its store.
func (c *Cache) CheckOrderedIndexes(resource string) error {
	r := c.byName[resource]
	for _, ix := range r.orders.live() {
		if err := ix.check(r.objects()); err != nil {
			return err
		}
	}
	return nil
}

// HoldEvents makes the event handler of the resource's shards call hold
// before handing each event on (nil: no more), as a handler that lags
// behind its reflector.
func (c *Cache) HoldEvents(resource string, hold func()) {
	r, err := c.resource(resource)
	if err != nil {
		panic(err)
	}
	for _, sh := range r.shards {
		if hold == nil {
			sh.hold.Store(nil)
		} else {
			sh.hold.Store(&hold)
		}
	}
}

// HoldFeedAhead makes the feed ahead of the resource's shards
// (addresses_feed_ahead.go) call hold before each batch it feeds (nil: no
// more); it applies to feeds started after the call.
func (c *Cache) HoldFeedAhead(resource string, hold func()) {
	r, err := c.resource(resource)
	if err != nil {
		panic(err)
	}
	for _, sh := range r.shards {
		if hold == nil {
			sh.holdFeed.Store(nil)
		} else {
			sh.holdFeed.Store(&hold)
		}
	}
}

// InformersSynced reports whether the resource's informers have synced,
// whatever the shards' handlers and feeds still do.
func (c *Cache) InformersSynced(resource string) bool {
	r, err := c.resource(resource)
	if err != nil {
		panic(err)
	}
	for _, sh := range r.shards {
		if !sh.informer.HasSynced() {
			return false
		}
	}
	return true
}

// ListRV is the highest resourceVersion the resource's reflectors have
// taken in, read without moving the stream's position.
func (c *Cache) ListRV(resource string) uint64 {
	r, err := c.resource(resource)
	if err != nil {
		panic(err)
	}
	return r.listRV()
}

// WindowCounts is how many counts the live windows share now.
func (c *Cache) WindowCounts() int {
	c.wins.mu.Lock()
	defer c.wins.mu.Unlock()
	return len(c.wins.counts)
}
