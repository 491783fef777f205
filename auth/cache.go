package auth

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	utilcache "k8s.io/apimachinery/pkg/util/cache"
)

// CacheOptions bounds a decision cache. Zero values take the defaults of
// the authenticator or authorizer that uses it.
type CacheOptions struct {
	// AllowTTL is how long a positive answer is reused.
	AllowTTL time.Duration
	// DenyTTL is how long a negative answer is reused.
	DenyTTL time.Duration
	// MaxEntries bounds the positive answers; the least recently used goes
	// first.
	MaxEntries int
	// MaxDenied bounds the negative answers, kept apart: a flood of
	// questions that are denied (random tokens) never evicts an allowed
	// answer. Default a quarter of MaxEntries.
	MaxDenied int
	// StaleGrace is how long past its TTL an answer may still be used when
	// the review itself fails (the API server is down), so that an outage
	// does not lock out callers who were just allowed. Negative disables it.
	StaleGrace time.Duration
	// Timeout bounds one review. Default 10s.
	Timeout time.Duration
	// Now is the clock; default time.Now. Tests replace it.
	Now func() time.Time
}

func (o CacheOptions) withDefaults(allow, deny time.Duration, entries int, grace time.Duration) CacheOptions {
	if o.AllowTTL <= 0 {
		o.AllowTTL = allow
	}
	if o.DenyTTL <= 0 {
		o.DenyTTL = deny
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = entries
	}
	if o.MaxDenied <= 0 {
		o.MaxDenied = max(1, o.MaxEntries/4)
	}
	switch {
	case o.StaleGrace == 0:
		o.StaleGrace = grace
	case o.StaleGrace < 0:
		o.StaleGrace = 0
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

type clock func() time.Time

func (c clock) Now() time.Time { return c() }

// decisionCache remembers answers by a hashed key (raw tokens are never
// kept as keys), asks the backend once for concurrent identical questions,
// and falls back to a recently expired answer when the backend fails.
// Errors are never cached. Allowed and denied answers are kept in two
// LRUs, each with its own bound, so that denials cannot push out the
// answers of known callers. Safe for concurrent use.
type decisionCache[V any] struct {
	opts    CacheOptions
	allowed func(V) bool
	lru     *utilcache.LRUExpireCache // allowed answers
	denied  *utilcache.LRUExpireCache

	mu       sync.Mutex
	inflight map[[32]byte]*flight[V]

	allows, denies, errors, hits, misses, stale atomic.Uint64
}

type cached[V any] struct {
	v     V
	fresh time.Time // reused without asking until then
}

type flight[V any] struct {
	done chan struct{}
	v    V
	err  error
}

func newDecisionCache[V any](o CacheOptions, allowed func(V) bool) *decisionCache[V] {
	return &decisionCache[V]{opts: o, allowed: allowed,
		lru:      utilcache.NewLRUExpireCacheWithClock(o.MaxEntries, clock(o.Now)),
		denied:   utilcache.NewLRUExpireCacheWithClock(o.MaxDenied, clock(o.Now)),
		inflight: map[[32]byte]*flight[V]{}}
}

// cacheKey hashes parts unambiguously: each is length-prefixed.
func cacheKey(parts ...string) [32]byte {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// get answers from the cache or from review, which is called with a
// context of its own (bounded by Timeout, not cancelled when the caller
// that happened to ask first goes away).
func (c *decisionCache[V]) get(ctx context.Context, key [32]byte, review func(context.Context) (V, error)) (V, error) {
	now := c.opts.Now()
	prev, found := c.lookup(key)
	if found && now.Before(prev.fresh) {
		c.hits.Add(1)
		c.count(prev.v)
		return prev.v, nil
	}
	c.misses.Add(1)
	if cachedOnly(ctx) {
		if found {
			c.stale.Add(1)
			c.count(prev.v)
			return prev.v, nil
		}
		c.errors.Add(1)
		var zero V
		return zero, ErrNotCached
	}
	v, err := c.ask(ctx, key, review)
	if err != nil {
		// Expired, but within the grace kept in the LRU's own TTL; not for
		// a caller refused for asking too much, who could otherwise keep a
		// revoked token alive by flooding.
		if found && !errors.Is(err, ErrTooManyReviews) && !errors.Is(err, ErrTooManyAccessReviews) {
			c.stale.Add(1)
			c.count(prev.v)
			return prev.v, nil
		}
		c.errors.Add(1)
		return v, err
	}
	c.count(v)
	return v, nil
}

func (c *decisionCache[V]) lookup(key [32]byte) (cached[V], bool) {
	e, ok := c.lru.Get(key)
	if !ok {
		e, ok = c.denied.Get(key)
	}
	if !ok {
		return cached[V]{}, false
	}
	return e.(cached[V]), true
}

// store keeps an answer in its LRU, and drops an older answer to the same
// question from the other (a token revoked, a role granted).
func (c *decisionCache[V]) store(key [32]byte, v V) {
	ttl, into, other := c.opts.DenyTTL, c.denied, c.lru
	if c.allowed(v) {
		ttl, into, other = c.opts.AllowTTL, c.lru, c.denied
	}
	other.Remove(key)
	into.Add(key, cached[V]{v: v, fresh: c.opts.Now().Add(ttl)}, ttl+c.opts.StaleGrace)
}

// ask runs review once for all concurrent callers with the same key.
func (c *decisionCache[V]) ask(ctx context.Context, key [32]byte, review func(context.Context) (V, error)) (V, error) {
	c.mu.Lock()
	f, joined := c.inflight[key]
	if !joined {
		f = &flight[V]{done: make(chan struct{})}
		c.inflight[key] = f
	}
	c.mu.Unlock()
	if !joined {
		// Asked apart, so that the first caller, too, leaves when its own
		// context ends (a short deadline for one cluster of a fleet) while
		// the review goes on for the others.
		go func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.Timeout)
			f.v, f.err = review(rctx)
			cancel()
			if f.err == nil {
				c.store(key, f.v)
			}
			c.mu.Lock()
			delete(c.inflight, key)
			c.mu.Unlock()
			close(f.done)
		}()
	}
	select {
	case <-f.done:
		return f.v, f.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

func (c *decisionCache[V]) count(v V) {
	if c.allowed(v) {
		c.allows.Add(1)
	} else {
		c.denies.Add(1)
	}
}

func (c *decisionCache[V]) stats() Stats {
	return Stats{Allowed: c.allows.Load(), Denied: c.denies.Load(), Errors: c.errors.Load(),
		CacheHits: c.hits.Load(), CacheMisses: c.misses.Load(), StaleHits: c.stale.Load()}
}
