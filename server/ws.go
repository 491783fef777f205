package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/cache"
)

// errHijacked: the upgrade failed after the connection was taken over, so
// there is no response left to write an error to.
var errHijacked = errors.New("connection hijacked")

// closeGrace bounds the close handshake and the last write at shutdown.
const closeGrace = time.Second

// wsWriteBuffers is shared by every WebSocket's writes.
var wsWriteBuffers = &sync.Pool{}

// upgrade checks the origin and switches to the WebSocket protocol. Before
// the switch, failures are returned for the one error translation; after
// it, the echo context must no longer be used.
func (s *Server) upgrade(c echo.Context, header http.Header) (*websocket.Conn, error) {
	if err := s.checkOrigin(c.Request()); err != nil {
		return nil, err
	}
	var refused error
	up := websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		WriteBufferSize:  16 << 10,
		// Idle sockets (most of them, most of the time) hold no write
		// buffer: it is taken from the pool for each message.
		WriteBufferPool: wsWriteBuffers,
		CheckOrigin:     func(*http.Request) bool { return true }, // checked above, with a better message
		Subprotocols:    []string{WebSocketProtocol},              // selected when offered (browsers sending a token must)
		Error: func(_ http.ResponseWriter, _ *http.Request, status int, reason error) {
			refused = echo.NewHTTPError(status, reason.Error())
		},
	}
	conn, err := up.Upgrade(c.Response(), c.Request(), header)
	if err != nil {
		if refused != nil {
			return nil, refused
		}
		return nil, errHijacked
	}
	return conn, nil
}

// watchWebSocket serves one subscription over a WebSocket; its messages are
// not tagged. When the subscription ends (RESYNC_REQUIRED) the socket is
// closed normally.
func (s *Server) watchWebSocket(c echo.Context, resource string, q cache.WatchQuery) error {
	if err := s.streams.acquire(); err != nil {
		return err
	}
	notify := make(chan struct{}, 1)
	sub, err := s.r.Watch(resource, q, notify)
	if err != nil {
		s.streams.release()
		return err
	}
	header := http.Header{}
	if st, err := s.r.ResourceStatus(resource); err == nil {
		setFreshness(header, st.Freshness)
	}
	ws, err := s.openSocket(c, header, false, notify)
	if err != nil {
		sub.Close()
		s.streams.release()
		return ignoreHijacked(err)
	}
	ws.add("", sub)
	ws.run()
	return nil
}

// stream serves GET /api/v1/stream: one WebSocket carrying any number of
// subscriptions (up to MaxSubscriptionsPerSocket), made and ended by
// client messages, every server message tagged with the subscription id.
func (s *Server) stream(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	if !websocket.IsWebSocketUpgrade(c.Request()) {
		return fmt.Errorf("%w: /api/v1/stream is a WebSocket: open it with an Upgrade: websocket request "+
			"(for one resource over Server-Sent Events, use /api/v1/{resource}?watch=true)", errBadRequest)
	}
	ws, err := s.openSocket(c, nil, true, make(chan struct{}, 1))
	if err != nil {
		return ignoreHijacked(err)
	}
	ws.run()
	return nil
}

// ignoreHijacked drops errHijacked: after a failed upgrade that took the
// connection over, there is no response to write an error to.
func ignoreHijacked(err error) error {
	if errors.Is(err, errHijacked) {
		return nil
	}
	return err
}

// openSocket upgrades and prepares a connection; it returns an error or a
// socket that run must serve.
func (s *Server) openSocket(c echo.Context, header http.Header, mux bool, notify chan struct{}) (*wsConn, error) {
	if !s.streams.enter() {
		return nil, echo.NewHTTPError(http.StatusServiceUnavailable, "the server is shutting down")
	}
	conn, err := s.upgrade(c, header)
	if err != nil {
		s.streams.leave()
		return nil, err
	}
	return &wsConn{
		hub: s.streams, opts: s.streams.opts, r: s.r, log: s.log, conn: conn, mux: mux,
		notify: notify, cmds: make(chan clientCmd, 8), pings: make(chan string, 1),
		done: make(chan struct{}), subs: map[string]*wsSub{}, access: s.streamAccess(c),
	}, nil
}

// wsConn is one WebSocket: one reader goroutine (read), one writer (run,
// on the handler's goroutine) that owns every write, pongs and close frames
// included, and the subscriptions, which only the writer touches.
type wsConn struct {
	hub    *streamHub
	opts   StreamOptions
	r      Reader
	log    *slog.Logger
	conn   *websocket.Conn
	mux    bool
	notify chan struct{}  // a subscription has something
	cmds   chan clientCmd // reader → writer; closed when the reader stops
	pings  chan string    // peer pings the writer must answer
	done   chan struct{}  // closed when the writer stops
	subs   map[string]*wsSub
	order  []string              // subscription ids, for round-robin fairness
	peer   *websocket.CloseError // set by the reader before it closes cmds
	access *access               // the caller's, when authorizing; used by the reader
}

