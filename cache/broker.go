package cache

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/internal/replay"
)

// StreamOptions configures the event brokers that serve streams. The zero
// value takes the documented defaults.
type StreamOptions struct {
	// HistorySize is how many events each resource keeps for resuming
	// streams. Default 4096.
	HistorySize int
	// HistoryAge is how long an event stays resumable, but for the events
	// at the newest position, kept until a newer one comes (replay.Log's
	// Trim). Default 5 minutes.
	HistoryAge time.Duration
	// BookmarkInterval is how often a subscription that received nothing
	// gets a BOOKMARK with the current resourceVersion. Default 30s.
	BookmarkInterval time.Duration
}

func (o StreamOptions) withDefaults() StreamOptions {
	if o.HistorySize <= 0 {
		o.HistorySize = 4096
	}
	if o.HistoryAge <= 0 {
		o.HistoryAge = 5 * time.Minute
	}
	if o.BookmarkInterval <= 0 {
		o.BookmarkInterval = 30 * time.Second
	}
	return o
}

// StreamStats describes one resource's broker, for metrics.
type StreamStats struct {
	Resource        string `json:"resource"`
	Subscribers     int    `json:"subscribers"`
	History         int    `json:"history"`
	ResourceVersion string `json:"resourceVersion"`
	// Dropped counts subscriptions ended because their queue overflowed
	// (they were sent RESYNC_REQUIRED).
	Dropped uint64 `json:"dropped"`
	// QueuedEvents and QueuedBytes are what the subscribers have yet to
	// take: events waiting in their queues, and the size of those events'
	// objects (the same object waiting for two subscribers counts twice).
	QueuedEvents int   `json:"queuedEvents"`
	QueuedBytes  int64 `json:"queuedBytes"`
}

// StreamStats returns every resource's broker statistics, in configuration
// order, then the address stream's (named AddressStream) when it exists.
// Safe for concurrent use.
func (c *Cache) StreamStats() []StreamStats {
	out := make([]StreamStats, len(c.resources))
	for i, r := range c.resources {
		out[i] = r.broker.stats()
		out[i].Resource = r.res.Name
	}
	if c.mirror != nil {
		out = append(out, c.addressStreamStats())
	}
	return out
}

// broker is one resource's event fan-out. It is fed only by the informer
// event handler of each of the resource's shards, keeps its own view of
// the objects in the order it received the events, a bounded history for
// resuming, and the subscribers.
//
// The informer's handler does no work per subscriber: under mu it updates
// the view, stamps the event, appends it to the history and to pending,
// and wakes the fan-out (run), which offers the pending events, in order,
// to each subscription under fmu, never holding mu while it filters. A
// subscription whose selectors are long (costly) is not filtered there
// either: it is offered every event, and its consumer filters (Next), so
// that what a caller's selector costs is paid on that caller's goroutine,
// not by the informer nor by the other subscribers. Nothing done under
// either lock blocks: a subscriber whose queue is full is dropped (the
// history, the queues and that rule are internal/replay's).
//
// Positions in the stream are resource versions: the log's head is the
// highest resourceVersion seen, and every event is stamped with the head
// after it. Events
// from one watch arrive in increasing resourceVersion order, so normally
// each event's stamp is its object's own resourceVersion. Events that
// arrive "late" (another namespace's informer, a relist after a watch
// outage, a tombstone) share the stamp of the event before them; resuming
// from a shared stamp re-sends the events after the first that carries it,
// which may repeat a few (complete objects, harmless to apply twice) but
// never skips one.
type broker struct {
	now func() time.Time

	mu      sync.Mutex
	opts    StreamOptions
	objects map[string]map[string]*Object // namespace → name → object (a name is the object's own memory: no key is made)
	// log is the history for resuming; its positions are resource
	// versions, its head the highest seen.
	log     *replay.Log[*event]
	seq     uint64        // events published so far
	pending []*event      // published, not yet offered to subscribers
	joining []*eventSub   // subscribed, not yet seen by the fan-out
	kick    chan struct{} // the fan-out has work
	// handedRV is the highest resourceVersion of an object the handler
	// has handed on: unlike the log's head, never moved to the informers'
	// list (WaitPosition).
	handedRV uint64
	// started is set by the first subscription, once the informers have
	// synced: the initial list is a snapshot, not a sequence of events, so
	// no position before its end can be resumed from.
	started bool

	// fmu guards the fan-out's subscribers; taken before mu, never after.
	fmu  sync.Mutex
	subs replay.Fanout[*eventSub, delivery]
}

