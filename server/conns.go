package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Connection slots. Every open connection holds one of MaxConnections,
// and one of its address's MaxConnectionsPerAddress. A connection that
// has not authenticated (no request on it passed authentication yet) is
// cheap to open for anyone who can reach the port: it may hold its slot
// only briefly, UnauthenticatedTimeout, to send headers or between
// requests. Once a request on it passed authentication (any request,
// with authentication off), it keeps the usual timeouts.
//
// At MaxConnections, a new connection is not refused while another sits
// idle between requests: the idle connection of whoever holds the most
// (a connection not yet authenticated first, then by identity, the user
// or, with authentication off, the address) is closed to make room. An
// idle keep-alive closed is a normal event of HTTP (clients open another
// when they need one), so a caller who holds many idle connections, with
// any valid token, cannot starve others: idle connections last their
// IdleTimeout while there is room, and no longer than the next newcomer
// under pressure. Busy connections (a request being served, a stream)
// are never taken; streams are bounded per client apart.

// counts are the open connections and the refusals: connections beyond
// MaxConnections, beyond MaxConnectionsPerAddress, and streams.
func (l *limiter) counts() (conns int, refusedConns, refusedStreams int64) {
	conns, refusedConns, _, refusedStreams = l.allCounts()
	return conns, refusedConns, refusedStreams
}

func (l *limiter) allCounts() (conns int, refusedConns, refusedAddrConns, refusedStreams int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns, l.refusedConns, l.refusedAddrConns, l.refusedStreams
}

// reclaimed counts the idle connections closed to make room (reclaimIdle).
func (l *limiter) reclaimed() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reclaimedConns
}

// listener applies MaxConnections and MaxConnectionsPerAddress to ln.
// With tlsConfig (the server's, beneath which ln is), a refusal is
// answered over TLS, or the client would read it as a broken handshake.
func (l *limiter) listener(ln net.Listener, tlsConfig *tls.Config) net.Listener {
	ll := &limitListener{Listener: ln, l: l}
	if tlsConfig != nil {
		// HTTP/1.1 only: the refusal is an HTTP/1.1 answer.
		ll.refusalTLS = tlsConfig.Clone()
		ll.refusalTLS.NextProtos = []string{"http/1.1"}
		ll.refusalTLS.ClientAuth = tls.NoClientCert
	}
	return ll
}

type limitListener struct {
	net.Listener
	l          *limiter
	refusalTLS *tls.Config // nil: plain HTTP
}

// Accept returns the next connection within the limits; those beyond
// them are answered and closed without reaching the server, and without
// stopping the accept loop.
func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		conn, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l := ll.l
		addr := connAddress(conn)
		l.reclaimIdle(addr)
		l.mu.Lock()
		var refusal []byte
		switch {
		case l.conns >= l.opts.MaxConnections:
			l.refusedConns++
			refusal = overloaded
		case l.perAddr[addr] >= l.opts.MaxConnectionsPerAddress:
			l.refusedAddrConns++
			refusal = tooManyFromAddress
		default:
			l.conns++
			l.perAddr[addr]++
		}
		var lc *limitedConn
		if refusal == nil {
			lc = &limitedConn{Conn: conn, l: l, addr: addr}
			l.open[lc] = struct{}{}
		}
		l.mu.Unlock()
		if lc != nil {
			return lc, nil
		}
		if ll.refusalTLS != nil {
			conn = tls.Server(conn, ll.refusalTLS)
		}
		go refuseConn(conn, refusal)
	}
}

// reclaimIdle makes room at MaxConnections for a connection from addr
// (which its address's own bound would admit) by closing the idle
// connection of whoever holds the most connections.
func (l *limiter) reclaimIdle(addr string) {
	l.mu.Lock()
	var victim *limitedConn
	if l.conns >= l.opts.MaxConnections && l.perAddr[addr] < l.opts.MaxConnectionsPerAddress {
		victim = l.idlestLocked()
		if victim != nil {
			l.reclaimedConns++
		}
	}
	l.mu.Unlock()
	if victim != nil {
		victim.Close() // frees its slots before the count is read again
	}
}

