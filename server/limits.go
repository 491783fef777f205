package server

import (
	"encoding/json"
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
	// MaxStreamsPerClient bounds the streams (WebSockets and event streams)
	// one client holds open: its user when authenticated, else its IP
	// address. Default 32.
	MaxStreamsPerClient int
	// RequestTimeout bounds a REST request, writing the response included:
	// a client that reads too slowly is cut off. Streams are exempt.
	// Default 60s.
	RequestTimeout time.Duration
}

func (o LimitOptions) withDefaults() LimitOptions {
	if o.MaxConnections <= 0 {
		o.MaxConnections = 4096
	}
	if o.MaxStreamsPerClient <= 0 {
		o.MaxStreamsPerClient = 32
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 60 * time.Second
	}
	return o
}

// limiter keeps the counts the limits apply to. Safe for concurrent use.
type limiter struct {
	opts LimitOptions

	mu      sync.Mutex
	conns   int
	streams map[string]int // client → open streams

	refusedConns, refusedStreams int64
}

func newLimiter(o LimitOptions) *limiter {
	return &limiter{opts: o, streams: map[string]int{}}
}

// guard runs the checks of this file and auth.go before the handler: it
// is a step of the one middleware (edge.go), inside panic recovery and
// the metrics, so that its refusals are counted. now is when the request
// arrived.
func (s *Server) guard(c echo.Context, rt *route, stream bool, next echo.HandlerFunc, now time.Time) error {
	s.securityHeaders(c)
	if err := s.checkHost(c); err != nil {
		return err
	}
	if err := limitBody(c, rt.maxBody); err != nil {
		return err
	}
	if err := s.authenticate(c, rt, stream); err != nil {
		return err
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
// per response: a GET answer has eight (these two, Content-Type and five
// freshness headers).
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

func (s *Server) securityHeaders(c echo.Context) {
	h := c.Response().Header()
	for _, sh := range s.headers {
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
	return next(c)
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
	host, _, err := net.SplitHostPort(c.Request().RemoteAddr)
	if err != nil {
		host = c.Request().RemoteAddr
	}
	return "ip:" + host
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

func (l *limiter) counts() (conns int, refusedConns, refusedStreams int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns, l.refusedConns, l.refusedStreams
}

// listener applies MaxConnections to ln.
func (l *limiter) listener(ln net.Listener) net.Listener { return &limitListener{Listener: ln, l: l} }

type limitListener struct {
	net.Listener
	l *limiter
}

// Accept returns the next connection within the limit; those beyond it
// are answered and closed without reaching the server, and without
// stopping the accept loop.
func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		conn, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l := ll.l
		l.mu.Lock()
		ok := l.conns < l.opts.MaxConnections
		if ok {
			l.conns++
		} else {
			l.refusedConns++
		}
		l.mu.Unlock()
		if ok {
			return &limitedConn{Conn: conn, l: l}, nil
		}
		go refuseConn(conn)
	}
}

// overloaded is the whole answer to a connection beyond the limit.
var overloaded = func() []byte {
	body, err := json.Marshal(errorStatus(retryLater("the server has its maximum of connections; try again")))
	if err != nil {
		panic(err) // a constant Status always marshals
	}
	body = append(body, '\n')
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"+
		"Retry-After: %d\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		retryAfterSeconds, len(body), body)
}()

// refuseConn answers 503, then closes without a reset: the request is
// drained briefly, or the client might see a reset instead of the answer.
func refuseConn(conn net.Conn) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write(overloaded); err != nil {
		return
	}
	if tc, ok := conn.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
	buf := make([]byte, 4096)
	for {
		if _, err := conn.Read(buf); err != nil {
			return
		}
	}
}

type limitedConn struct {
	net.Conn
	l    *limiter
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.conns--
		c.l.mu.Unlock()
	})
	return err
}