func newBroker(now func() time.Time, opts StreamOptions) *broker {
	opts = opts.withDefaults()
	return &broker{
		now:     now,
		opts:    opts,
		objects: map[string]map[string]*Object{},
		log:     replay.NewLog[*event](opts.HistorySize, opts.HistoryAge),
		kick:    make(chan struct{}, 1),
	}
}

func (b *broker) stats() StreamStats {
	b.fanout() // so that the count includes who joined and left
	b.fmu.Lock()
	b.mu.Lock()
	st := StreamStats{Subscribers: b.subs.Len(), History: b.log.Len(),
		ResourceVersion: strconv.FormatUint(b.log.Head(), 10), Dropped: b.subs.Dropped()}
	b.mu.Unlock()
	subs := slices.Collect(b.subs.All())
	b.fmu.Unlock() // the queues have their own locks: the informer's handler must not wait for this count
	for _, s := range subs {
		n, size := backlog(&s.box)
		st.QueuedEvents += n
		st.QueuedBytes += size
	}
	return st
}

// handler returns the callbacks a shard's one informer handler forwards.
// They never block.
func (b *broker) handler() toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := obj.(*Object); ok {
				b.put(o)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok := cur.(*Object)
			if !ok || old == cur {
				return // a resync hands the same object back: not an event
			}
			b.put(o)
		},
		DeleteFunc: func(obj any) {
			switch o := obj.(type) {
			case *Object:
				b.remove(o.namespace, o.name, o)
			case toolscache.DeletedFinalStateUnknown:
				ns, name, err := toolscache.SplitMetaNamespaceKey(o.Key)
				if err == nil {
					b.remove(ns, name, nil)
				}
			}
		},
	}
}

// stored returns the object last handed on under namespace and name, nil
// if none (or it was deleted).
func (b *broker) stored(namespace, name string) *Object {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.objects[namespace][name]
}

// put records an add or update. The event type comes from the broker's own
// view, so it is right whatever the informer called it.
func (b *broker) put(o *Object) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ns := b.objects[o.namespace]
	if ns == nil {
		ns = map[string]*Object{}
		b.objects[o.namespace] = ns
	}
	prev := ns[o.name]
	ns[o.name] = o
	if prev != nil && prev.resourceVersion == o.resourceVersion {
		return // a relist handed back an unchanged object
	}
	ev := &event{typ: Added, obj: o}
	if prev != nil {
		ev.typ, ev.old = Modified, prev
	}
	b.publishLocked(ev)
}

// remove records a delete. last is the deleted object as the watch sent it,
// or nil for a tombstone (the informer missed the delete while its watch
// was down): then the last object the broker saw stands for it.
func (b *broker) remove(namespace, name string, last *Object) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ns := b.objects[namespace]
	prev := ns[name]
	if prev == nil {
		return // never announced, so nothing to retract
	}
	delete(ns, name)
	if len(ns) == 0 {
		delete(b.objects, namespace)
	}
	if last == nil {
		last = prev
	}
	b.publishLocked(&event{typ: Deleted, obj: last, old: prev})
}

// startLocked makes the end of the informers' initial list the oldest
// resumable position. listRV is the informers' list (or later) resource
// version: the view equals the API server's state at it, whereas the
// highest object resourceVersion seen does not account for objects deleted
// before the list. Events the informers took in but the broker has not yet
// been handed are stamped listRV when they come; resuming from listRV is
// then refused, as from any position shared with later events.
func (b *broker) startLocked(listRV uint64) {
	if b.started {
		return
	}
	b.started = true
	b.log.Reset(listRV)
}

