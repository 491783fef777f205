package cache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
	"github.com/kubeindex/kubeindex/internal/text"
)

// EventType is the kind of change an event reports.
type EventType string

// Event types, as in Kubernetes watches.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
)

// MessageType is the "type" of a stream message: an EventType or a control
// message.
type MessageType string

// Control message types.
const (
	// Synced follows the snapshot (or the replayed events): from here the
	// client holds the matching objects as of ResourceVersion.
	Synced MessageType = "SYNCED"
	// Bookmark tells an idle subscription the current position.
	Bookmark MessageType = "BOOKMARK"
	// ResyncRequired ends a subscription that can no longer be continued
	// without a gap; the client must start again with a snapshot.
	ResyncRequired MessageType = "RESYNC_REQUIRED"
	// StreamError answers a WebSocket message the server cannot act on (a
	// malformed subscribe, an unknown subscription), with the message,
	// reason and code the HTTP API would give; the socket stays open.
	StreamError MessageType = "ERROR"
	// Unsubscribed confirms an unsubscribe on the multiplexed WebSocket.
	Unsubscribed MessageType = "UNSUBSCRIBED"
)

// Diff selects the patch carried by MODIFIED events.
type Diff string

// Diff kinds. NoDiff sends the object only.
const (
	NoDiff     Diff = ""
	MergePatch Diff = "merge"     // RFC 7386
	JSONPatch  Diff = "jsonpatch" // RFC 6902
)

// Validate returns ErrInvalid, naming the choices, for a Diff that is none
// of them. It is the one check of a diff mode, for any layer that takes one
// from a client.
func (d Diff) Validate() error {
	switch d {
	case NoDiff, MergePatch, JSONPatch:
		return nil
	}
	return fmt.Errorf("%w: diff must be %q (JSON merge patch) or %q (JSON Patch), got %q", ErrInvalid, MergePatch, JSONPatch, text.Truncate(string(d), 32))
}

// Message is one message of a subscription. Its JSON (WriteTo) is, for
// events, {"type","resourceVersion","object"[,"patch"]}; for SYNCED and
// BOOKMARK, {"type","resourceVersion"}; for RESYNC_REQUIRED,
// {"type","reason"}. The address stream's messages (WatchAddresses) are
// encoded whole by it.
type Message struct {
	Type MessageType
	// ResourceVersion is the stream position to resume after this message:
	// events, SYNCED and BOOKMARK. Snapshot items carry their object's own
	// resourceVersion, which is not a position (see Snapshot).
	ResourceVersion string
	// Reason explains RESYNC_REQUIRED.
	Reason string

	obj  *Object // snapshot item
	ev   *event
	diff Diff
	live bool // an event taken from the queue as it happened
	// raw is a whole message encoded by its stream (the address stream's),
	// and pub when its live change was published.
	raw []byte
	pub time.Time
	// rawTail follows raw: a window's own end of a message whose start
	// windows share (window_sub.go).
	rawTail []byte
}

// Snapshot reports whether m is an item of the initial snapshot. A stream
// cannot be resumed from the middle of its snapshot.
func (m *Message) Snapshot() bool { return m.obj != nil }

// Published returns when the broker published the event m carries, on the
// cache's clock, for an event delivered live; ok is false for snapshot
// items, events replayed on resume (published before the subscription
// asked for them), bookmarks and control messages. It times how long an
// event takes to reach a subscriber.
func (m *Message) Published() (at time.Time, ok bool) {
	switch {
	case !m.live:
		return time.Time{}, false
	case m.ev != nil:
		return m.ev.at, true
	}
	return m.pub, !m.pub.IsZero()
}

// Terminal reports whether the subscription ends with m.
func (m *Message) Terminal() bool { return m.Type == ResyncRequired }

// Object returns the object of an event or snapshot item, else nil.
func (m *Message) Object() *Object {
	if m.obj != nil {
		return m.obj
	}
	if m.ev != nil {
		return m.ev.obj
	}
	return nil
}

