package replay

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// logOf appends events named by their index at the given positions, one
// second apart.
func logOf(limit int, age time.Duration, positions ...uint64) *Log[int] {
	l := NewLog[int](limit, age)
	for i, p := range positions {
		l.Append(p, t0.Add(time.Duration(i)*time.Second), i)
	}
	return l
}

// TestLogSince: given a log, when a client comes back at a position, then
// it gets exactly the events it has not seen, or the reason it cannot.
func TestLogSince(t *testing.T) {
	for _, tc := range []struct {
		name    string
		log     *Log[int]
		pos     uint64
		want    []int
		wantErr error
	}{
		{"empty log at its head", logOf(8, 0), 0, []int{}, nil},
		{"empty log, ahead", logOf(8, 0), 1, nil, ErrAhead},
		{"dense: from the start", logOf(8, 0, 1, 2, 3), 0, []int{0, 1, 2}, nil},
		{"dense: the middle", logOf(8, 0, 1, 2, 3), 2, []int{2}, nil},
		{"dense: at the head", logOf(8, 0, 1, 2, 3), 3, []int{}, nil},
		{"dense: ahead", logOf(8, 0, 1, 2, 3), 4, nil, ErrAhead},
		{"gaps: between stamps", logOf(8, 0, 10, 20, 30), 15, []int{1, 2}, nil},
		// Events 1 and 2 come late and take the stamp 10 of event 0, which
		// set it: a client at 10 has event 0, not 1 and 2.
		{"shared: late events after the leader", logOf(8, 0, 10, 5, 7, 11), 10, []int{1, 2, 3}, nil},
		{"shared: before the leader", logOf(8, 0, 10, 5, 7, 11), 9, []int{0, 1, 2, 3}, nil},
		{"trimmed by count: older than kept", logOf(2, 0, 1, 2, 3, 4), 1, nil, ErrExpired},
		{"trimmed by count: the oldest servable", logOf(2, 0, 1, 2, 3, 4), 2, []int{2, 3}, nil},
		// The leader at 10 is forgotten and a late event stamped 10 is
		// kept: events stamped 10 may be forgotten, so 10 is refused.
		{"trimmed: inside a shared stamp", logOf(3, 0, 10, 5, 7, 11), 10, nil, ErrExpired},
		{"trimmed: after a shared stamp", logOf(2, 0, 10, 5, 7, 11), 10, nil, ErrExpired},
		{"trimmed by age", logOf(8, 90*time.Second, 1, 2, 3), 0, []int{0, 1, 2}, nil},
		{"trimmed by age: gone", logOf(8, time.Second, 1, 2, 3), 0, nil, ErrExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.log.Since(tc.pos)
			if !errors.Is(err, tc.wantErr) || tc.wantErr == nil && err != nil {
				t.Fatalf("Since(%d): error %v; expect %v", tc.pos, err, tc.wantErr)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Since(%d) = %v; expect %v", tc.pos, got, tc.want)
			}
			var pe *PositionError
			if err != nil && (!errors.As(err, &pe) || pe.Pos != tc.pos || pe.Oldest != tc.log.Oldest() || pe.Head != tc.log.Head()) {
				t.Errorf("error %#v does not say the position, oldest and head", err)
			}
		})
	}
}

// TestLogAdvanceAndReset: a head reached without an event serves nothing
// new, and events stamped with it later are new to a client there; Reset
// makes the head the oldest position.
func TestLogAdvanceAndReset(t *testing.T) {
	l := logOf(8, 0, 1, 2)
	l.Advance(5)
	l.Advance(4) // never backwards
	if l.Head() != 5 {
		t.Fatalf("head %d; expect 5", l.Head())
	}
	if got, _ := l.Since(5); len(got) != 0 {
		t.Errorf("Since(head) = %v; expect nothing", got)
	}
	if stamp := l.Append(3, t0, 7); stamp != 5 {
		t.Errorf("a late event is stamped %d; expect the head, 5", stamp)
	}
	if got, _ := l.Since(5); !slices.Equal(got, []int{7}) {
		t.Errorf("Since(5) = %v; expect the late event", got)
	}
	l.Reset(3) // behind the head: the head stays
	if l.Head() != 5 || l.Oldest() != 5 || l.Len() != 0 {
		t.Errorf("after Reset: head %d oldest %d len %d; expect 5 5 0", l.Head(), l.Oldest(), l.Len())
	}
	if _, err := l.Since(4); !errors.Is(err, ErrExpired) {
		t.Errorf("Since(4) after Reset: %v; expect expired", err)
	}
	if got, err := l.Since(5); err != nil || len(got) != 0 {
		t.Errorf("Since(5) after Reset: %v %v; expect nothing", got, err)
	}
}