// idlestLocked (under mu) is an idle connection of the owner holding the
// most connections, one not yet authenticated before any; nil when none
// is idle. It looks at every connection, only at the limit.
func (l *limiter) idlestLocked() *limitedConn {
	held := map[string]int{}
	for c := range l.open {
		held[c.ownerKey()]++
	}
	var victim *limitedConn
	most := 0
	for c := range l.open {
		if !c.idle.Load() {
			continue
		}
		if !c.authenticated.Load() {
			return c
		}
		if n := held[c.ownerKey()]; n > most {
			victim, most = c, n
		}
	}
	return victim
}

// connAddress is the IP address a connection comes from, in one spelling
// for each address (an IPv4-mapped IPv6 address is its IPv4 address).
func connAddress(conn net.Conn) string {
	if ta, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return ip.Unmap().String()
		}
	}
	host, _, err := net.SplitHostPort(conn.RemoteAddr().String())
	if err != nil {
		return conn.RemoteAddr().String()
	}
	return host
}

// refusal is the whole answer to a connection beyond a limit.
func refusal(status int, reason, msg string) []byte {
	st := errorStatus(retryLater(msg))
	st.Code, st.Reason = int32(status), metav1.StatusReason(reason)
	body, err := json.Marshal(st)
	if err != nil {
		panic(err) // a constant Status always marshals
	}
	body = append(body, '\n')
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"+
		"Retry-After: %d\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		status, http.StatusText(status), retryAfterSeconds, len(body), body)
}

var (
	overloaded = refusal(http.StatusServiceUnavailable, "ServiceUnavailable",
		"the server has its maximum of connections; try again")
	tooManyFromAddress = refusal(http.StatusTooManyRequests, "TooManyRequests",
		"this address has its maximum of open connections; close one, or reuse one (keep-alive)")
)

// refuseConn answers, then closes without a reset: the request is drained
// briefly, or the client might see a reset instead of the answer.
func refuseConn(conn net.Conn, answer []byte) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	if _, ok := conn.(*tls.Conn); ok {
		// Over TLS the client sends its request only after the handshake:
		// an answer before it would be taken for one to no request.
		if _, err := conn.Read(make([]byte, 4096)); err != nil {
			return
		}
	}
	if _, err := conn.Write(answer); err != nil {
		return
	}
	if tc, ok := conn.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite() // a TLS connection's sends close_notify
	}
	buf := make([]byte, 4096)
	for {
		if _, err := conn.Read(buf); err != nil {
			return
		}
	}
}

// limitedConn holds its slots until closed. Its read deadlines are those
// net/http sets (the read header timeout, the idle timeout, none while a
// handler runs), shortened to UnauthenticatedTimeout until the connection
// has authenticated.
type limitedConn struct {
	net.Conn
	l    *limiter
	addr string
	// authenticated: a request on the connection passed authentication,
	// or the server handed the connection over (a WebSocket, which sets
	// deadlines of its own).
	authenticated atomic.Bool
	once          sync.Once
	// certID is what its client certificate was found to be (tls.go).
	certID atomic.Pointer[certIdentity]
	// idle: no request is being served on it (net/http's StateIdle), so
	// it may be closed to make room (reclaimIdle).
	idle atomic.Bool
	// owner is who it first authenticated as (clientKey).
	owner atomic.Pointer[string]
	// unauthIdle (under wmu) closes an HTTP/2 connection left idle before
	// any request on it passed authentication (connState).
	unauthIdle *time.Timer

	// Between hold and release (one answer being written), writes are
	// kept and then sent in one write. net/http sends an answer through a
	// 4 KiB buffer, so an answer of 4 to 64 KiB would otherwise leave in
	// two or more writes; on loopback a write is the largest single cost
	// of a lookup. Only HTTP/1.x answers hold (limitRequests), whose
	// writes come from the goroutine serving the current request (through
	// TLS's records when serving TLS); the mutex covers anything else.
	wmu  sync.Mutex
	held *[]byte // what was written while holding; nil when not holding
	werr error   // a failed send of what was held: later writes fail too
	// lent is what the answer being written promised not to change until
	// it is sent (lend); kept, its write was not copied: it is sent after
	// held, by reference. lentPool and keptPool are their answerBuffers
	// when the connection owns them.
	lent, kept         []byte
	lentPool, keptPool *[]byte
	// lentPieces and keptPieces are the pieces sent in place of lent and
	// kept when those are pieceMarker's bytes (lendPieces); the
	// connection owns them, and returns them to pieceLists once sent.
	lentPieces, keptPieces *[][]byte
	plain                  bool // what is held is written as is (hold)
	// vec and bufs (under wmu) are sendHeld's vector, kept with the
	// connection so that a send allocates nothing.
	vec  [2][]byte
	bufs net.Buffers
	// lines (under wmu) are the answer's header lines that the connection
	// writes after its status line (headlines.go); lineVec is their
	// send's vector.
	lines   headLines
	lineVec [lineVecLen][]byte
}

