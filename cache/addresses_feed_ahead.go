package cache

import "sync"

// feedAhead applies the address feed of a shard's initial list on a
// goroutine of its own while the shard's handler goes on with the rest
// of each event (the broker, the ordered indexes), in the handler's order:
// the handler then no longer runs the feed's maps alone on one core after
// the list has arrived. Nothing the feed keeps is read before every
// resource holding addresses has synced (lookups and the address stream
// answer ErrNotSynced until then), and a shard is synced only once its
// feedAhead is done (shard.hasSynced, Cache.WaitForSync); the handler
// waits for it before it feeds any later event itself. It is started by
// the handler when it adopts a list's stage (listPrep.take), so it feeds
// only the objects of a list that arrived whole, each as the handler was
// given it.
type feedAhead struct {
	feed *ipFeed
	n    int           // the list's objects
	done chan struct{} // closed once every event pushed has been fed
	// hold, when set (tests only), is called before each batch is fed.
	hold func()

	mu     sync.Mutex
	wake   sync.Cond
	queue  []feedEvent
	closed bool // the last event has been pushed
}

// feedEvent is one handler call the feed is to see.
type feedEvent struct {
	obj, old any // old: an update's previous object
	update   bool
	initial  bool
	po       preparedObject
}

// feedBatch is how many events the handler queues between two wake-ups
// of the feed's goroutine: one wake-up per event would cost more CPU than
// the hand-over saves wall time.
const feedBatch = 256

// startFeedAhead starts the feed of a list of n objects; hold is
// feedAhead.hold.
func startFeedAhead(f *ipFeed, n int, hold func()) *feedAhead {
	x := &feedAhead{feed: f, n: n, hold: hold, done: make(chan struct{}), queue: make([]feedEvent, 0, min(n, 4*feedBatch))}
	x.wake.L = &x.mu
	go x.run()
	return x
}

// push queues ev; last says it is the list's last.
func (x *feedAhead) push(ev feedEvent, last bool) {
	x.mu.Lock()
	x.queue = append(x.queue, ev)
	x.closed = last
	wake := last || len(x.queue) == feedBatch
	x.mu.Unlock()
	if wake {
		x.wake.Signal()
	}
}

func (x *feedAhead) run() {
	defer close(x.done)
	x.feed.reserve(x.n) // here, off the handler's goroutine
	var batch []feedEvent
	for {
		x.mu.Lock()
		for len(x.queue) == 0 && !x.closed {
			x.wake.Wait()
		}
		batch, x.queue = x.queue, batch[:0]
		closed := x.closed
		x.mu.Unlock()
		if x.hold != nil {
			x.hold()
		}
		for _, ev := range batch {
			if ev.update {
				x.feed.update(ev.old, ev.obj)
			} else {
				x.feed.add(ev.obj, ev.initial, ev.po)
			}
		}
		clear(batch)
		if closed { // the last event was in this batch
			return
		}
	}
}

// close ends the feed without another event: the handler was given an
// event of no adopted list before the list's last, which the feed then
// does not see (it waits for this feed first).
func (x *feedAhead) close() {
	x.mu.Lock()
	x.closed = true
	x.mu.Unlock()
	x.wake.Signal()
}

// finished reports whether everything pushed has been fed.
func (x *feedAhead) finished() bool {
	select {
	case <-x.done:
		return true
	default:
		return false
	}
}
