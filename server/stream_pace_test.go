package server

import (
	"slices"
	"testing"
	"time"
)

// fakePacer is a pacer on a clock that only its sleeps and advance move,
// recording each sleep.
type fakePacer struct {
	pacer
	at     time.Time
	sleeps []time.Duration
}

func newFakePacer(every time.Duration) *fakePacer {
	f := &fakePacer{at: time.Unix(1_000_000, 0)}
	f.pacer = pacer{every: every, now: func() time.Time { return f.at }, sleep: func(d time.Duration) {
		f.sleeps = append(f.sleeps, d)
		f.at = f.at.Add(d)
	}}
	return f
}

func (f *fakePacer) advance(d time.Duration) { f.at = f.at.Add(d) }

// write is one wake-up with something to write: hold, the write, wrote
// (with the wake-up channel signalled or not by then), and the sleeps
// that took.
func (f *fakePacer) write(signalled bool) []time.Duration {
	f.sleeps = nil
	f.hold()
	wake := make(chan struct{}, 1)
	if signalled {
		wake <- struct{}{}
	}
	f.wrote(wake)
	return f.sleeps
}

func TestPacer(t *testing.T) {
	const every = 20 * time.Millisecond
	expect := func(t *testing.T, step string, got []time.Duration, want ...time.Duration) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: slept %v; expect %v", step, got, want)
		}
	}

	t.Run("events further apart than the interval never sleep", func(t *testing.T) {
		p := newFakePacer(every)
		for i := range 5 {
			expect(t, "write", p.write(false))
			p.advance(every + time.Duration(i)*time.Millisecond)
		}
	})

	t.Run("an event within the interval waits for the rest of it", func(t *testing.T) {
		p := newFakePacer(every)
		expect(t, "first write", p.write(false))
		p.advance(5 * time.Millisecond)
		// Held for the 15ms left; now busy, so it sleeps the interval
		// after the write, and events came meanwhile.
		expect(t, "second write", p.write(true), 15*time.Millisecond, every)
		// Woken at once by what came during that sleep: no hold, and
		// another sleep after the write.
		expect(t, "third write", p.write(true), every)
		// This sleep finds nothing: the stream is quiet again.
		expect(t, "fourth write", p.write(false), every)
		p.advance(time.Second)
		expect(t, "after a quiet spell", p.write(false))
	})

	t.Run("a busy stream that goes quiet stops sleeping", func(t *testing.T) {
		p := newFakePacer(every)
		p.write(false)
		p.advance(time.Millisecond)
		expect(t, "busy", p.write(false), every-time.Millisecond, every)
		p.advance(every + time.Millisecond)
		expect(t, "quiet", p.write(false))
	})

	t.Run("zero never sleeps", func(t *testing.T) {
		p := newFakePacer(0)
		for range 3 {
			expect(t, "write", p.write(true))
		}
	})
}