// maxHeld bounds what a connection holds: the write that would pass it
// leaves together with what was held, and holding goes on for the rest of
// the answer.
const maxHeld = 64 << 10

var heldBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// hold starts keeping writes until release. plain says that what is
// written is the answer's own bytes (no TLS between), which lendPieces
// needs.
func (c *limitedConn) hold(plain bool) {
	c.wmu.Lock()
	if c.held == nil && c.werr == nil {
		c.held = heldBuffers.Get().(*[]byte)
		c.plain = plain
	}
	c.wmu.Unlock()
}

// holding reports whether the connection keeps what is written (hold).
func (c *limitedConn) holding() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.held != nil
}

// lend promises that b, the next thing written while holding, does not
// change until the answer is sent (a stored object, whose bytes never
// change), so that the connection may keep a reference to it rather than
// copy it; it is sent after what was held, in the same write. A write of
// other bytes is copied as usual. With pooled, b is *pooled, which the
// connection owns once it accepts the loan: it returns it to
// answerBuffers once sent (see forget). A
// connection that no longer holds (closed meanwhile) declines: the
// caller keeps b and pooled.
func (c *limitedConn) lend(b []byte, pooled *[]byte) (accepted bool) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.forget() // at most one loan
	if c.held == nil || len(b) == 0 {
		return false
	}
	c.lent, c.lentPool = b, pooled
	return true
}

// pieceMarker stands for an answer a connection sends from pieces
// (lendPieces): net/http counts its bytes against the answer's length and
// passes it to the connection, which sends the pieces in its place. Its
// own bytes are never sent: a write of any part of it that is not the
// loan it stands for fails.
var pieceMarker [envelopeFit]byte

// minPiecesLoan is the shortest answer lent as pieces: net/http passes a
// write straight to the connection, uncopied, only when it is longer than
// its buffers (2 KiB before chunking, 4 KiB to the connection), which are
// empty once the headers left (flushHeaders).
const minPiecesLoan = 4<<10 + 1

// pieceLists are the piece lists of answers lent in pieces.
var pieceLists = sync.Pool{New: func() any { p := make([][]byte, 0, 1+maxPiecesPerObject); return &p }}

// maxPiecesPerObject is the most pieces an object has (cache.Object.Pieces).
const maxPiecesPerObject = 25

func putPieceList(p *[][]byte) {
	if p != nil && cap(*p) <= 2*(1+maxPiecesPerObject) {
		clear(*p) // no reference to an object outlives its answer
		*p = (*p)[:0]
		pieceLists.Put(p)
	}
}

// lendPieces is lend for an answer of n bytes held in (*pieces)[1:] (a
// stored object's, which never change; the first place is sendHeld's):
// the connection owns pieces once it accepts, and the caller then writes
// the marker it returns, through net/http, in place of the bytes.
// It declines (nil) an answer too short to pass net/http uncopied
// (minPiecesLoan), one longer than pieceMarker, or when not holding
// plain bytes (TLS would encrypt the marker); the caller then writes the
// bytes itself.
func (c *limitedConn) lendPieces(n int, pieces *[][]byte) (marker []byte) {
	if n < minPiecesLoan || n > len(pieceMarker) {
		return nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.forget()
	if c.held == nil || !c.plain {
		return nil
	}
	c.lent, c.lentPieces = pieceMarker[:n], pieces
	return c.lent
}

// piecesSent counts the answers sent as their pieces (sendHeld), which
// tests read to know that loans are made, not only declined.
var piecesSent atomic.Uint64

// errMarkerCopied is the failure of a write of pieceMarker's bytes that
// is not the loan they stand for: sending them would answer zeros.
var errMarkerCopied = errors.New("server: an answer lent in pieces was not passed to its connection as lent")

// isMarker reports whether p lies in pieceMarker.
func isMarker(p []byte) bool {
	if len(p) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(&pieceMarker[0]))
	at := uintptr(unsafe.Pointer(&p[0]))
	return at >= start && at < start+uintptr(len(pieceMarker))
}

