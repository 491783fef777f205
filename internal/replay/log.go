package replay

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// ErrExpired: the position is older than the log holds; the events after
// it are forgotten, so the client must start over.
var ErrExpired = errors.New("the position is older than the retained history")

// ErrAhead: the position is beyond the log's head; it comes from another or
// a restarted producer.
var ErrAhead = errors.New("the position is ahead of the stream")

// PositionError is why Since cannot serve a position: Err is ErrExpired or
// ErrAhead. Oldest and Head are the log's at the time, for the message.
type PositionError struct {
	Pos    uint64
	Oldest uint64 // the oldest position the log could serve
	Head   uint64
	Err    error
}

func (e *PositionError) Error() string {
	return fmt.Sprintf("position %d: %v (the log serves %d to %d)", e.Pos, e.Err, e.Oldest, e.Head)
}

func (e *PositionError) Unwrap() error { return e.Err }

// Log is a bounded history of events, each stamped with a position. The
// user defines what a position is; the log only relies on this: positions
// never decrease, and a client "at" position p has seen every event stamped
// before p and the event that moved the head to p (if any), not the events
// that came later stamped p too. So positions may be dense and unique (a
// sequence) or shared by several events (resource versions, where late
// events take the stamp of the event before them).
//
// It keeps at most its limit of events, and none older than its age but
// those stamped with the head (see Trim). The
// zero value is not usable: make it with NewLog. A Log is not safe for
// concurrent use: its user's lock guards it.
type Log[E any] struct {
	limit int
	age   time.Duration
	head  uint64 // the highest position stamped or advanced to
	base  uint64 // the position just before entries[0]: the oldest servable
	// baseLate is set when the last event forgotten was a late one stamped
	// base: a client at base has not seen it, so base is not servable.
	baseLate bool
	entries  []entry[E]
}

type entry[E any] struct {
	ev  E
	pos uint64
	at  int64 // Unix nanoseconds: a third of a time.Time, for logs are long
	// leads is set when this event moved the head to pos: a client at pos
	// has it.
	leads bool
}

// NewLog returns an empty log at position 0 that keeps at most limit
// events (at least 1) and forgets those older than age (0: never by age).
func NewLog[E any](limit int, age time.Duration) *Log[E] {
	return &Log[E]{limit: max(limit, 1), age: age}
}

// Append records ev, published at at, and returns its stamp: pos, or the
// head when pos is behind it (a late event). Then it forgets events beyond
// the limit and those older than the age before at.
func (l *Log[E]) Append(pos uint64, at time.Time, ev E) (stamp uint64) {
	e := entry[E]{ev: ev, pos: l.head, at: at.UnixNano()}
	if pos > l.head {
		l.head, e.pos, e.leads = pos, pos, true
	}
	l.entries = append(l.entries, e)
	l.Trim(at)
	return e.pos
}

// Advance moves the head to pos when pos is ahead: a position reached
// without an event (the end of an initial list, a bookmark from upstream).
// Events appended later at pos are late ones: a client at pos gets them.
func (l *Log[E]) Advance(pos uint64) {
	l.head = max(l.head, pos)
}

// Reset forgets every event and makes the head (advanced to pos) the
// oldest servable position.
func (l *Log[E]) Reset(pos uint64) {
	l.Advance(pos)
	l.base, l.baseLate = l.head, false
	clear(l.entries)
	l.entries = l.entries[:0]
}

// Trim forgets the events beyond the limit and those published before
// now minus the age, except by age those stamped with the head: a client
// at the head (every list taken meanwhile is) must keep being served
// while nothing moves it, and forgetting a late event stamped there would
// refuse it until something does, so a quiet resource's clients would
// relist forever.
func (l *Log[E]) Trim(now time.Time) {
	n := max(len(l.entries)-l.limit, 0)
	if l.age > 0 {
		oldest := now.Add(-l.age).UnixNano()
		for n < len(l.entries) && l.entries[n].at < oldest && l.entries[n].pos < l.head {
			n++
		}
	}
	if n == 0 {
		return
	}
	l.base, l.baseLate = l.entries[n-1].pos, !l.entries[n-1].leads
	clear(l.entries[:n])
	l.entries = l.entries[n:] // append reallocates in time: the memory follows the limit
}

// Since returns, oldest first, the events a client at pos has not seen,
// in a slice of its own. It fails with a *PositionError: ErrAhead when pos
// is beyond the head, ErrExpired when an event the client has not seen is
// forgotten, or when pos is the oldest position and events stamped with it
// are both held and forgotten.
func (l *Log[E]) Since(pos uint64) ([]E, error) {
	if pos > l.head {
		return nil, &PositionError{Pos: pos, Oldest: l.base, Head: l.head, Err: ErrAhead}
	}
	// At base itself, a forgotten late event stamped base is unseen; and
	// when the first event held shares the stamp, events stamped base were
	// forgotten, which is refused too rather than told apart.
	if pos < l.base || pos == l.base && (l.baseLate || len(l.entries) > 0 && l.entries[0].pos == pos) {
		return nil, &PositionError{Pos: pos, Oldest: l.base, Head: l.head, Err: ErrExpired}
	}
	i := sort.Search(len(l.entries), func(i int) bool { return l.entries[i].pos >= pos })
	if i < len(l.entries) && l.entries[i].pos == pos && l.entries[i].leads {
		i++ // the client has the event that set the position
	}
	out := make([]E, len(l.entries)-i)
	for k, e := range l.entries[i:] {
		out[k] = e.ev
	}
	return out, nil
}

// Head is the highest position stamped or advanced to: where a client
// that has seen everything is.
func (l *Log[E]) Head() uint64 { return l.head }

// Oldest is the oldest position Since may serve (it refuses it when some
// events stamped with it are forgotten).
func (l *Log[E]) Oldest() uint64 { return l.base }

// Len is how many events the log holds.
func (l *Log[E]) Len() int { return len(l.entries) }
