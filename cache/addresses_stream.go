package cache

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeindex/kubeindex/ipowner"
)

// The address stream is ipowner's mirror (ipowner.Mirror); the cache
// feeds it (addresses_feed.go), checks a query against what is cached and
// hands its messages out as any other stream's.

// AddressStream is the name of the address-ownership stream (the mirror
// for agents) where a resource name would stand: in a multiplexed
// socket's subscribe message and in the stream statistics. No resource can
// be called so: resource names hold no colon.
const AddressStream = "ip:watch"

// Messages of the address stream (see WatchAddresses).
const (
	// Owners is an address and its owners: a snapshot item (no position),
	// or a change (with its position). No owners: the address is free.
	Owners MessageType = ipowner.MessageOwners
	// Reset opens a stream whose resume could not be served: forget every
	// address held; a snapshot follows.
	Reset MessageType = ipowner.MessageReset
)

// AddressWatchQuery selects what an address stream carries.
type AddressWatchQuery struct {
	// Kinds keeps owners of these kinds, by resource (ipowner.Kinds'
	// plurals). Empty: every kind that is cached.
	Kinds []string
	// Node keeps, of pods, those on this node and, of nodes, this one:
	// what a per-node agent needs. Services belong to no node and are kept
	// (leave them out with Kinds).
	Node string
	// Namespaces restricts a namespaced kind ("pods", "services") to these
	// namespaces: the caller's authorized scope. A kind it does not name
	// is not restricted.
	Namespaces map[string][]string
	// ResourceVersion resumes after a position the stream sent (a change's,
	// SYNCED's or BOOKMARK's). Empty: start with a snapshot.
	ResourceVersion string
	// QueueSize bounds the changes waiting for the consumer (see
	// WatchQuery.QueueSize). Default DefaultQueueSize.
	QueueSize int
}

// WatchAddresses subscribes to the address stream (ipowner's
// Mirror.Subscribe says what it carries). Messages are taken with Next,
// as from Watch, and a consumer that falls QueueSize changes behind ends
// with RESYNC_REQUIRED; it may then resume from its last position.
//
// It returns ErrUnknownResource when no pods, Services or nodes are
// cached, ErrInvalid (or ipowner's, for a position) for a bad query,
// ErrNotSynced before they synced.
func (c *Cache) WatchAddresses(q AddressWatchQuery, notify chan<- struct{}) (Subscription, error) {
	if c.mirror == nil {
		return nil, fmt.Errorf("%w: the address stream needs pods, services or nodes cached", ErrUnknownResource)
	}
	mq, err := c.mirrorQuery(q)
	if err != nil {
		return nil, err
	}
	for _, r := range c.resources {
		if _, ok := ownerKind(r.res); ok && !r.synced() {
			return nil, fmt.Errorf("%s: %w", r.res.Name, ErrNotSynced)
		}
	}
	s, err := c.mirror.Subscribe(mq, notify)
	if err != nil {
		return nil, err
	}
	return addrSub{s}, nil
}

// Check reports, as ErrInvalid, what is wrong in q itself (a kind that
// holds no addresses, a node name that cannot be one) without looking at
// the cache: a server checks it before paying for authorization.
// WatchAddresses checks it too.
func (q AddressWatchQuery) Check() error {
	for _, k := range q.Kinds {
		if _, ok := ipowner.KindOf(k); !ok {
			return fmt.Errorf("%w: kind %q: the kinds that hold addresses are pods, services and nodes", ErrInvalid, k)
		}
	}
	if q.Node != "" {
		if errs := validation.IsDNS1123Subdomain(q.Node); len(errs) > 0 {
			return fmt.Errorf("%w: node %q is not a node name: %s", ErrInvalid, q.Node, strings.Join(errs, "; "))
		}
	}
	return nil
}

// mirrorQuery checks q against what is cached.
func (c *Cache) mirrorQuery(q AddressWatchQuery) (ipowner.MirrorQuery, error) {
	mq := ipowner.MirrorQuery{Node: q.Node, Namespaces: map[ipowner.Kind][]string{}, Position: q.ResourceVersion,
		QueueSize: q.QueueSize}
	if err := q.Check(); err != nil {
		return mq, err
	}
	if mq.QueueSize <= 0 {
		mq.QueueSize = DefaultQueueSize
	}
	cached := []string{}
	for _, kind := range ipowner.Kinds {
		if c.ownerResource(kind) != nil {
			cached = append(cached, kind.Plural())
		}
	}
	kinds := q.Kinds
	if len(kinds) == 0 {
		kinds = cached
	}
	for _, k := range kinds {
		kind, _ := ipowner.KindOf(k) // checked
		if !slices.Contains(cached, k) {
			return mq, fmt.Errorf("%w: kind %q is not cached here (cached: %s)", ErrInvalid, k, strings.Join(cached, ", "))
		}
		mq.Kinds = append(mq.Kinds, kind)
	}
	for plural, nss := range q.Namespaces {
		kind, ok := ipowner.KindOf(plural)
		if !ok {
			return mq, fmt.Errorf("%w: namespaces of kind %q", ErrInvalid, plural)
		}
		mq.Namespaces[kind] = nss
	}
	return mq, nil
}

// addrSub is the address stream's Subscription: the mirror's, its
// messages carried whole (Message.raw), so the SSE writer, the WebSocket
// frame writer and the pump send them unchanged.
type addrSub struct{ s *ipowner.MirrorSub }

// Next is Subscription.Next.
func (a addrSub) Next() (Message, bool) {
	m, ok := a.s.Next()
	if !ok {
		return Message{}, false
	}
	out := Message{ResourceVersion: m.Position, Reason: m.Reason, raw: m.Raw, live: !m.Published.IsZero(), pub: m.Published}
	switch m.Kind {
	case ipowner.StreamOwners:
		out.Type = Owners
	case ipowner.StreamReset:
		out.Type = Reset
	case ipowner.StreamSynced:
		out.Type = Synced
	case ipowner.StreamBookmark:
		out.Type = Bookmark
	default:
		out.Type = ResyncRequired
	}
	return out, true
}

// Expired is Subscription.Expired: never, for a resume the history cannot
// serve opens with RESET and a snapshot.
func (a addrSub) Expired() (oldest uint64, ok bool) { return 0, false }

// Close is Subscription.Close.
func (a addrSub) Close() { a.s.Close() }

// addressStreamStats is the mirror's figures as a stream's.
func (c *Cache) addressStreamStats() StreamStats {
	st := c.mirror.Stats()
	return StreamStats{Resource: AddressStream, Subscribers: st.Subscribers, History: st.History,
		ResourceVersion: st.Position, Dropped: st.Dropped, QueuedEvents: st.QueuedEvents, QueuedBytes: st.QueuedBytes}
}
