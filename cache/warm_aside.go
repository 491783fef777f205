package cache

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// The column warmer steps aside for costly questions: a worker of its
// pass takes no batch while a question holds one of the cache's slots
// (askSlots), so that the warmer never starves one; but not for those
// that wait for the warmer's standing indexes or render rows of its pass
// (they need it to go on). It waits for the questions to end rather than
// looking again later: a short question (a window's first page over the
// namespace/name order) stalls the pass for its own time, not for a
// look's interval, and one that joins the pass sets it going again at
// once.

// warmAsideLook is how long a worker stepping aside waits at most before
// it looks at the slots again without being nudged (a backstop: every
// change that lets it go on nudges it). A variable for tests only.
var warmAsideLook = warmWait

// stepAside yields to the questions: it returns once no costly question
// holds a slot (askSlots) but those waiting for the warmer's standing
// indexes (awaitStanding) or rendering rows of its pass (helpWarm), or
// false when ctx ends. Meanwhile it waits for a slot's release or a
// question joining the warmer (askSlots.eased).
func (c *Cache) stepAside(ctx context.Context) bool {
	runtime.Gosched()
	for c.asks.inUse() > c.waitingForWarmer() {
		eased := c.asks.eased.wait() // before the look: a change after it rings this one
		if c.asks.inUse() <= c.waitingForWarmer() {
			break
		}
		if c.warmHook != nil {
			c.warmHook("aside")
		}
		select {
		case <-ctx.Done():
			return false
		case <-eased:
		case <-time.After(warmAsideLook):
		}
		if c.warmHook != nil {
			c.warmHook("back")
		}
	}
	return ctx.Err() == nil
}

// waitingForWarmer is the number of questions waiting for the warmer's
// standing indexes or rendering rows of its passes.
func (c *Cache) waitingForWarmer() int {
	n := 0
	for _, r := range c.resources {
		n += r.waitingForWarmer()
	}
	return n
}

// nudge wakes whoever waits on it at its next ring: a channel closed and
// replaced, made only when someone waits. Safe for concurrent use; a nil
// nudge rings nobody.
type nudge struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next ring.
func (n *nudge) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// ring wakes those waiting.
func (n *nudge) ring() {
	if n == nil {
		return
	}
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}
