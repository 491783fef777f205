package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// A cluster's part of a stream across clusters that cannot go on is
// opened again later, spaced by its backoff: a part whose open failed
// (its cluster's access review did not answer in time, it was not
// serving), and a part whose client fell so far behind that its queue
// overflowed, which reopens with a whole snapshot each time. The first
// overflow after a quiet period reopens at once (a burst of events is
// forgiven); each failure after that, until the part has been quiet for
// partQuiet, waits twice as long as the one before, from partBackoffFirst
// up to partBackoffMax. A failed open always waits at least
// partBackoffFirst: asking a hung API server again at once would only hang
// again.
const (
	partBackoffFirst = time.Second
	partBackoffMax   = 30 * time.Second
	partQuiet        = 2 * time.Minute
)

// partBackoff spaces one part's reopenings. It is used by the stream's
// consumer only.
type partBackoff struct {
	next time.Duration // the wait before the next reopening
	last time.Time     // the last failure; zero: none yet
}

// fail records a failure at now and returns how long to wait before
// reopening: at least floor, and twice the last wait.
func (b *partBackoff) fail(now time.Time, floor time.Duration) time.Duration {
	if !b.last.IsZero() && now.Sub(b.last) >= partQuiet {
		b.next = 0
	}
	d := max(b.next, floor)
	b.next = min(max(2*d, partBackoffFirst), partBackoffMax)
	b.last = now
	return d
}

// streamClock is the time a stream across clusters schedules its
// reopenings by; tests replace it.
type streamClock struct {
	now   func() time.Time
	after func(d time.Duration, f func()) (stop func() bool)
}

var realClock = streamClock{
	now: time.Now,
	after: func(d time.Duration, f func()) func() bool {
		return time.AfterFunc(d, f).Stop
	},
}

// retryLater schedules p's next open after its backoff (at least
// partBackoffFirst when atLeast) and returns the wait: 0 is at once, the
// caller opens it.
func (fs *fleetStream) retryLater(p *fleetPart, atLeast bool) time.Duration {
	floor := time.Duration(0)
	if atLeast {
		floor = partBackoffFirst
	}
	d := p.backoff.fail(fs.clock.now(), floor)
	fs.stopRetry(p)
	if d == 0 {
		return 0
	}
	p.retryAt = fs.clock.now().Add(d)
	p.stopTimer = fs.clock.after(d, func() {
		fs.retryDue.Store(true)
		signal(fs.wake)
	})
	return d
}

func (fs *fleetStream) stopRetry(p *fleetPart) {
	if p.stopTimer != nil {
		p.stopTimer()
		p.stopTimer = nil
	}
	p.retryAt = time.Time{}
}

// overflowed reopens, after its backoff, a part whose client fell
// behind: at once, or after a CLUSTER message that says when.
func (fs *fleetStream) overflowed(p *fleetPart, why string) {
	d := fs.retryLater(p, false)
	if d == 0 {
		fs.startOpen(p, p.cs, "")
		return
	}
	p.status = http.StatusServiceUnavailable
	fs.reportNow(p, fs.stateOf(p.name), fmt.Sprintf("this stream fell behind cluster %q again (%s); its snapshot follows in %s",
		p.name, why, d), d)
}

// appendRetryAfter appends the CLUSTER message's field that says when a
// part is opened again, in whole seconds (rounded up).
func appendRetryAfter(b []byte, d time.Duration) []byte {
	if d <= 0 {
		return b
	}
	b = append(b, `,"retryAfterSeconds":`...)
	return strconv.AppendInt(b, int64((d+time.Second-1)/time.Second), 10)
}

// resyncMessage is a cluster's RESYNC_REQUIRED made by the stream itself:
// the part must start again with a snapshot while its client may hold
// some of that cluster's objects.
func (fs *fleetStream) resyncMessage(p *fleetPart, why string) []byte {
	b := append(append([]byte(nil), p.tag...), `"type":"RESYNC_REQUIRED","reason":`...)
	return append(jsonscan.AppendString(b, why), '}')
}
