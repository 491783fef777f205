package server

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
)

// Why a stream ends before its client leaves or the server shuts down.
var (
	// errTokenRevoked: the stream's bearer token is no longer valid.
	errTokenRevoked = echo.NewHTTPError(http.StatusUnauthorized, "Unauthorized: the bearer token is no longer valid")
	// errTokenUnchecked: the token could not be reviewed again because its
	// address asks for too many reviews (an old answer is not reused for
	// it, or flooding would keep a revoked token alive).
	errTokenUnchecked = echo.NewHTTPError(http.StatusTooManyRequests, "the bearer token could not be checked again: too many token reviews from this address")
	// errLifetimeOver: the stream reached its maximum lifetime
	// (StreamOptions.MaxLifetime); the client resumes from its position.
	errLifetimeOver = errors.New("the stream reached its maximum lifetime: resume from the last resourceVersion")
)

const tokenKey = "kubeindex.token"

// lifetime is how long one new stream may last: at random between half
// MaxLifetime and MaxLifetime, so that clients opened together come back
// spread out (the API server does the same with watches).
func (h *streamHub) lifetime() time.Duration {
	half := h.opts.MaxLifetime / 2
	return half + rand.N(h.opts.MaxLifetime-half+1)
}

// streamLife ends one open stream when its caller's bearer token is no
// longer valid, reviewed again every StreamOptions.Recheck through the
// authenticator's cache, when its lifetime is over, or when its server is
// retired (Retire). Its timers run only when they fire: an idle stream
// holds no goroutine for it.
type streamLife struct {
	s     *Server
	token string // "" when not authenticating: nothing to review again
	addr  string // the client's address, for the review budget
	wake  chan<- struct{}
	ended chan struct{} // closed once why is set

	once sync.Once
	why  error

	mu             sync.Mutex
	stopped        bool
	recheck, limit *time.Timer
	retired        func() bool // stops the end at the server's retirement
}

// startLife starts the life of the stream c opens: its token taken when
// the request was authenticated, its lifetime (0: StreamOptions'). wake,
// if not nil, is signalled without blocking when the stream must end.
// Every life it returns must be stopped.
func (s *Server) startLife(c echo.Context, lifetime time.Duration, wake chan<- struct{}) *streamLife {
	token, _ := c.Get(tokenKey).(string)
	l := &streamLife{s: s, token: token, addr: remoteHost(c.Request()), wake: wake, ended: make(chan struct{})}
	if lifetime <= 0 {
		lifetime = s.streams.lifetime()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limit = time.AfterFunc(lifetime, func() { l.end(errLifetimeOver) })
	l.retired = context.AfterFunc(s.retired, func() { l.end(s.retiredWhy()) })
	if token != "" {
		l.recheck = time.AfterFunc(s.streams.opts.Recheck, l.check)
	}
	return l
}

// stop releases the timers; the stream has ended.
func (l *streamLife) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	l.limit.Stop()
	l.retired()
	if l.recheck != nil {
		l.recheck.Stop()
	}
}

// check reviews the token again, on the recheck timer's goroutine, and
// ends the stream or sets the timer again.
func (l *streamLife) check() {
	if err := l.authenticate(l.s.streams.ctx); err != nil {
		l.end(err)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.recheck.Reset(l.s.streams.opts.Recheck)
	}
}

// authenticate reviews the stream's token now, through the
// authenticator's cache: nil while it is valid. When the review cannot be
// made (the API server does not answer) the stream goes on; it still ends
// at its lifetime.
func (l *streamLife) authenticate(ctx context.Context) error {
	if l.token == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(auth.WithClientAddr(ctx, l.addr), l.s.opts.Auth.Timeout)
	defer cancel()
	_, ok, err := l.s.opts.Auth.Authenticator.AuthenticateToken(ctx, l.token)
	switch {
	case errors.Is(err, auth.ErrTooManyReviews):
		return errTokenUnchecked
	case err != nil:
		l.s.log.Warn("an open stream's bearer token could not be checked again", "err", err)
		return nil
	case !ok:
		return errTokenRevoked
	}
	return nil
}

// end ends the stream for why; the first reason stays.
func (l *streamLife) end(why error) {
	l.once.Do(func() {
		l.why = why
		close(l.ended)
		if l.wake != nil {
			signal(l.wake)
		}
	})
}

// over returns why the stream must end, or nil.
func (l *streamLife) over() error {
	select {
	case <-l.ended:
		return l.why
	default:
		return nil
	}
}

// position follows a stream's position as its messages are written: the
// resourceVersion a client resumes after, once its snapshot is over.
type position string

func (p *position) follow(m *cache.Message) {
	if !m.Snapshot() && m.ResourceVersion != "" {
		*p = position(m.ResourceVersion)
	}
}

// bookmark is the message that tells a client where to resume; false
// before the stream has a position (its snapshot is not over).
func (p position) bookmark() (cache.Message, bool) {
	return cache.Message{Type: cache.Bookmark, ResourceVersion: string(p)}, p != ""
}
