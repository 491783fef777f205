package cache

import (
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/sharding"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/fields"

	"github.com/kubeindex/kubeindex/internal/replay"
	"github.com/kubeindex/kubeindex/internal/text"
)

// DefaultQueueSize is a subscription's queue when WatchQuery.QueueSize is 0.
const DefaultQueueSize = 1024

// WatchQuery selects what a subscription streams. Filters are those of
// ListQuery.
type WatchQuery struct {
	Namespace string
	// Namespaces, when not nil, restricts the stream to these namespaces
	// (see ListQuery.Namespaces). The set is fixed for the subscription's
	// life: objects of namespaces added later are not delivered.
	Namespaces    []string
	LabelSelector string
	// Fields is a field selector (see ListQuery.Fields).
	Fields       fields.Selector
	Index, Value string
	// ShardSelector: see ListQuery.ShardSelector. An object's UID and
	// namespace never change, so an object never moves between shards.
	ShardSelector sharding.Selector
	// ResourceVersion resumes after a position a previous stream reported
	// (an event's, SYNCED's or BOOKMARK's resourceVersion). Empty: no resume.
	ResourceVersion string
	// Snapshot sends the matching objects as ADDED before SYNCED. It cannot
	// be combined with ResourceVersion.
	Snapshot bool
	// Diff adds a patch from the previous version to MODIFIED events.
	Diff Diff
	// QueueSize bounds the events waiting for the consumer; when it
	// overflows the subscription ends with RESYNC_REQUIRED. Default
	// DefaultQueueSize. The queue's memory follows what waits in it, not
	// this bound: a subscription whose consumer keeps up holds little.
	QueueSize int
}

// Subscription is one stream: of a resource's events (Watch) or of the
// address stream (WatchAddresses). It opens with the snapshot (or the
// replayed events when resuming), then SYNCED, then live events and
// bookmarks, until it ends with RESYNC_REQUIRED or is closed.
//
// Next must be called from one goroutine at a time; Close is safe from any
// goroutine and may be called more than once.
type Subscription interface {
	// Next returns the next message without blocking; ok is false when
	// there is none yet (wait for the notify channel given to Watch) or
	// after the terminal RESYNC_REQUIRED.
	Next() (m Message, ok bool)
	// Expired reports whether the subscription could not resume from the
	// position it asked for, its one message then being RESYNC_REQUIRED,
	// with the oldest position the history still held. An address stream
	// never expires: it opens with RESET and a snapshot instead.
	Expired() (oldest uint64, ok bool)
	// Close unsubscribes. Messages already queued stay readable with Next.
	Close()
}

var (
	_ Subscription = (*eventSub)(nil)
	_ Subscription = addrSub{}
)

// eventSub is a resource's Subscription.
type eventSub struct {
	b      *broker
	filter *filter
	diff   Diff
	box    replay.Outbox[delivery] // offered under b.fmu

	from   uint64 // the first event (seq) the fan-out offers it
	closed atomic.Bool
	// expired is set, before the subscription is returned, when a resume
	// could not be served: the oldest position it could have been.
	expired *uint64

	// Owned by the consumer (Next).
	snapshot []*Object
	replay   []*event // to filter (route)
	syncRV   string
	synced   bool
	done     bool

	// atStart, when set, runs under the broker's lock where the stream
	// starts: what it reads of state the informer handler keeps before
	// feeding the broker (the ordered indexes) is then exactly the state
	// before the subscription's first event, bar the events of handlers
	// still between the two, which the subscription also delivers.
	atStart func()
}

// Outbox is the subscription's queue, for the fan-out (replay.Member).
func (s *eventSub) Outbox() *replay.Outbox[delivery] { return &s.box }

// delivery is one queued item: an event as the subscriber must see it, or
// a bookmark. It is two words, for queues hold many.
type delivery struct {
	ev *event // for a bookmark, an event that carries only its position
	as delivered
}

// delivered is the type a subscriber sees an event as, or a bookmark.
type delivered uint8

const (
	asBookmark delivered = iota
	asAdded
	asModified
	asDeleted
	// asUnrouted: an event the consumer filters itself (Next): offered
	// unfiltered to a subscription whose filter is costly, or replayed.
	asUnrouted
)

func deliveredAs(t EventType) delivered {
	switch t {
	case Added:
		return asAdded
	case Modified:
		return asModified
	default: // Deleted: a filter routes nothing else
		return asDeleted
	}
}

func (d delivered) messageType() MessageType {
	switch d {
	case asAdded:
		return MessageType(Added)
	case asModified:
		return MessageType(Modified)
	case asDeleted:
		return MessageType(Deleted)
	}
	return Bookmark
}

// Watch subscribes to a resource's events. notify is signalled, without
// blocking, whenever Next may have something new; give it a buffer of at
// least 1, and it may be shared by several subscriptions.
//
// It returns ErrUnknownResource, ErrUnknownIndex, ErrInvalid or
// ErrNotSynced. A resume that the history cannot serve is not an error:
// the subscription's first message is then RESYNC_REQUIRED.
func (c *Cache) Watch(resource string, q WatchQuery, notify chan<- struct{}) (Subscription, error) {
	return c.watch(resource, q, notify, nil)
}