// TestLogQuietHeadStaysServable: a late event stamped with the head, then
// nothing for longer than the age. A client at the head (a list taken
// meanwhile says the head) is served, not refused as too old: refused, it
// would list again, get the same head and be refused again, for as long
// as the resource stays quiet. Once the head moves, the age applies.
func TestLogQuietHeadStaysServable(t *testing.T) {
	l := NewLog[int](8, time.Minute)
	l.Append(10, t0, 0)
	l.Advance(12) // the informers' list reached 12 before the event at 11 was handed over
	if stamp := l.Append(11, t0.Add(time.Second), 1); stamp != 12 {
		t.Fatalf("the late event is stamped %d; expect the head, 12", stamp)
	}
	l.Trim(t0.Add(time.Hour))
	got, err := l.Since(12)
	if err != nil || !slices.Equal(got, []int{1}) {
		t.Fatalf("an hour later, Since(head) = %v, %v; expect the late event, which a client there may not have", got, err)
	}
	if _, err := l.Since(9); !errors.Is(err, ErrExpired) {
		t.Errorf("Since(9) an hour later: %v; expect expired: the event at 10 is older than the age", err)
	}
	l.Append(13, t0.Add(time.Hour), 2)
	l.Trim(t0.Add(2 * time.Hour))
	if _, err := l.Since(12); !errors.Is(err, ErrExpired) {
		t.Errorf("Since(12) once the head moved on and an hour passed: %v; expect expired", err)
	}
	if got, err := l.Since(13); err != nil || len(got) != 0 {
		t.Errorf("Since(13): %v, %v; expect nothing new", got, err)
	}
}

// logModel is the brute-force reference: every event ever appended, with
// whether it is still held.
type logModel struct {
	events []modelEvent
	head   uint64
	reset  uint64 // the last Reset's position: nothing before is servable
}

type modelEvent struct {
	id        int
	pos       uint64
	leads     bool
	at        time.Time
	forgotten bool
}

// unseen is what a client at pos has not seen: events stamped after pos,
// and those stamped pos that did not set it.
func (m *logModel) unseen(pos uint64) (ids []int, forgotten bool) {
	for _, e := range m.events {
		if e.pos > pos || e.pos == pos && !e.leads {
			ids = append(ids, e.id)
			forgotten = forgotten || e.forgotten
		}
	}
	return ids, forgotten
}

// TestLogAgainstAModel: under random appends (in order and late), advances,
// resets and trims, every answer of Since is the brute-force one: the
// exact unseen events, ErrAhead beyond the head, and ErrExpired whenever
// one of them is forgotten, and only then or at the one ambiguous position
// (the oldest, when events stamped with it were both kept and forgotten).
func TestLogAgainstAModel(t *testing.T) {
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 42))
		limit := 1 + rng.IntN(6)
		age := time.Duration(rng.IntN(3)) * 5 * time.Second
		l := NewLog[int](limit, age)
		m := &logModel{}
		now := t0
		for step := range 300 {
			switch op := rng.IntN(20); {
			case op < 12:
				pos := m.head + uint64(rng.IntN(4))
				if rng.IntN(4) == 0 {
					pos = uint64(rng.IntN(int(m.head) + 1)) // late
				}
				now = now.Add(time.Duration(rng.IntN(3)) * time.Second)
				e := modelEvent{id: step, pos: max(pos, m.head), leads: pos > m.head, at: now}
				m.head = e.pos
				m.events = append(m.events, e)
				if stamp := l.Append(pos, now, step); stamp != e.pos {
					t.Fatalf("seed %d step %d: stamp %d; expect %d", seed, step, stamp, e.pos)
				}
				m.trim(limit, age, now)
			case op < 14:
				m.head += uint64(rng.IntN(3))
				l.Advance(m.head)
			case op < 15:
				m.head = max(m.head, uint64(rng.IntN(int(m.head)+3)))
				l.Reset(m.head)
				// The head is now a clean boundary: a client there has
				// everything before, a client before it is too old.
				m.reset, m.events = m.head, nil
			default:
				now = now.Add(time.Duration(rng.IntN(4)) * time.Second)
				l.Trim(now)
				m.trim(limit, age, now)
			}
			// Every position from a little before the oldest held to
			// beyond the head, and the first.
			where := fmt.Sprintf("seed %d step %d", seed, step)
			m.check(t, l, 0, where)
			for pos := max(l.Oldest(), 2) - 2; pos <= m.head+1; pos++ {
				m.check(t, l, pos, where)
			}
		}
	}
}

func (m *logModel) trim(limit int, age time.Duration, now time.Time) {
	var held []int
	for i, e := range m.events {
		if !e.forgotten {
			held = append(held, i)
		}
	}
	for k, i := range held {
		if len(held)-k > limit || age > 0 && m.events[i].at.Before(now.Add(-age)) && m.events[i].pos < m.head {
			m.events[i].forgotten = true
		}
	}
}

func (m *logModel) check(t *testing.T, l *Log[int], pos uint64, where string) {
	t.Helper()
	got, err := l.Since(pos)
	want, lost := m.unseen(pos)
	// The oldest servable position: the reset's, or the last forgotten
	// event's stamp; and whether events stamped with it are still held.
	oldest, shared := m.reset, false
	for _, e := range m.events {
		if e.forgotten {
			oldest = max(oldest, e.pos)
		}
	}
	for _, e := range m.events {
		if !e.forgotten && e.pos == oldest {
			shared = true
		}
	}
	switch {
	case pos > m.head:
		if !errors.Is(err, ErrAhead) {
			t.Fatalf("%s: Since(%d) beyond head %d: %v; expect ErrAhead", where, pos, m.head, err)
		}
	case lost || pos < oldest || pos == oldest && shared:
		if !errors.Is(err, ErrExpired) {
			t.Fatalf("%s: Since(%d) with unseen events forgotten (oldest %d): %v %v; expect ErrExpired", where, pos, oldest, got, err)
		}
	case err != nil:
		t.Fatalf("%s: Since(%d): %v; expect %v", where, pos, err, want)
	case !slices.Equal(got, want) && len(got)+len(want) > 0:
		t.Fatalf("%s: Since(%d) = %v; expect %v", where, pos, got, want)
	}
}
