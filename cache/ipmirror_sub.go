package cache

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
	"github.com/kubeindex/kubeindex/internal/replay"
	"github.com/kubeindex/kubeindex/ipowner"
)

// Messages of the address stream (see WatchAddresses).
const (
	// Owners is an address and its owners: a snapshot item (no position),
	// or a change (with its position). No owners: the address is free.
	Owners MessageType = "OWNERS"
	// Reset opens a stream whose resume could not be served: forget every
	// address held; a snapshot follows.
	Reset MessageType = "RESET"
)

// AddressWatchQuery selects what an address stream carries.
type AddressWatchQuery struct {
	// Kinds keeps owners of these kinds: "pods", "services", "nodes".
	// Empty: every kind that is cached.
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

// WatchAddresses subscribes to the address stream: a snapshot of every
// address the query's owners hold (one OWNERS message each, by address),
// SYNCED with the position, then an OWNERS message with its position each
// time an address's owner set, as the query sees it, changes; owners
// outside the query never appear, and an address only they hold looks
// free. Given a position within the retained history, it resumes after
// it with no snapshot, no gap and no repeat; otherwise it opens with
// RESET (the reason), then a snapshot. Messages are taken with Next, as
// from Watch, and a consumer that falls QueueSize changes behind ends
// with RESYNC_REQUIRED; it may then resume from its last position.
//
// It returns ErrUnknownResource when no pods, Services or nodes are
// cached, ErrInvalid for a bad query, ErrNotSynced before they synced.
func (c *Cache) WatchAddresses(q AddressWatchQuery, notify chan<- struct{}) (Subscription, error) {
	if c.mirror == nil {
		return nil, fmt.Errorf("%w: the address stream needs pods, services or nodes cached", ErrUnknownResource)
	}
	f, err := c.addrFilter(q)
	if err != nil {
		return nil, err
	}
	var seq uint64
	ours := false
	if q.ResourceVersion != "" {
		if seq, ours, err = c.mirror.parsePosition(q.ResourceVersion); err != nil {
			return nil, err
		}
	}
	for _, r := range c.resources {
		if _, ok := ownerKind(r.res); ok && !r.synced() {
			return nil, fmt.Errorf("%s: %w", r.res.Name, ErrNotSynced)
		}
	}
	if q.QueueSize <= 0 {
		q.QueueSize = DefaultQueueSize
	}
	s := &addrSub{m: c.mirror, filter: f}
	s.box.Init(q.QueueSize, notify)
	c.mirror.subscribe(s, q.ResourceVersion != "", seq, ours)
	slices.SortFunc(s.snapshot, func(a, b addrItem) int { return strings.Compare(a.ip, b.ip) })
	return s, nil
}

// addrFilter checks q against what is cached.
func (c *Cache) addrFilter(q AddressWatchQuery) (addrFilter, error) {
	f := addrFilter{kinds: map[string]bool{}, node: q.Node, namespaces: map[string]map[string]bool{}}
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
		if !slices.Contains(cached, k) {
			if _, ok := ipowner.KindOf(k); !ok {
				return f, fmt.Errorf("%w: kind %q: the kinds that hold addresses are pods, services and nodes", ErrInvalid, k)
			}
			return f, fmt.Errorf("%w: kind %q is not cached here (cached: %s)", ErrInvalid, k, strings.Join(cached, ", "))
		}
		kind, _ := ipowner.KindOf(k)
		f.kinds[kind.String()] = true
	}
	if q.Node != "" {
		if errs := validation.IsDNS1123Subdomain(q.Node); len(errs) > 0 {
			return f, fmt.Errorf("%w: node %q is not a node name: %s", ErrInvalid, q.Node, strings.Join(errs, "; "))
		}
	}
	for plural, nss := range q.Namespaces {
		kind, ok := ipowner.KindOf(plural)
		if !ok {
			return f, fmt.Errorf("%w: namespaces of kind %q", ErrInvalid, plural)
		}
		set := map[string]bool{}
		for _, ns := range nss {
			set[ns] = true
		}
		f.namespaces[kind.String()] = set
	}
	return f, nil
}

// addrFilter is one subscription's view of the owners.
type addrFilter struct {
	kinds      map[string]bool            // by AddressOwner.Kind
	node       string                     // "": any
	namespaces map[string]map[string]bool // by AddressOwner.Kind; absent: any
}