// watch is Watch, running atStart (when not nil) under the broker's lock
// where the stream starts (eventSub.atStart).
func (c *Cache) watch(resource string, q WatchQuery, notify chan<- struct{}, atStart func()) (Subscription, error) {
	r, err := c.resource(resource)
	if err != nil {
		return nil, err
	}
	f, err := r.newFilter(q)
	if err != nil {
		return nil, err
	}
	if err := q.Diff.Validate(); err != nil {
		return nil, err
	}
	var from uint64
	if q.ResourceVersion != "" {
		if q.Snapshot {
			return nil, fmt.Errorf("%w: resourceVersion resumes a stream and snapshot starts a new one: give one of them", ErrInvalid)
		}
		if from, err = strconv.ParseUint(q.ResourceVersion, 10, 64); err != nil {
			return nil, fmt.Errorf("%w: resourceVersion %q is not one this server sent (they are decimal numbers)", ErrInvalid, text.Truncate(q.ResourceVersion, 32))
		}
	}
	if q.QueueSize <= 0 {
		q.QueueSize = DefaultQueueSize
	}
	if !r.synced() {
		return nil, fmt.Errorf("%s: %w", r.res.Name, ErrNotSynced)
	}
	s := &eventSub{b: r.broker, filter: f, diff: q.Diff, atStart: atStart}
	s.box.Init(q.QueueSize, notify)
	r.broker.subscribe(s, r.listRV(), q.ResourceVersion != "", from, q.Snapshot)
	// The snapshot and the replay are the subscriber's own: they are
	// filtered off the lock, the replay by Next.
	s.snapshot = slices.DeleteFunc(s.snapshot, func(o *Object) bool { return !f.matches(o, &facts{}) })
	slices.SortFunc(s.snapshot, func(a, b *Object) int { return strings.Compare(a.Key(), b.Key()) })
	return s, nil
}

// subscribe registers s and captures, under the same lock, where its
// stream starts: so the snapshot or replay and the queued events that follow
// have neither gap nor overlap.
func (b *broker) subscribe(s *eventSub, listRV uint64, resume bool, from uint64, snapshot bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer s.box.Signal()
	b.startLocked(listRV)
	if resume {
		b.log.Trim(b.now())
		evs, err := b.log.Since(from)
		if err != nil {
			oldest, reason := resumeRefusal(err)
			s.box.End(reason)
			s.expired = &oldest
			return
		}
		s.replay = evs
	} else if snapshot {
		s.snapshot = b.snapshotLocked(s.filter.namespace)
	}
	if s.atStart != nil {
		s.atStart()
	}
	s.syncRV = strconv.FormatUint(b.log.Head(), 10)
	s.from = b.seq
	b.joining = append(b.joining, s)
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// resumeRefusal explains why the history cannot serve a resume (Since's
// error), with the oldest position it holds.
func resumeRefusal(err error) (oldest uint64, reason string) {
	var pe *replay.PositionError
	if !errors.As(err, &pe) {
		return 0, err.Error()
	}
	if errors.Is(err, replay.ErrAhead) {
		return pe.Oldest, fmt.Sprintf("resourceVersion %d is ahead of this server's stream (%d): it comes from another or a restarted server", pe.Pos, pe.Head)
	}
	return pe.Oldest, fmt.Sprintf("resourceVersion %d is older than the retained history (from %d): events after it are forgotten", pe.Pos, pe.Oldest)
}

// listRV is the highest resource version the resource's informers have
// listed or watched up to. Read before the broker's lock, it may be behind
// the broker, never ahead of what the informers have taken in.
func (r *resourceCache) listRV() uint64 {
	var rv uint64
	for _, sh := range r.shards {
		rv = max(rv, parseRV(sh.informer.LastSyncResourceVersion()))
	}
	return rv
}

func (b *broker) snapshotLocked(namespace string) []*Object {
	var out []*Object
	for ns, objs := range b.objects {
		if namespace != "" && ns != namespace {
			continue
		}
		for _, o := range objs {
			out = append(out, o)
		}
	}
	return out
}

// Next is Subscription.Next.
func (s *eventSub) Next() (m Message, ok bool) {
	if s.done {
		return Message{}, false
	}
	if r, ended := s.box.Ended(); ended {
		s.done, s.snapshot, s.replay = true, nil, nil
		return Message{Type: ResyncRequired, Reason: r}, true
	}
	if len(s.snapshot) > 0 {
		o := s.snapshot[0]
		s.snapshot = s.snapshot[1:]
		return Message{Type: MessageType(Added), ResourceVersion: o.resourceVersion, obj: o}, true
	}
	for len(s.replay) > 0 {
		d, ok := s.route(delivery{ev: s.replay[0], as: asUnrouted})
		s.replay[0] = nil
		s.replay = s.replay[1:]
		if ok {
			return s.message(d), true
		}
	}
	if !s.synced {
		s.synced, s.snapshot, s.replay = true, nil, nil
		return Message{Type: Synced, ResourceVersion: s.syncRV}, true
	}
	for {
		d, ok := s.box.Take()
		if !ok {
			return Message{}, false
		}
		if d, ok = s.route(d); ok {
			m := s.message(d)
			m.live = m.ev != nil
			return m, true
		}
	}
}

// route filters an event left for the consumer to filter; false when the
// subscription does not want it.
func (s *eventSub) route(d delivery) (delivery, bool) {
	if d.as != asUnrouted {
		return d, true
	}
	as, ok := s.filter.route(d.ev, &[2]*facts{})
	return delivery{ev: d.ev, as: deliveredAs(as)}, ok
}

func (s *eventSub) message(d delivery) Message {
	if d.as == asBookmark {
		return Message{Type: Bookmark, ResourceVersion: d.ev.rvStr}
	}
	return Message{Type: d.as.messageType(), ResourceVersion: d.ev.rvStr, ev: d.ev, diff: s.diff}
}

// Expired is Subscription.Expired.
func (s *eventSub) Expired() (oldest uint64, ok bool) {
	if s.expired == nil {
		return 0, false
	}
	return *s.expired, true
}

// Close is Subscription.Close.
func (s *eventSub) Close() {
	s.closed.Store(true) // if it has not joined the fan-out yet, it never will
	s.b.fmu.Lock()
	s.b.subs.Remove(s)
	s.b.fmu.Unlock()
}
