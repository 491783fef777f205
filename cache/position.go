package cache

import (
	"context"
	"fmt"
	"time"
)

// Position returns the resource's stream position: the resourceVersion
// that a list read from the cache right after it is at least as fresh as,
// and that a watch (Watch with WatchQuery.ResourceVersion) resumes from
// without a gap. It starts the resource's stream history if no
// subscription has yet. Before the resource has synced it returns
// ErrNotSynced: the history may only start once the broker holds the
// informers' initial list, else resuming from a position older than that
// list would replay it as new events instead of being refused. Safe for
// concurrent use.
//
// A list taken after Position may already hold a few changes the position
// does not count; a watch from the position then repeats them (whole
// objects, harmless to apply again), never skips one.
func (c *Cache) Position(resource string) (uint64, error) {
	r, err := c.resource(resource)
	if err != nil {
		return 0, err
	}
	pos, ok := r.position()
	if !ok {
		return 0, fmt.Errorf("%s: %w", r.res.Name, ErrNotSynced)
	}
	return pos, nil
}

// position is Position; ok is false, and nothing started, until every
// shard's event handler has received the initial list (its registration's
// HasSynced, not the informer's, which is true as soon as the list is in
// the informer's store).
func (r *resourceCache) position() (pos uint64, ok bool) {
	if !r.synced() {
		return 0, false
	}
	listRV := r.listRV()
	b := r.broker
	b.mu.Lock()
	defer b.mu.Unlock()
	b.startLocked(listRV)
	// The informers may have seen bookmarks, or events not yet handed to
	// the broker: those arrive stamped with this position, so resuming
	// from it re-sends them (see broker).
	b.log.Advance(listRV)
	return b.log.Head(), true
}

// positionPoll is how often WaitPosition looks again: the position also
// moves with the API server's bookmarks, which publish nothing.
const positionPoll = 20 * time.Millisecond

// WaitPosition waits until the resource's position (see Position) reaches
// rv, or until ctx ends, and returns the position it saw last; reached
// says whether it got there. Before the resource has synced its position
// is 0 and not reached.
//
// A position this server has not reached yet is one another replica sent
// (or a future one): it is reached only once every event up to it has
// been handed to the broker, not as soon as the informers' reflector has
// taken it in. A subscription resuming from it then receives neither the
// event at it, which the client has seen elsewhere, nor any before it;
// looking does not move the position meanwhile. Safe for concurrent use.
func (c *Cache) WaitPosition(ctx context.Context, resource string, rv uint64) (pos uint64, reached bool, err error) {
	r, err := c.resource(resource)
	if err != nil {
		return 0, false, err
	}
	t := time.NewTicker(positionPoll)
	defer t.Stop()
	for {
		if r.synced() {
			var head uint64
			if head, reached = r.reached(rv); reached {
				pos, _ = r.position()
				return pos, true, nil
			}
			pos = head
		}
		select {
		case <-ctx.Done():
			return pos, false, nil
		case <-t.C:
		}
	}
}

// reached reports whether rv is within the broker's stream: at or before
// its head (a position this server gave, or passed), or one up to which
// every event has been handed to the broker (handedThrough). head is the
// broker's, not moved to the informers' list.
func (r *resourceCache) reached(rv uint64) (head uint64, ok bool) {
	b := r.broker
	b.mu.Lock()
	head, handed := b.log.Head(), b.handedRV
	b.mu.Unlock()
	return head, head >= rv || handed >= rv || r.handedThrough(rv)
}

// handedThrough reports whether every event up to rv that the informers
// have taken in has been handed to the broker, when no event handed is
// at rv or after it (rv is a bookmark's, or its event is on its way). The
// informers' stores move in the order of their queues, bookmarks
// included, and each event reaches a store just before the handler hands
// it on: once the stores are at rv and the broker's view of the objects
// is the stores' (the same objects, none missing, none left over), the
// handler has handed on what the stores hold. The stores are read first,
// so a difference from events after rv only makes it look again. It reads
// every object: it is for positions this server has not reached, not for
// every resume.
func (r *resourceCache) handedThrough(rv uint64) bool {
	var storeRV uint64
	for _, sh := range r.shards {
		storeRV = max(storeRV, parseRV(sh.informer.LastStoreSyncResourceVersion()))
	}
	if storeRV < rv {
		return false // cheap: the stores have not got there
	}
	lists := make([][]any, len(r.shards))
	for i, sh := range r.shards {
		lists[i] = sh.informer.List()
	}
	b := r.broker
	b.mu.Lock()
	defer b.mu.Unlock()
	held := 0
	for _, objs := range b.objects {
		held += len(objs)
	}
	for _, list := range lists {
		held -= len(list)
		for _, item := range list {
			o, ok := item.(*Object)
			if !ok || b.objects[o.namespace][o.name] != o {
				return false
			}
		}
	}
	return held == 0
}