type wsSub struct {
	sub *cache.Subscription
	tag []byte // `{"id":"…",`
}

// clientCmd is one message from the reader: parsed, or why it is not.
type clientCmd struct {
	msg        clientMessage
	err        error
	namespaces []string // a subscribe's authorized scope (cache.WatchQuery.Namespaces)
}

func (w *wsConn) add(id string, sub *cache.Subscription) {
	tag, _ := jsonString(id)
	w.subs[id] = &wsSub{sub: sub, tag: append(append([]byte(`{"id":`), tag...), ',')}
	w.order = append(w.order, id)
}

func (w *wsConn) remove(id string) {
	if ws, ok := w.subs[id]; ok {
		ws.sub.Close()
		w.hub.release()
		delete(w.subs, id)
		w.order = slices.DeleteFunc(w.order, func(s string) bool { return s == id })
	}
}

// run serves the connection until the peer leaves, a write fails, the
// subscription of a single-resource socket ends, or the server shuts down.
func (w *wsConn) run() {
	defer w.hub.leave()
	pongWait := 2 * w.opts.PingInterval
	w.conn.SetReadLimit(w.opts.readLimit())
	w.conn.SetReadDeadline(time.Now().Add(pongWait))
	w.conn.SetPongHandler(func(string) error { return w.conn.SetReadDeadline(time.Now().Add(pongWait)) })
	w.conn.SetPingHandler(func(data string) error {
		select {
		case w.pings <- data:
		default: // a pong is already due
		}
		return nil
	})
	w.conn.SetCloseHandler(func(int, string) error { return nil }) // the writer answers
	// A write stuck on a peer that does not read must not hold up shutdown
	// for a whole WriteTimeout.
	defer context.AfterFunc(w.hub.ctx, func() { w.conn.NetConn().SetWriteDeadline(time.Now().Add(closeGrace)) })()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		w.read(pongWait)
	}()
	w.write()
	close(w.done)
	for _, id := range slices.Clone(w.order) {
		w.remove(id)
	}
	w.conn.Close()
	<-readerDone
}

// read turns client messages into commands for the writer.
func (w *wsConn) read(pongWait time.Duration) {
	defer close(w.cmds)
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("panic reading a WebSocket", "panic", p)
		}
	}()
	for {
		typ, r, err := w.conn.NextReader()
		if err != nil {
			errors.As(err, &w.peer)
			return
		}
		w.conn.SetReadDeadline(time.Now().Add(pongWait))
		cmd := w.authorize(w.readMessage(typ, r))
		select {
		case w.cmds <- cmd:
		case <-w.done:
			return
		}
	}
}

func (w *wsConn) readMessage(typ int, r io.Reader) clientCmd {
	data, err := io.ReadAll(io.LimitReader(r, w.opts.MaxMessageBytes+1))
	if err != nil {
		return clientCmd{err: fmt.Errorf("%w: reading the message: %v", errBadRequest, err)}
	}
	if int64(len(data)) > w.opts.MaxMessageBytes {
		io.Copy(io.Discard, r) // up to the read limit, without keeping it
		return clientCmd{err: fmt.Errorf("%w: message larger than %d bytes", errBadRequest, w.opts.MaxMessageBytes)}
	}
	if !w.mux {
		return clientCmd{err: fmt.Errorf("%w: this socket streams one watch and takes no messages; "+
			"subscribe by message on /api/v1/stream", errBadRequest)}
	}
	if typ != websocket.TextMessage {
		return clientCmd{err: fmt.Errorf("%w: messages are JSON text, not binary", errBadRequest)}
	}
	m, err := parseClientMessage(data)
	return clientCmd{msg: m, err: err}
}

// write is the writer loop.
func (w *wsConn) write() {
	ping := time.NewTicker(w.opts.PingInterval)
	defer ping.Stop()
	for {
		var err error
		select {
		case <-w.hub.ctx.Done():
			w.closeWith(websocket.CloseGoingAway, "server shutting down")
			return
		case cmd, ok := <-w.cmds:
			if !ok {
				code := websocket.CloseNormalClosure
				if w.peer != nil && w.peer.Code != websocket.CloseNoStatusReceived {
					code = w.peer.Code
				}
				w.closeWith(code, "")
				return
			}
			err = w.handle(cmd)
		case data := <-w.pings:
			err = w.conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(w.opts.WriteTimeout))
		case <-ping.C:
			err = w.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(w.opts.WriteTimeout))
		case <-w.notify:
			var open bool
			if open, err = w.drain(); err == nil && !open {
				return
			}
		}
		if err != nil {
			w.log.Debug("WebSocket write failed", "err", err)
			return
		}
	}
}