func (f *addrFilter) visible(o AddressOwner) bool {
	if !f.kinds[o.Kind] {
		return false
	}
	if f.node != "" && (o.Kind == "Pod" && o.NodeName != f.node || o.Kind == "Node" && o.Name != f.node) {
		return false
	}
	if ns, ok := f.namespaces[o.Kind]; ok && !ns[o.Namespace] {
		return false
	}
	return true
}

// view returns the owners f sees; all is set when that is every one
// (owners itself, not a copy).
func (f *addrFilter) view(owners []AddressOwner) (seen []AddressOwner, all bool) {
	n := 0
	for _, o := range owners {
		if f.visible(o) {
			n++
		}
	}
	if n == len(owners) {
		return owners, true
	}
	seen = make([]AddressOwner, 0, n)
	for _, o := range owners {
		if f.visible(o) {
			seen = append(seen, o)
		}
	}
	return seen, false
}

// route decides whether ev is a change as f sees it, and with which owners.
func (f *addrFilter) route(ev *addrEvent) (addrDelivery, bool) {
	cur, all := f.view(ev.cur)
	old, _ := f.view(ev.old)
	if slices.Equal(old, cur) {
		return addrDelivery{}, false
	}
	d := addrDelivery{ev: ev}
	if !all {
		d.owners, d.filtered = cur, true
	}
	return d, true
}

// addrDelivery is one queued change (with the owners the subscriber sees,
// when not all of them) or a bookmark.
type addrDelivery struct {
	ev       *addrEvent
	owners   []AddressOwner
	filtered bool
	bookmark string // the position, for a bookmark
}

// addrItem is one address of a snapshot.
type addrItem struct {
	ip     string
	owners []AddressOwner
}

// addrSub is the address stream's Subscription.
type addrSub struct {
	m      *addrMirror
	filter addrFilter
	box    replay.Outbox[addrDelivery] // offered under m.mu

	// Owned by the consumer (Next).
	reset    string
	snapshot []addrItem
	replay   []*addrEvent
	syncPos  string
	synced   bool
	done     bool
}

// Outbox is the subscription's queue, for the fan-out (replay.Member).
func (s *addrSub) Outbox() *replay.Outbox[addrDelivery] { return &s.box }

// subscribe registers s and captures, under the same lock, where its
// stream starts.
func (m *addrMirror) subscribe(s *addrSub, resume bool, from uint64, ours bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer s.box.Signal()
	if resume {
		m.log.Trim(m.now())
		if !ours {
			s.reset = "the position comes from another or a restarted server"
		} else if evs, err := m.log.Since(from); err != nil {
			s.reset = m.resumeRefusal(err)
		} else {
			s.replay = evs
		}
	}
	if !resume || s.reset != "" {
		for ip, owners := range m.owners {
			if seen, _ := s.filter.view(owners); len(seen) > 0 {
				s.snapshot = append(s.snapshot, addrItem{ip: ip, owners: seen})
			}
		}
	}
	s.syncPos = m.position(m.log.Head())
	m.subs.Add(s)
}

// resumeRefusal explains why the history cannot serve a resume (Since's
// error).
func (m *addrMirror) resumeRefusal(err error) string {
	var pe *replay.PositionError
	switch {
	case !errors.As(err, &pe):
		return err.Error()
	case errors.Is(err, replay.ErrAhead):
		return fmt.Sprintf("the position is ahead of this server's stream (%s)", m.position(pe.Head))
	}
	return fmt.Sprintf("the position is older than the retained history (from %s): changes after it are forgotten", m.position(pe.Oldest))
}

// backlog counts the queued changes and the size of their messages.
func (s *addrSub) backlog() (events int, bytes int64) {
	s.box.Each(func(d addrDelivery) {
		if d.ev != nil {
			events++
			bytes += int64(len(d.ev.message(s.m)))
		}
	})
	return events, bytes
}

// Close is Subscription.Close.
func (s *addrSub) Close() {
	s.m.mu.Lock()
	s.m.subs.Remove(s)
	s.m.mu.Unlock()
}

// Expired is Subscription.Expired: never, for a resume the history cannot
// serve opens with RESET and a snapshot.
func (s *addrSub) Expired() (oldest uint64, ok bool) { return 0, false }

