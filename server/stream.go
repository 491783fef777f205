package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/text"
)

// StreamOptions bounds and tunes the event streams (WebSocket and SSE).
// Zero values take the documented defaults.
type StreamOptions struct {
	// AllowedOrigins are the browser origins ("https://dash.example.com")
	// allowed to open WebSockets besides the server's own host; "*" allows
	// any. Default: the server's own host only. Requests without an Origin
	// header (curl, programs) are not browsers and are allowed.
	AllowedOrigins []string
	// MaxSubscribers bounds the subscriptions of all clients together.
	// Default DefaultMaxSubscribers.
	MaxSubscribers int
	// MaxSubscriptionsPerSocket bounds one multiplexed WebSocket. Default
	// DefaultMaxSubscriptionsPerSocket.
	MaxSubscriptionsPerSocket int
	// QueueSize is how many events a subscription may lag behind before it
	// is told to resync. Default cache.DefaultQueueSize.
	QueueSize int
	// MaxMessageBytes bounds a client's WebSocket message: a larger one is
	// answered with an ERROR message. Default DefaultMaxMessageBytes. A
	// message above CloseMessageBytes (or MaxMessageBytes, if larger)
	// closes the socket with code 1009.
	MaxMessageBytes int64
	// PingInterval is how often WebSocket peers are pinged; a peer silent
	// for two intervals is disconnected. Default 30s.
	PingInterval time.Duration
	// WriteTimeout bounds one write to a stream client. Default 10s.
	WriteTimeout time.Duration
	// Coalesce is the least time between two writes of a stream: the
	// events that arrive meanwhile go out together, in one write, which
	// costs the server and the client much less than a write (and a
	// wake-up) each. An event that comes longer than Coalesce after the
	// last write goes out at once; one that comes sooner waits at most
	// that. Zero writes every event as soon as it is there. At most
	// MaxCoalesce.
	Coalesce time.Duration
	// MaxLifetime bounds how long a stream stays open: each ends at random
	// between half of it and it (as the API server ends watches after 30
	// to 60 minutes), so that revoked access and clients' reconnections
	// come round spread out. A WebSocket or SSE stream ends with a BOOKMARK
	// carrying its position, to resume from without loss. Default 1h.
	MaxLifetime time.Duration
	// WindowRate is the most messages a second a live window sends
	// (docs/streams.md, "Live windows"). Default cache.DefaultWindowRate.
	WindowRate float64
	// Recheck is how often an open stream's bearer token is reviewed again
	// (through the authenticator's cache); a token no longer valid ends the
	// stream. Default DefaultRecheck, as long as TokenReview's cache keeps
	// a valid token.
	Recheck time.Duration
}

// MaxCoalesce bounds StreamOptions.Coalesce: a stream that waits does not
// answer pings or notice the server's shutdown until it wakes.
// DefaultCoalesce is the command's default: it saves CPU per frame when
// many sockets stream (BENCHMARKS.md, "Streams coalesce"), and no event
// waits long enough for a person to see.
const (
	MaxCoalesce     = time.Second
	DefaultCoalesce = 20 * time.Millisecond
)

// StreamOptions' other defaults.
const (
	DefaultMaxLifetime               = time.Hour
	DefaultMaxSubscribers            = 10000
	DefaultMaxSubscriptionsPerSocket = 100
	DefaultMaxMessageBytes           = 16 << 10
	DefaultRecheck                   = 10 * time.Second
)

// CloseMessageBytes is the least hard bound on a WebSocket message: a
// larger one closes the socket (readLimit).
const CloseMessageBytes = 1 << 20