// drain writes what the subscriptions have, a bounded batch from each in
// turn so one busy subscription cannot starve the others or the control
// traffic; if any has more, the writer comes back after one select. open
// is false once a single-resource socket's subscription ended.
func (w *wsConn) drain() (open bool, err error) {
	const batch = 64
	more := false
	for _, id := range slices.Clone(w.order) {
		ws := w.subs[id]
		for n := 0; ; n++ {
			if n == batch || w.hub.ctx.Err() != nil {
				more = true
				break
			}
			m, ok := ws.sub.Next()
			if !ok {
				break
			}
			if err := w.send(ws, &m); err != nil {
				return false, err
			}
			if m.Terminal() {
				w.remove(id)
				if !w.mux {
					w.closeWith(websocket.CloseNormalClosure, "resync required")
					return false, nil
				}
				break
			}
		}
	}
	if more {
		select {
		case w.notify <- struct{}{}:
		default:
		}
	}
	return true, nil
}

// send writes one message; on the multiplexed socket it is tagged with
// the subscription id by splicing the tag in front of the shared bytes.
func (w *wsConn) send(ws *wsSub, m *cache.Message) error {
	w.conn.SetWriteDeadline(time.Now().Add(w.opts.WriteTimeout))
	out, err := w.conn.NextWriter(websocket.TextMessage)
	if err != nil {
		return err
	}
	if w.mux {
		if _, err := out.Write(ws.tag); err != nil {
			return err
		}
		_, err = m.WriteTo(&skipFirst{w: out})
	} else {
		_, err = m.WriteTo(out)
	}
	if err != nil {
		return err
	}
	return out.Close()
}

func (w *wsConn) sendRaw(b []byte) error {
	w.conn.SetWriteDeadline(time.Now().Add(w.opts.WriteTimeout))
	return w.conn.WriteMessage(websocket.TextMessage, b)
}

// handle executes one client message. Only a failed write is an error:
// anything wrong with the message is answered with an ERROR message.
func (w *wsConn) handle(cmd clientCmd) error {
	if cmd.err != nil {
		return w.sendRaw(errorMessage(cmd.msg.ID, cmd.err))
	}
	m := cmd.msg
	if m.Op == "unsubscribe" {
		if _, ok := w.subs[m.ID]; !ok {
			return w.sendRaw(errorMessage(m.ID, fmt.Errorf("%w: no subscription %q", errBadRequest, m.ID)))
		}
		w.remove(m.ID)
		b, _ := jsonString(m.ID)
		return w.sendRaw(fmt.Appendf(nil, `{"id":%s,"type":"UNSUBSCRIBED"}`, b))
	}
	if err := w.subscribe(m, cmd.namespaces); err != nil {
		return w.sendRaw(errorMessage(m.ID, err))
	}
	return nil
}

func (w *wsConn) subscribe(m clientMessage, namespaces []string) error {
	if _, dup := w.subs[m.ID]; dup {
		return fmt.Errorf("%w: subscription id %q is in use; unsubscribe it first", errBadRequest, m.ID)
	}
	if len(w.subs) >= w.opts.MaxSubscriptionsPerSocket {
		return echo.NewHTTPError(http.StatusTooManyRequests,
			fmt.Sprintf("this socket has its maximum of %d subscriptions", w.opts.MaxSubscriptionsPerSocket))
	}
	q, err := m.watchQuery()
	if err != nil {
		return err
	}
	q.QueueSize, q.Namespaces = w.opts.QueueSize, namespaces
	if err := w.hub.acquire(); err != nil {
		return err
	}
	sub, err := w.r.Watch(m.Resource, q, w.notify)
	if err != nil {
		w.hub.release()
		return err
	}
	w.add(m.ID, sub)
	return nil
}

// closeWith sends a close frame, best effort: the peer may be gone.
func (w *wsConn) closeWith(code int, reason string) {
	msg := websocket.FormatCloseMessage(code, reason)
	if code == websocket.CloseNoStatusReceived || code == websocket.CloseAbnormalClosure {
		msg = websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
	}
	w.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(closeGrace))
}

// skipFirst drops the first byte written: the "{" of a message whose
// opening the id tag has already written.
type skipFirst struct {
	w       io.Writer
	skipped bool
}

func (s *skipFirst) Write(p []byte) (int, error) {
	if s.skipped || len(p) == 0 {
		return s.w.Write(p)
	}
	s.skipped = true
	n, err := s.w.Write(p[1:])
	return n + 1, err
}

func jsonString(s string) ([]byte, error) { return json.Marshal(s) }