// forget (under wmu) ends the loan and the kept body, if any. A kept
// body's buffer goes back to its pool; a lent one never written is left
// to the collector: its writer may still be about to write it (a close
// from another goroutine ends the answer under it).
func (c *limitedConn) forget() {
	putAnswerBuffer(c.keptPool)
	putPieceList(c.keptPieces)
	c.lent, c.lentPool, c.kept, c.keptPool = nil, nil, nil, nil
	c.lentPieces, c.keptPieces = nil, nil
}

// release sends what was held, in one write, and stops holding.
func (c *limitedConn) release() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b := c.held
	if b == nil {
		return c.werr
	}
	c.held = nil
	var err error
	if len(*b) > 0 || c.kept != nil {
		_, err = c.sendHeld(*b, c.kept, c.keptPieces)
	}
	c.forget()
	*b = (*b)[:0]
	heldBuffers.Put(b)
	return err
}

func (c *limitedConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.lines.on {
		return c.spliceLines(p)
	}
	return c.writeLocked(p)
}

// sendKept (under wmu) sends what was held and the kept body, if any,
// before anything written after them.
func (c *limitedConn) sendKept() {
	if c.kept == nil || c.held == nil {
		return
	}
	c.sendHeld(*c.held, c.kept, c.keptPieces) // a failure is kept in werr
	*c.held = (*c.held)[:0]
	putAnswerBuffer(c.keptPool)
	putPieceList(c.keptPieces)
	c.kept, c.keptPool, c.keptPieces = nil, nil, nil
}

// writeLocked (under wmu) is Write.
func (c *limitedConn) writeLocked(p []byte) (int, error) {
	switch {
	case c.werr != nil:
		return 0, c.werr
	case c.lentPieces != nil && !sameBytes(p, c.lent), c.lentPieces == nil && isMarker(p):
		// A marker copied or cut, or another write before it: the
		// answer cannot be what its length says.
		c.werr = errMarkerCopied
		return 0, c.werr
	case c.held == nil:
		return c.Conn.Write(p)
	case c.kept != nil:
		// Bytes after a kept body: what was held leaves first.
		if c.sendKept(); c.werr != nil {
			return 0, c.werr
		}
	}
	switch {
	case c.lent != nil && sameBytes(p, c.lent):
		c.kept, c.keptPool, c.keptPieces = p, c.lentPool, c.lentPieces
		c.lent, c.lentPool, c.lentPieces = nil, nil, nil
		return len(p), nil
	case len(*c.held)+len(p) <= maxHeld:
		*c.held = append(*c.held, p...)
		return len(p), nil
	}
	// A long answer leaves in parts of about maxHeld, each in one write.
	n, err := c.sendHeld(*c.held, p, nil)
	*c.held = (*c.held)[:0]
	return n, err
}

// sameBytes reports whether p is b itself, not a copy.
func sameBytes(p, b []byte) bool {
	return len(p) == len(b) && len(p) > 0 && &p[0] == &b[0]
}

// sendHeld (under wmu) sends held and then p in one write (writev on a TCP
// connection) and returns how many bytes of p were sent; with pieces (p
// is then pieceMarker's), it sends held and the pieces. A failure is
// kept: every later write fails with it.
func (c *limitedConn) sendHeld(held, p []byte, pieces *[][]byte) (int, error) {
	if c.werr != nil {
		return 0, c.werr
	}
	var n int64
	var err error
	if pieces != nil {
		// The list's first place is kept for what was held (lendPieces' callers).
		(*pieces)[0] = held
		c.bufs = *pieces
		n, err = sendBuffers(c.Conn, &c.bufs)
		c.bufs = nil
		(*pieces)[0] = nil
		piecesSent.Add(1)
	} else if len(p) == 0 {
		var m int
		m, err = c.Conn.Write(held)
		n = int64(m)
	} else {
		c.vec = [2][]byte{held, p} // writev skips an empty held
		c.bufs = c.vec[:]
		n, err = sendBuffers(c.Conn, &c.bufs)
		c.vec, c.bufs = [2][]byte{}, nil // no reference outlives the send
	}
	if err != nil {
		c.werr = err
	}
	return int(min(max(n-int64(len(held)), 0), int64(len(p)))), err
}

