package server

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// LimitOptions bounds what clients may hold. Zero values take the
// documented defaults. Request headers are bounded by MaxHeaderBytes,
// WebSocket messages and subscriptions by StreamOptions.
type LimitOptions struct {
	// MaxConnections bounds open TCP connections, streams included. The
	// connection beyond it is answered 503 and closed at once. Default 4096.
	MaxConnections int
	// MaxConnectionsPerAddress bounds the connections of one client IP
	// address, so that one address cannot take every slot: the connection
	// beyond it is answered 429 and closed at once. Everyone behind one
	// NAT, proxy or ingress shares an address, and so this bound. Default
	// DefaultMaxConnectionsPerAddress(MaxConnections).
	MaxConnectionsPerAddress int
	// UnauthenticatedTimeout bounds how long a connection on which no
	// request has yet passed authentication may take to send a request's
	// headers, and may stay idle between requests. A connection that
	// has authenticated keeps IdleTimeout, and ReadHeaderTimeout. Default
	// DefaultUnauthenticatedTimeout.
	UnauthenticatedTimeout time.Duration
	// IdleTimeout is how long an authenticated keep-alive connection may
	// stay idle between requests. Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxStreamsPerClient bounds the streams (WebSockets and event streams)
	// one client holds open: its user when authenticated, else its IP
	// address. Default DefaultMaxStreamsPerClient.
	MaxStreamsPerClient int
	// RequestTimeout bounds a REST request, writing the response included:
	// a client that reads too slowly is cut off. Streams are exempt.
	// Default DefaultRequestTimeout.
	RequestTimeout time.Duration
}

// LimitOptions' defaults. The command's flags default to them, and the
// configuration reference is generated from those flags.
const (
	DefaultMaxConnections         = 4096
	DefaultUnauthenticatedTimeout = 5 * time.Second
	DefaultIdleTimeout            = 120 * time.Second
	DefaultMaxStreamsPerClient    = 32
	DefaultRequestTimeout         = 60 * time.Second
)

// ReadHeaderTimeout bounds how long an authenticated connection may take
// to send a request's headers (an unauthenticated one has
// UnauthenticatedTimeout).
const ReadHeaderTimeout = 10 * time.Second

// DefaultMaxConnectionsPerAddress is MaxConnectionsPerAddress's default: a
// quarter of maxConnections, at least one, so that one address cannot
// take every slot.
func DefaultMaxConnectionsPerAddress(maxConnections int) int { return max(1, maxConnections/4) }