// WriteTo writes m as one JSON object without a trailing newline. Event
// messages are written from bytes encoded once per event and shared by all
// subscribers; nothing is re-encoded per subscriber.
func (m *Message) WriteTo(w io.Writer) (int64, error) {
	var total int64
	var buf msgParts
	for _, p := range m.parts(&buf) {
		n, err := w.Write(p)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// Len returns the length of m's JSON, so that a frame header can precede
// it without a copy.
func (m *Message) Len() int {
	var buf msgParts
	n := 0
	for _, p := range m.parts(&buf) {
		n += len(p)
	}
	return n
}

// AppendTo appends m's JSON, as WriteTo writes it, to dst.
func (m *Message) AppendTo(dst []byte) []byte {
	var buf msgParts
	for _, p := range m.parts(&buf) {
		dst = append(dst, p...)
	}
	return dst
}

// msgParts holds a message's pieces: a head, the object's pieces, a tail.
type msgParts [maxPieces + 2][]byte

// parts is m's JSON in consecutive pieces, in buf. Those of events are
// shared by every subscriber and must not be modified.
func (m *Message) parts(buf *msgParts) [][]byte {
	switch {
	case m.raw != nil:
		return append(buf[:0], m.raw, m.rawTail)
	case m.ev != nil:
		as := EventType(m.Type)
		p := m.ev.obj.Pieces(append(buf[:0], m.ev.head(as)))
		return append(p, m.ev.tail(as, m.diff))
	case m.obj != nil:
		p := m.obj.Pieces(append(buf[:0], eventHead(nil, Added, m.obj.resourceVersion)))
		return append(p, closeBrace)
	}
	var b []byte
	if m.Type == ResyncRequired {
		b = append(b, `{"type":"`+string(ResyncRequired)+`","reason":`...)
		b = jsonscan.AppendString(b, m.Reason)
	} else {
		b = append(b, `{"type":`...)
		b = jsonscan.AppendString(b, string(m.Type))
		b = append(b, `,"resourceVersion":`...)
		b = jsonscan.AppendString(b, m.ResourceVersion)
	}
	return append(buf[:0], append(b, '}'))
}

var closeBrace = []byte("}")

// event is one change as the broker published it. Its wire form is built
// lazily, once, from three parts: a head per delivered type (a MODIFIED
// leaving a subscriber's filter is delivered as DELETED), the object's own
// bytes, and a tail per diff kind.
type event struct {
	typ   EventType
	obj   *Object // the object after the change; for DELETED its last state
	old   *Object // the object before the change; nil for ADDED
	rvStr string  // the stream position after this event (its stamp in the broker's log)
	at    time.Time
	seq   uint64 // the broker's count of events before this one

	heads [3]lazyBytes // by delivered type
	tails [2]lazyBytes // MODIFIED with a merge patch, with a JSON Patch
}

type lazyBytes struct {
	once sync.Once
	b    []byte
}

func (l *lazyBytes) get(build func() []byte) []byte {
	l.once.Do(func() { l.b = build() })
	return l.b
}

func (e *event) head(as EventType) []byte {
	i := 0
	switch as {
	case Modified:
		i = 1
	case Deleted:
		i = 2
	}
	return e.heads[i].get(func() []byte { return eventHead(nil, as, e.rvStr) })
}

func eventHead(buf []byte, as EventType, rv string) []byte {
	buf = append(buf, `{"type":"`...)
	buf = append(buf, as...)
	buf = append(buf, `","resourceVersion":`...)
	buf = jsonscan.AppendString(buf, rv)
	return append(buf, `,"object":`...)
}

// tail closes the message, with the patch from the previous version when
// one was asked for and can be expressed.
func (e *event) tail(as EventType, d Diff) []byte {
	if as != Modified || e.old == nil || d == NoDiff {
		return closeBrace
	}
	i := 0
	if d == JSONPatch {
		i = 1
	}
	return e.tails[i].get(func() []byte {
		p := computePatch(e.old.flat(), e.obj.flat(), d)
		if p == nil {
			return closeBrace
		}
		return append(append([]byte(`,"patch":`), p...), '}')
	})
}

// computePatch returns the encoded patch from old to cur, or nil when it
// cannot be computed or expressed.
func computePatch(old, cur []byte, d Diff) []byte {
	a, errA := decodeJSON(old)
	b, errB := decodeJSON(cur)
	if errA != nil || errB != nil {
		return nil
	}
	var p any
	switch d {
	case MergePatch:
		mp, ok := mergePatch(a, b)
		if !ok {
			return nil
		}
		p = mp
	case JSONPatch:
		p = append([]patchOp{}, jsonPatch(nil, "", a, b)...)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