// Next is Subscription.Next.
func (s *addrSub) Next() (Message, bool) {
	if s.done {
		return Message{}, false
	}
	if r, ended := s.box.Ended(); ended {
		s.done, s.snapshot, s.replay = true, nil, nil
		return Message{Type: ResyncRequired, Reason: r}, true
	}
	if r := s.reset; r != "" {
		s.reset = ""
		raw := jsonscan.AppendString([]byte(`{"type":"`+string(Reset)+`","reason":`), r)
		return Message{Type: Reset, Reason: r, raw: append(raw, '}')}, true
	}
	if len(s.snapshot) > 0 {
		it := s.snapshot[0]
		s.snapshot[0] = addrItem{}
		s.snapshot = s.snapshot[1:]
		return Message{Type: Owners, raw: appendOwnersMessage(nil, "", it.ip, it.owners)}, true
	}
	for len(s.replay) > 0 {
		ev := s.replay[0]
		s.replay[0] = nil
		s.replay = s.replay[1:]
		if d, ok := s.filter.route(ev); ok {
			return s.message(d), true
		}
	}
	if !s.synced {
		s.synced, s.snapshot, s.replay = true, nil, nil
		return Message{Type: Synced, ResourceVersion: s.syncPos}, true
	}
	d, ok := s.box.Take()
	if !ok {
		return Message{}, false
	}
	if d.ev == nil {
		return Message{Type: Bookmark, ResourceVersion: d.bookmark}, true
	}
	msg := s.message(d)
	msg.live, msg.pub = true, d.ev.at
	return msg, true
}

func (s *addrSub) message(d addrDelivery) Message {
	pos := s.m.position(d.ev.seq)
	raw := d.ev.message(s.m)
	if d.filtered {
		raw = appendOwnersMessage(nil, pos, d.ev.ip, d.owners)
	}
	return Message{Type: Owners, ResourceVersion: pos, raw: raw}
}

// message is ev's message with every owner, encoded once.
func (ev *addrEvent) message(m *addrMirror) []byte {
	return ev.all.get(func() []byte { return appendOwnersMessage(nil, m.position(ev.seq), ev.ip, ev.cur) })
}

// appendOwnersMessage appends {"type":"OWNERS"[,"resourceVersion"],"ip","owners"}.
func appendOwnersMessage(b []byte, pos, ip string, owners []AddressOwner) []byte {
	b = append(b, `{"type":"`+string(Owners)+`"`...)
	if pos != "" {
		b = append(b, `,"resourceVersion":`...)
		b = jsonscan.AppendString(b, pos)
	}
	b = append(b, `,"ip":`...)
	b = jsonscan.AppendString(b, ip)
	b = append(b, `,"owners":[`...)
	for i, o := range owners {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendAddressOwner(b, o)
	}
	return append(b, "]}"...)
}

// appendAddressOwner appends o as encoding/json encodes it.
func appendAddressOwner(b []byte, o AddressOwner) []byte {
	b = AppendOwnerFields(append(b, '{'), o.Kind, o.Namespace, o.Name, o.UID, o.Role, o.HostNetwork)
	if o.NodeName != "" {
		b = append(b, `,"nodeName":`...)
		b = jsonscan.AppendString(b, o.NodeName)
	}
	return append(b, '}')
}

// AppendOwnerFields appends the members every owner of an address has, in
// the order and with the omissions of their JSON tags (IPOwner,
// AddressOwner), after an opening '{': kind, namespace when set, name,
// uid, role, hostNetwork when true.
func AppendOwnerFields(b []byte, kind, namespace, name, uid string, role ipowner.Role, hostNetwork bool) []byte {
	b = append(b, `"kind":`...)
	b = jsonscan.AppendString(b, kind)
	if namespace != "" {
		b = append(b, `,"namespace":`...)
		b = jsonscan.AppendString(b, namespace)
	}
	b = append(b, `,"name":`...)
	b = jsonscan.AppendString(b, name)
	b = append(b, `,"uid":`...)
	b = jsonscan.AppendString(b, uid)
	b = append(b, `,"role":`...)
	b = jsonscan.AppendString(b, string(role))
	if hostNetwork {
		b = append(b, `,"hostNetwork":true`...)
	}
	return b
}