func (o StreamOptions) withDefaults() StreamOptions {
	if o.MaxSubscribers <= 0 {
		o.MaxSubscribers = DefaultMaxSubscribers
	}
	if o.MaxSubscriptionsPerSocket <= 0 {
		o.MaxSubscriptionsPerSocket = DefaultMaxSubscriptionsPerSocket
	}
	if o.QueueSize <= 0 {
		o.QueueSize = cache.DefaultQueueSize
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 30 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	o.Coalesce = min(max(o.Coalesce, 0), MaxCoalesce)
	if o.MaxLifetime <= 0 {
		o.MaxLifetime = DefaultMaxLifetime
	}
	if o.Recheck <= 0 {
		o.Recheck = DefaultRecheck
	}
	return o
}

// readLimit is the hard bound on a WebSocket message, enforced by gorilla
// by closing the socket; below it, oversized messages get an ERROR.
func (o StreamOptions) readLimit() int64 { return max(CloseMessageBytes, o.MaxMessageBytes) }

// streamHub is the server's bookkeeping of its streams: how many
// subscriptions exist, and the context that ends them all on shutdown.
type streamHub struct {
	opts        StreamOptions
	ctx         context.Context
	cancel      context.CancelFunc
	subscribers atomic.Int64

	mu       sync.Mutex
	stopping bool
	conns    sync.WaitGroup // WebSocket connections: http.Server.Shutdown does not wait for hijacked ones
}

// pacer spaces one stream's writes at least Coalesce apart, so that the
// events arriving in between share a write. It costs a timer only where
// one saves wake-ups: a stream whose events come further apart than that
// writes each as it comes and never sleeps; one whose events come closer
// together sleeps right after each write, so that the next events wait
// for it rather than each waking it.
type pacer struct {
	every time.Duration
	last  time.Time // when the last write ended
	busy  bool      // events are coming closer together than every
	now   func() time.Time
	sleep func(time.Duration)
}

func newPacer(every time.Duration) pacer {
	return pacer{every: every, now: time.Now, sleep: time.Sleep}
}

// hold is called when the stream wakes to write: if its last write was
// less than the interval ago, it waits out the rest, and the stream is
// busy from then on.
func (p *pacer) hold() {
	if p.every <= 0 || p.last.IsZero() {
		return
	}
	if d := p.every - p.now().Sub(p.last); d > 0 {
		p.busy = true
		p.sleep(d)
	}
}

// wrote is called after a write. A busy stream sleeps the interval there
// and then, and stays busy only if its wake-up channel was signalled
// meanwhile.
func (p *pacer) wrote(wake <-chan struct{}) {
	if p.every <= 0 {
		return
	}
	p.last = p.now()
	if p.busy {
		p.sleep(p.every)
		p.busy = len(wake) > 0
	}
}

func newStreamHub(o StreamOptions) *streamHub {
	ctx, cancel := context.WithCancel(context.Background())
	return &streamHub{opts: o.withDefaults(), ctx: ctx, cancel: cancel}
}

// subscribe opens a subscription within the server's bound on them. Every
// subscription it returns must end with unsubscribe, which frees its slot.
//
// A resume from a position this server has not reached yet waits for it,
// up to freshWait, as the /k8s watch and the API server's watch cache do.
// Positions are the API server's resourceVersions, so such a position is
// one another replica sent a moment before this one received the same
// event: once this server has handed it to its broker too, the stream
// resumes with no gap and no repeat. A position still ahead after the wait
// gets RESYNC_REQUIRED.
func (h *streamHub) subscribe(r Reader, resource string, q cache.WatchQuery, notify chan<- struct{}) (cache.Subscription, error) {
	return h.admit(func() (cache.Subscription, error) {
		if from, err := strconv.ParseUint(q.ResourceVersion, 10, 64); err == nil && from > 0 {
			// Not Position first: it would move the position to what the
			// informers took in, before the event at from is handed on.
			ctx, cancel := context.WithTimeout(h.ctx, freshWait)
			_, _, _ = r.WaitPosition(ctx, resource, from) // not reached: Watch answers RESYNC_REQUIRED
			cancel()
		}
		return r.Watch(resource, q, notify)
	})
}

// admit opens a subscription with open (a resource's, or the address
// stream's) within the bound; see subscribe.
func (h *streamHub) admit(open func() (cache.Subscription, error)) (cache.Subscription, error) {
	if h.subscribers.Add(1) > int64(h.opts.MaxSubscribers) {
		h.subscribers.Add(-1)
		return nil, echo.NewHTTPError(http.StatusTooManyRequests,
			fmt.Sprintf("the server has its maximum of %d stream subscriptions; try again later", h.opts.MaxSubscribers))
	}
	sub, err := open()
	if err != nil {
		h.subscribers.Add(-1)
		return nil, err
	}
	return sub, nil
}

func (h *streamHub) unsubscribe(sub cache.Subscription) {
	sub.Close()
	h.subscribers.Add(-1)
}

// enter registers a WebSocket connection; false once shutdown has begun.
func (h *streamHub) enter() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopping {
		return false
	}
	h.conns.Add(1)
	return true
}

func (h *streamHub) leave() { h.conns.Done() }

// stop ends every stream: WebSockets get a close frame (1001 going away),
// SSE responses end.
func (h *streamHub) stop() {
	h.mu.Lock()
	h.stopping = true
	h.mu.Unlock()
	h.cancel()
}

