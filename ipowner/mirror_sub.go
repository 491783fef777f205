package ipowner

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
	"github.com/kubeindex/kubeindex/internal/replay"
)

// The address stream's own messages, by their wire names.
const (
	// MessageOwners is an address and its owners: a snapshot item (no
	// position), or a change (with its position). No owners: the address
	// is free.
	MessageOwners = "OWNERS"
	// MessageReset opens a stream whose resume could not be served:
	// forget every address held; a snapshot follows.
	MessageReset = "RESET"
)

// StreamMessageKind says what a message of the address stream is.
type StreamMessageKind uint8

// The messages of the address stream, in the order a subscription sends
// them: RESET (when a resume cannot be served), OWNERS (the snapshot, or
// the changes replayed on resume), SYNCED, then OWNERS and BOOKMARK as
// they come, until it ends (RESYNC_REQUIRED: it fell behind).
const (
	StreamOwners StreamMessageKind = iota + 1
	StreamReset
	StreamSynced
	StreamBookmark
	StreamEnded
)

// StreamMessage is one message of the address stream.
type StreamMessage struct {
	Kind StreamMessageKind
	// Position is where to resume after it: a change's, SYNCED's or
	// BOOKMARK's ("<epoch>-<seq>"); "" for a snapshot item.
	Position string
	// Reason explains RESET and the end.
	Reason string
	// Raw is the whole message as the stream sends it, for OWNERS and
	// RESET; the others are the caller's to encode.
	Raw []byte
	// Published is when a change delivered live was published, on the
	// mirror's clock; zero otherwise.
	Published time.Time
}

// MirrorQuery selects what a subscription sees. The caller has checked
// it against what feeds the mirror (which kinds are cached, whether a
// node is a node name).
type MirrorQuery struct {
	// Kinds keeps owners of these kinds.
	Kinds []Kind
	// Node keeps, of pods, those on this node and, of nodes, this one;
	// Services belong to no node and are kept. "": every node.
	Node string
	// Namespaces restricts a namespaced kind to these namespaces; a kind
	// it does not name is not restricted.
	Namespaces map[Kind][]string
	// Position resumes after a position the stream sent. "": start with
	// a snapshot.
	Position string
	// QueueSize bounds the changes waiting for the consumer (at least 1).
	QueueSize int
}

// filter is one subscription's view of the owners.
type filter struct {
	kinds      [len(kindNames)]bool
	node       string                   // "": any
	namespaces map[Kind]map[string]bool // absent: any
}

func newFilter(q MirrorQuery) filter {
	f := filter{node: q.Node, namespaces: map[Kind]map[string]bool{}}
	for _, k := range q.Kinds {
		if int(k) < len(f.kinds) {
			f.kinds[k] = true
		}
	}
	for kind, nss := range q.Namespaces {
		set := map[string]bool{}
		for _, ns := range nss {
			set[ns] = true
		}
		f.namespaces[kind] = set
	}
	return f
}

func (f *filter) visible(o *mirrorOwner) bool {
	if int(o.kind) >= len(f.kinds) || !f.kinds[o.kind] {
		return false
	}
	if f.node != "" && (o.kind == Pod && o.nodeName != f.node || o.kind == Node && o.name != f.node) {
		return false
	}
	if ns, ok := f.namespaces[o.kind]; ok && !ns[o.namespace] {
		return false
	}
	return true
}

// view returns the owners f sees; all is set when that is every one
// (owners itself, not a copy).
func (f *filter) view(owners []mirrorOwner) (seen []mirrorOwner, all bool) {
	n := 0
	for i := range owners {
		if f.visible(&owners[i]) {
			n++
		}
	}
	if n == len(owners) {
		return owners, true
	}
	seen = make([]mirrorOwner, 0, n)
	for i := range owners {
		if f.visible(&owners[i]) {
			seen = append(seen, owners[i])
		}
	}
	return seen, false
}

// route decides whether ch is a change as f sees it, and with which owners.
func (f *filter) route(ch *change) (delivery, bool) {
	cur, all := f.view(ch.cur)
	old, _ := f.view(ch.old)
	if sameOwners(old, cur) {
		return delivery{}, false
	}
	d := delivery{ch: ch}
	if !all {
		d.owners, d.filtered = cur, true
	}
	return d, true
}

// delivery is one queued change (with the owners the subscriber sees,
// when not all of them) or a bookmark.
type delivery struct {
	ch       *change
	owners   []mirrorOwner
	filtered bool
	bookmark string // the position, for a bookmark
}

// item is one address of a snapshot.
type item struct {
	ip     string
	owners []mirrorOwner
}

// MirrorSub is one subscription to the address stream. Next must be
// called from one goroutine at a time; Close is safe from any goroutine
// and may be called more than once.
type MirrorSub struct {
	m      *Mirror
	filter filter
	box    replay.Outbox[delivery] // offered under m.mu

	// Owned by the consumer (Next).
	reset    string
	snapshot []item
	replay   []*change
	syncPos  string
	synced   bool
	done     bool
}

// Outbox is the subscription's queue, for the fan-out (replay.Member).
func (s *MirrorSub) Outbox() *replay.Outbox[delivery] { return &s.box }