// buffersSender is a connection that sends several buffers in one write
// of its own (tests' wrappers that count writes); a TCP connection does
// with writev through net.Buffers.
type buffersSender interface {
	SendBuffers(bufs *net.Buffers) (int64, error)
}

func sendBuffers(conn net.Conn, bufs *net.Buffers) (int64, error) {
	if s, ok := conn.(buffersSender); ok {
		return s.SendBuffers(bufs)
	}
	return bufs.WriteTo(conn)
}

func (c *limitedConn) SetReadDeadline(t time.Time) error {
	if !t.IsZero() && !c.authenticated.Load() {
		if short := time.Now().Add(c.l.opts.UnauthenticatedTimeout); t.After(short) {
			t = short
		}
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *limitedConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *limitedConn) Close() error {
	c.release() // nothing is held once an answer is done; never kept past a close
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.open, c)
		c.l.conns--
		if c.l.perAddr[c.addr]--; c.l.perAddr[c.addr] <= 0 {
			delete(c.l.perAddr, c.addr)
		}
		c.l.mu.Unlock()
	})
	return err
}

type connKey struct{}

// limitedOf finds the limitedConn under conn, a TLS connection's included.
func limitedOf(conn net.Conn) *limitedConn {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	lc, _ := conn.(*limitedConn)
	return lc
}

// connContext lets a request find its connection (http.Server.ConnContext).
func connContext(ctx context.Context, conn net.Conn) context.Context {
	if lc := limitedOf(conn); lc != nil {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// connState exempts hijacked connections from the short timeout
// (http.Server.ConnState): they are streams, which passed authentication
// and keep deadlines of their own. An HTTP/2 connection sets no read
// deadline while idle: until a request on it passes authentication, it is
// closed once idle for UnauthenticatedTimeout instead (HTTP/2 reports
// StateIdle when it starts and whenever its last request ends).
func connState(conn net.Conn, state http.ConnState) {
	lc := limitedOf(conn)
	if lc == nil {
		return
	}
	lc.idle.Store(state == http.StateIdle)
	switch state {
	case http.StateHijacked:
		lc.authenticated.Store(true)
		lc.startLines(false, nil) // the new owner writes its own headers
		lc.release()              // the new owner writes for itself; an error is its to meet
	case http.StateIdle, http.StateActive:
		tc, ok := conn.(*tls.Conn)
		if !ok || tc.ConnectionState().NegotiatedProtocol != "h2" {
			return
		}
		lc.wmu.Lock()
		defer lc.wmu.Unlock()
		if lc.unauthIdle != nil {
			lc.unauthIdle.Stop()
		}
		if state == http.StateIdle && !lc.authenticated.Load() {
			lc.unauthIdle = time.AfterFunc(lc.l.opts.UnauthenticatedTimeout, func() {
				if !lc.authenticated.Load() {
					conn.Close()
				}
			})
		}
	}
}

// connOf is the connection r came on; nil when it is not a limitedConn
// (tests' recorders).
func connOf(r *http.Request) *limitedConn {
	lc, _ := r.Context().Value(connKey{}).(*limitedConn)
	return lc
}

// connAuthenticated gives the connection of r the usual timeouts from now
// on, and records whom it serves (owner, called once per connection).
func connAuthenticated(r *http.Request, owner func() string) {
	if lc := connOf(r); lc != nil && !lc.authenticated.Load() {
		o := owner()
		lc.owner.Store(&o)
		lc.authenticated.Store(true)
	}
}

// ownerKey is whom the connection serves; "" before it authenticated.
func (c *limitedConn) ownerKey() string {
	if o := c.owner.Load(); o != nil {
		return *o
	}
	return ""
}