// wait blocks until every WebSocket connection has closed or ctx ends.
func (h *streamHub) wait(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		h.conns.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// subscribe opens one subscription for a stream handler, within the
// server's bound on subscriptions, and puts the resource's freshness in
// header (with the details when detail is set: see freshnessDetail).
// notify is the subscription's wake-up. Every subscription it returns must
// end with unsubscribe.
func (s *Server) subscribe(resource string, q cache.WatchQuery, header http.Header, detail bool) (cache.Subscription, chan struct{}, error) {
	notify := make(chan struct{}, 1)
	sub, err := s.streams.subscribe(s.r, resource, q, notify)
	if err != nil {
		return nil, nil, err
	}
	if st, err := s.r.ResourceStatus(resource); err == nil {
		s.setFreshnessHeader(header, st.Freshness, detail)
	}
	return sub, notify, nil
}

// unsubscribe ends a subscription of subscribe.
func (s *Server) unsubscribe(sub cache.Subscription) { s.streams.unsubscribe(sub) }

// watchParams are the query parameters of a per-resource watch.
var watchParams = []string{"watch", "namespace", "labelSelector", "index", "value", "resourceVersion", "snapshot", "diff"}

// watch serves GET /api/v1/{resource}?watch=true: one subscription, as a
// WebSocket when the request is an upgrade, else as Server-Sent Events
// when the client accepts text/event-stream.
func (s *Server) watch(c echo.Context) error {
	q, err := queryParams(c, watchParams...)
	if err != nil {
		return err
	}
	resource, err := pathParam(c, "resource")
	if err != nil {
		return err
	}
	if w := q.Get("watch"); w != "true" && w != "1" {
		return fmt.Errorf("%w: watch=%q: use watch=true for a stream, or leave watch out for a list", errBadRequest, text.Truncate(w, 16))
	}
	wq, err := watchQuery(q.Get("namespace"), q.Get("labelSelector"), q.Get("index"), q.Get("value"),
		q.Get("resourceVersion"), q.Get("snapshot"), q.Get("diff"))
	if err != nil {
		return err
	}
	wq.QueueSize = s.streams.opts.QueueSize
	if err := s.accessFor(c).restrictWatch(resource, &wq); err != nil {
		return err
	}
	req := c.Request()
	switch {
	case websocket.IsWebSocketUpgrade(req):
		return s.watchWebSocket(c, resource, &wq)
	case acceptsEventStream(req):
		// An EventSource reconnecting sends the last id it saw: resume there.
		if id := req.Header.Get("Last-Event-ID"); id != "" {
			wq.ResourceVersion, wq.Snapshot = id, false
		}
		return s.watchSSE(c, resource, wq)
	}
	return fmt.Errorf("%w: watch=true is a stream: open it as a WebSocket (an Upgrade: websocket request), "+
		"or as Server-Sent Events with the header Accept: text/event-stream "+
		"(curl -N -H 'Accept: text/event-stream' '%s')", errBadRequest, req.URL.RequestURI())
}

// watchQuery builds a subscription's query from the parameters a URL or a
// subscribe message gives as strings. snapshot defaults to true unless the
// stream resumes from a resourceVersion.
func watchQuery(namespace, labelSelector, index, value, resourceVersion, snapshot, diff string) (cache.WatchQuery, error) {
	q := cache.WatchQuery{Namespace: namespace, LabelSelector: labelSelector, Index: index, Value: value,
		ResourceVersion: resourceVersion, Snapshot: resourceVersion == "", Diff: cache.Diff(diff)}
	if snapshot != "" {
		b, err := strconv.ParseBool(snapshot)
		if err != nil {
			return q, fmt.Errorf("%w: snapshot must be true or false, got %q", errBadRequest, text.Truncate(snapshot, 16))
		}
		q.Snapshot = b
	}
	return q, q.Diff.Validate()
}

func acceptsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
				return true
			}
		}
	}
	return false
}

// checkOrigin allows a WebSocket, or a request a page of another site
// could send without asking (a "simple" cross-site POST: text/plain or a
// form), from the server's own host, from the configured origins, and from
// clients that are not browsers (no Origin).
func (s *Server) checkOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	if u, err := url.Parse(origin); err == nil && strings.EqualFold(u.Host, r.Host) {
		return nil
	}
	for _, allowed := range s.streams.opts.AllowedOrigins {
		if allowed == "*" || strings.EqualFold(strings.TrimSuffix(allowed, "/"), origin) {
			return nil
		}
	}
	return echo.NewHTTPError(http.StatusForbidden,
		fmt.Sprintf("a request from origin %q refused: only pages served by %s and the configured allowed origins may open streams or post", text.Truncate(origin, 128), text.Truncate(r.Host, 128)))
}