// Subscribe opens a subscription: a snapshot of every address the
// query's owners hold (one OWNERS message each, by address), SYNCED with
// the position, then an OWNERS message with its position each time an
// address's owner set, as the query sees it, changes; owners outside the
// query never appear, and an address only they hold looks free. Given a
// position within the retained history, it resumes after it with no
// snapshot, no gap and no repeat; otherwise it opens with RESET (the
// reason), then a snapshot. A consumer that falls QueueSize changes
// behind is ended; it may then resume from its last position. notify is
// signalled, without blocking, when a message is ready. ErrInvalid: a
// position that is not one of the stream's.
func (m *Mirror) Subscribe(q MirrorQuery, notify chan<- struct{}) (*MirrorSub, error) {
	var seq uint64
	ours := false
	if q.Position != "" {
		var err error
		if seq, ours, err = m.parsePosition(q.Position); err != nil {
			return nil, err
		}
	}
	s := &MirrorSub{m: m, filter: newFilter(q)}
	s.box.Init(q.QueueSize, notify)
	m.subscribe(s, q.Position != "", seq, ours)
	slices.SortFunc(s.snapshot, func(a, b item) int { return strings.Compare(a.ip, b.ip) })
	return s, nil
}

// subscribe registers s and captures, under the same lock, where its
// stream starts.
func (m *Mirror) subscribe(s *MirrorSub, resume bool, from uint64, ours bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer s.box.Signal()
	if resume {
		m.log.Trim(m.now())
		if !ours {
			s.reset = "the position comes from another or a restarted server"
		} else if chs, err := m.log.Since(from); err != nil {
			s.reset = m.resumeRefusal(err)
		} else {
			s.replay = chs
		}
	}
	if !resume || s.reset != "" {
		for ip, owners := range m.owners {
			if seen, _ := s.filter.view(owners); len(seen) > 0 {
				s.snapshot = append(s.snapshot, item{ip: ip, owners: seen})
			}
		}
	}
	s.syncPos = m.position(m.log.Head())
	m.subs.Add(s)
}

// resumeRefusal explains why the history cannot serve a resume (Since's
// error).
func (m *Mirror) resumeRefusal(err error) string {
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
func (s *MirrorSub) backlog() (changes int, bytes int64) {
	s.box.Each(func(d delivery) {
		if d.ch != nil {
			changes++
			bytes += int64(len(d.ch.message(s.m)))
		}
	})
	return changes, bytes
}

// Close unsubscribes. Messages already queued stay readable with Next.
func (s *MirrorSub) Close() {
	s.m.mu.Lock()
	s.m.subs.Remove(s)
	s.m.mu.Unlock()
}

// Next returns the next message without blocking; ok is false when there
// is none yet (wait for notify) or after the end.
func (s *MirrorSub) Next() (StreamMessage, bool) {
	if s.done {
		return StreamMessage{}, false
	}
	if r, ended := s.box.Ended(); ended {
		s.done, s.snapshot, s.replay = true, nil, nil
		return StreamMessage{Kind: StreamEnded, Reason: r}, true
	}
	if r := s.reset; r != "" {
		s.reset = ""
		raw := jsonscan.AppendString([]byte(`{"type":"`+MessageReset+`","reason":`), r)
		return StreamMessage{Kind: StreamReset, Reason: r, Raw: append(raw, '}')}, true
	}
	if len(s.snapshot) > 0 {
		it := s.snapshot[0]
		s.snapshot[0] = item{}
		s.snapshot = s.snapshot[1:]
		return StreamMessage{Kind: StreamOwners, Raw: appendOwnersMessage(nil, "", it.ip, it.owners)}, true
	}
	for len(s.replay) > 0 {
		ch := s.replay[0]
		s.replay[0] = nil
		s.replay = s.replay[1:]
		if d, ok := s.filter.route(ch); ok {
			return s.message(d), true
		}
	}
	if !s.synced {
		s.synced, s.snapshot, s.replay = true, nil, nil
		return StreamMessage{Kind: StreamSynced, Position: s.syncPos}, true
	}
	d, ok := s.box.Take()
	if !ok {
		return StreamMessage{}, false
	}
	if d.ch == nil {
		return StreamMessage{Kind: StreamBookmark, Position: d.bookmark}, true
	}
	msg := s.message(d)
	msg.Published = d.ch.at
	return msg, true
}

func (s *MirrorSub) message(d delivery) StreamMessage {
	pos := s.m.position(d.ch.seq)
	raw := d.ch.message(s.m)
	if d.filtered {
		raw = appendOwnersMessage(nil, pos, d.ch.ip, d.owners)
	}
	return StreamMessage{Kind: StreamOwners, Position: pos, Raw: raw}
}

// message is ch's message with every owner, encoded once.
func (ch *change) message(m *Mirror) []byte {
	ch.once.Do(func() { ch.all = appendOwnersMessage(nil, m.position(ch.seq), ch.ip, ch.cur) })
	return ch.all
}

// appendOwnersMessage appends {"type":"OWNERS"[,"resourceVersion"],"ip","owners"}.
func appendOwnersMessage(b []byte, pos, ip string, owners []mirrorOwner) []byte {
	b = append(b, `{"type":"`+MessageOwners+`"`...)
	if pos != "" {
		b = append(b, `,"resourceVersion":`...)
		b = jsonscan.AppendString(b, pos)
	}
	b = append(b, `,"ip":`...)
	b = jsonscan.AppendString(b, ip)
	b = append(b, `,"owners":[`...)
	for i := range owners {
		if i > 0 {
			b = append(b, ',')
		}
		o := owners[i].owner()
		b = AppendStreamOwner(b, &o)
	}
	return append(b, "]}"...)
}