func (o LimitOptions) withDefaults() LimitOptions {
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.MaxConnectionsPerAddress <= 0 {
		o.MaxConnectionsPerAddress = DefaultMaxConnectionsPerAddress(o.MaxConnections)
	}
	if o.UnauthenticatedTimeout <= 0 {
		o.UnauthenticatedTimeout = DefaultUnauthenticatedTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxStreamsPerClient <= 0 {
		o.MaxStreamsPerClient = DefaultMaxStreamsPerClient
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	return o
}

// limiter keeps the counts the limits apply to. Safe for concurrent use.
type limiter struct {
	opts LimitOptions

	mu      sync.Mutex
	conns   int
	perAddr map[string]int // client IP address → open connections
	streams map[string]int // client → open streams
	open    map[*limitedConn]struct{}

	refusedConns, refusedAddrConns, refusedStreams, reclaimedConns int64
}

func newLimiter(o LimitOptions) *limiter {
	return &limiter{opts: o, perAddr: map[string]int{}, streams: map[string]int{}, open: map[*limitedConn]struct{}{}}
}

// guard runs the checks of this file and auth.go before the handler: it
// is a step of the one middleware (edge.go), inside panic recovery and
// the metrics, so that its refusals are counted. now is when the request
// arrived.
func (s *Server) guard(c echo.Context, rt *route, stream bool, next echo.HandlerFunc, now time.Time) error {
	s.securityHeaders(c, s.startAnswerLines(c, stream))
	if err := s.checkHost(c); err != nil {
		return err
	}
	if err := limitBody(c, rt.maxBody); err != nil {
		return err
	}
	if err := s.authenticate(c, rt, stream); err != nil {
		return err
	}
	if userOf(c) != nil || !s.authenticating() {
		connAuthenticated(c.Request(), func() string { return clientKey(c) })
	}
	return s.limitRequests(c, stream, next, now)
}

// header is one response header, its key canonical and its values shared.
type header struct {
	key    string
	values []string
}

// newSecurityHeaders prepares the headers of every response. The API
// answers JSON, text and event streams, never a document: nosniff keeps a
// browser from reading one as HTML, and Cross-Origin-Resource-Policy keeps
// other sites from loading one into their pages. A Content-Security-Policy
// governs documents only; the dashboard, the one HTML the server has, sets
// its own (web.go). With authentication on, answers are private: no cache
// may keep them.
//
// Each header costs every answer something on both ends, and past eight
// entries net/http's header map grows into a larger table it then clones
// per response: a GET answer has nine (these two, Content-Type,
// Content-Length and five freshness headers). On a plain HTTP/1.x answer
// the connection writes these and the freshness as lines instead
// (headlines.go).
func newSecurityHeaders(private bool) []header {
	headers := []header{
		{"X-Content-Type-Options", []string{"nosniff"}},
		{"Cross-Origin-Resource-Policy", []string{"same-origin"}},
	}
	if private {
		headers = append(headers, header{"Cache-Control", []string{"no-store"}})
	}
	for i, h := range headers {
		headers[i].key = http.CanonicalHeaderKey(h.key)
		headers[i].values = slices.Clip(h.values) // an Add appends to a copy, never to the shared array
	}
	return headers
}

// securityHeaders puts the security headers in c's header map; with
// lines, only those not among the lines its connection writes
// (headlines.go).
func (s *Server) securityHeaders(c echo.Context, lines bool) {
	headers := s.headers
	if lines {
		headers = s.headersBesideLines
	}
	if len(headers) == 0 {
		return
	}
	h := c.Response().Header()
	for _, sh := range headers {
		h[sh.key] = sh.values
	}
}

// limitBody bounds the request body to what the route reads. Most routes
// read none: a body is then a mistake or an attack, and is never read.
func limitBody(c echo.Context, maxBody int64) error {
	req := c.Request()
	if maxBody > 0 {
		if req.ContentLength > maxBody {
			c.Response().Header().Set("Connection", "close") // the unread body must not be taken for the next request
			return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is limited to %d bytes", maxBody))
		}
		req.Body = http.MaxBytesReader(c.Response(), req.Body, maxBody)
		return nil
	}
	if req.ContentLength != 0 {
		c.Response().Header().Set("Connection", "close")
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge, "this API takes no request body")
	}
	return nil
}

// limitRequests bounds REST requests in time (from now, their arrival)
// and streams in number per client.
func (s *Server) limitRequests(c echo.Context, stream bool, next echo.HandlerFunc, now time.Time) error {
	if stream {
		client := clientKey(c)
		if !s.limits.openStream(client) {
			return echo.NewHTTPError(http.StatusTooManyRequests, fmt.Sprintf(
				"this client has its maximum of %d open streams; close one, or multiplex subscriptions on /api/v1/stream",
				s.limits.opts.MaxStreamsPerClient))
		}
		defer s.limits.closeStream(client)
		return next(c)
	}
	// A write deadline, not a context: the handlers answer from memory and
	// do not wait; what takes long is a client that reads slowly. (Reviews
	// have a timeout of their own.)
	if dl := writeDeadliner(c); dl != nil {
		if dl.SetWriteDeadline(now.Add(s.limits.opts.RequestTimeout)) == nil {
			// The connection may serve a stream next: no deadline left behind.
			defer dl.SetWriteDeadline(time.Time{})
		}
	}
	if lc := connOf(c.Request()); lc != nil && c.Request().ProtoMajor == 1 {
		lc.hold(c.Request().TLS == nil)
		defer sendAnswer(c, lc) // before the deadline is lifted
	}
	return next(c)
}

// sendAnswer sends what the connection held of an answer. An answer of
// known length is flushed out of net/http's buffer first, so that all of
// it leaves in one write (flushing one of unknown length would make it
// chunked; it is small, or chunked already). A failed send is left to
// net/http, whose next write on the connection fails and closes it.
func sendAnswer(c echo.Context, lc *limitedConn) {
	res := c.Response()
	if res.Committed && res.Header()["Content-Length"] != nil {
		if f, ok := res.Writer.(http.Flusher); ok {
			f.Flush()
		}
	}
	lc.release()
}

type deadliner interface{ SetWriteDeadline(time.Time) error }

// writeDeadliner finds the connection's write deadline: on net/http's own
// ResponseWriter directly (no allocation), else through a
// ResponseController; nil when there is none (tests' recorders).
func writeDeadliner(c echo.Context) deadliner {
	if d, ok := c.Response().Writer.(deadliner); ok {
		return d
	}
	if _, ok := c.Response().Writer.(interface{ Unwrap() http.ResponseWriter }); ok {
		return http.NewResponseController(c.Response().Writer)
	}
	return nil
}

// clientKey identifies a client for per-client limits: its user when
// authenticated (callers behind one proxy are told apart), else the address
// the connection comes from (never a header a client can forge).
func clientKey(c echo.Context) string {
	if u := userOf(c); u != nil {
		return "user:" + u.Name
	}
	return "ip:" + remoteHost(c.Request())
}

// remoteHost is the address the connection comes from, without the port.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (l *limiter) openStream(client string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streams[client] >= l.opts.MaxStreamsPerClient {
		l.refusedStreams++
		return false
	}
	l.streams[client]++
	return true
}

func (l *limiter) closeStream(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streams[client]--; l.streams[client] <= 0 {
		delete(l.streams, client)
	}
}
