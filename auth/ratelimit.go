package auth

import (
	"context"
	"errors"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/lru"
)

// ErrTooManyReviews is the answer to a client that asked for more reviews
// of unknown tokens than its address may: the token was not checked, and
// the caller should be told to slow down, not that its token is bad.
var ErrTooManyReviews = errors.New("too many token reviews for this client address")

type clientAddrKey struct{}

// WithClientAddr returns ctx carrying the network address a request came
// from (the connection's, never a header a client can forge). A
// TokenReviewer rate-limits reviews per address; without one, all callers
// share the budget of the address "".
func WithClientAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, clientAddrKey{}, addr)
}

// ClientAddr is the address WithClientAddr stored, or "".
func ClientAddr(ctx context.Context) string {
	a, _ := ctx.Value(clientAddrKey{}).(string)
	return a
}

// addrLimiter is a token bucket per client address, for the most recently
// active addresses (the least recently seen is forgotten first, which only
// refills its bucket). Safe for concurrent use.
type addrLimiter struct {
	rate  rate.Limit
	burst int
	now   func() time.Time
	lru   *lru.Cache
}

func newAddrLimiter(perSecond float64, burst, addresses int, now func() time.Time) *addrLimiter {
	return &addrLimiter{rate: rate.Limit(perSecond), burst: burst, now: now, lru: lru.New(addresses)}
}

// allow takes one review from addr's bucket, if there is one left.
func (l *addrLimiter) allow(addr string) bool {
	v, ok := l.lru.Get(addr)
	if !ok {
		v = rate.NewLimiter(l.rate, l.burst)
		l.lru.Add(addr, v) // a racing Add for the same address only resets a fresh bucket
	}
	return v.(*rate.Limiter).AllowN(l.now(), 1)
}