// publishLocked stamps ev, appends it to the history and hands it to the
// fan-out: on the informer's handler, nothing here depends on how many
// subscribers there are.
func (b *broker) publishLocked(ev *event) {
	ev.at = b.now()
	ev.seq = b.seq
	b.seq++
	rv := parseRV(ev.obj.resourceVersion)
	b.handedRV = max(b.handedRV, rv)
	ev.rvStr = strconv.FormatUint(b.log.Append(rv, ev.at, ev), 10)
	if !b.started {
		// No subscription exists before the first, which starts the
		// broker (subscribe, under mu): each one's stream begins after
		// every event published before it (eventSub.from), so the
		// fan-out would offer this one to nobody. Not handing it on
		// spares a wake-up of the fan-out's goroutine for each object
		// of the initial list, which on an idle core is a thread woken
		// and parked again (BENCHMARKS.md).
		return
	}
	b.pending = append(b.pending, ev)
	select {
	case b.kick <- struct{}{}:
	default: // the fan-out is already due
	}
}

// fanout offers the pending events, in order, to every subscriber whose
// filter they concern (a costly filter's consumer decides for itself),
// and takes in the subscriptions that joined meanwhile: each gets the
// events published after it subscribed. It runs on the broker's own
// goroutine (run), holding fmu, not mu: the informer's handler never
// waits for it.
func (b *broker) fanout() {
	b.fmu.Lock()
	defer b.fmu.Unlock()
	b.mu.Lock()
	evs, joins := b.pending, b.joining
	b.pending, b.joining = nil, nil
	b.mu.Unlock()
	for _, s := range joins {
		if !s.closed.Load() {
			b.subs.Add(s)
		}
	}
	for _, ev := range evs {
		fc := &[2]*facts{}
		for s := range b.subs.All() {
			switch {
			case ev.seq < s.from: // before it subscribed: in its snapshot or replay
			case s.filter.costly:
				b.subs.Offer(s, delivery{ev: ev, as: asUnrouted})
			default:
				if as, ok := s.filter.route(ev, fc); ok {
					b.subs.Offer(s, delivery{ev: ev, as: deliveredAs(as)})
				}
			}
		}
	}
}

// run is the broker's goroutine: it fans events out as they come, sends
// bookmarks and ages the history, until ctx ends.
func (b *broker) run(ctx context.Context) {
	b.mu.Lock()
	every := b.opts.BookmarkInterval
	b.mu.Unlock()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
			b.fanout()
		case <-t.C:
			b.bookmark()
		}
	}
}

// bookmark gives every subscription that received nothing since the last
// tick the position of the events fanned out so far. It is queued like an
// event, so it is only seen after everything before it: resuming from it
// loses nothing.
func (b *broker) bookmark() {
	b.fanout()
	b.fmu.Lock()
	defer b.fmu.Unlock()
	b.mu.Lock()
	b.log.Trim(b.now())
	busy := len(b.pending) > 0 // published since the fanout above: nobody is idle
	rv := b.log.Head()
	b.mu.Unlock()
	if busy {
		return
	}
	// A costly filter's subscription is offered every event, wanted or
	// not, so it is never idle: its consumer gets every bookmark.
	mark := delivery{ev: &event{rvStr: strconv.FormatUint(rv, 10)}, as: asBookmark}
	b.subs.Bookmark(mark, func(s *eventSub) bool { return s.filter.costly })
}

// backlog returns how many events wait in a subscriber's queue and the
// size of their objects: how far behind its consumer is, in events and in
// bytes. Bookmarks carry no object and are not counted.
func backlog(box *replay.Outbox[delivery]) (events int, bytes int64) {
	box.Each(func(d delivery) {
		if d.as != asBookmark && d.ev.obj != nil {
			events++
			bytes += int64(d.ev.obj.Len())
		}
	})
	return events, bytes
}

// parseRV reads an etcd resourceVersion; anything else counts as 0, which
// never advances the stream position.
func parseRV(s string) uint64 {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0
	}
	return v
}
