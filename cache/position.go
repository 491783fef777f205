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
func (c *Cache) WaitPosition(ctx context.Context, resource string, rv uint64) (pos uint64, reached bool, err error) {
	r, err := c.resource(resource)
	if err != nil {
		return 0, false, err
	}
	t := time.NewTicker(positionPoll)
	defer t.Stop()
	for {
		var ok bool
		if pos, ok = r.position(); ok && pos >= rv {
			return pos, true, nil
		}
		select {
		case <-ctx.Done():
			return pos, false, nil
		case <-t.C:
		}
	}
}
