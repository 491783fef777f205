package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// errHijacked: the upgrade failed after the connection was taken over, so
// there is no response left to write an error to.
var errHijacked = errors.New("connection hijacked")

// closeGrace bounds the close handshake and the last write at shutdown.
const closeGrace = time.Second

// watchWebSocket serves one subscription over a WebSocket; its messages are
// not tagged. When the subscription ends (RESYNC_REQUIRED) the socket is
// closed normally.
func (s *Server) watchWebSocket(c echo.Context, resource string, q *cache.WatchQuery) error {
	ws, err := s.openWatchSocket(c, resource, q)
	if err != nil {
		return ignoreHijacked(err)
	}
	ws.run()
	return nil
}

// openWatchSocket subscribes and upgrades; it returns an error or a socket
// that run must serve. (Kept apart from the handler, whose frame stays on
// the stack for the socket's life.)
func (s *Server) openWatchSocket(c echo.Context, resource string, q *cache.WatchQuery) (*wsConn, error) {
	header := http.Header{}
	sub, notify, err := s.subscribe(resource, *q, header, s.freshnessDetail(c, resource))
	if err != nil {
		return nil, err
	}
	ws, err := s.openSocket(c, header, false, notify)
	if err != nil {
		s.unsubscribe(sub)
		return nil, err
	}
	ws.add("", sub)
	return ws, nil
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
// socket that run must serve. notify becomes the writer's wake-up.
func (s *Server) openSocket(c echo.Context, header http.Header, mux bool, notify chan struct{}) (*wsConn, error) {
	if !s.streams.enter() {
		return nil, retryLater("the server is shutting down")
	}
	conn, err := s.upgrade(c, header)
	if err != nil {
		s.streams.leave()
		return nil, err
	}
	return &wsConn{
		hub: s.streams, srv: s, opts: &s.streams.opts, r: s.r, log: s.log, conn: conn, mux: mux,
		frames: frameWriter{conn: conn.NetConn(), timeout: s.streams.opts.WriteTimeout,
			delivery: deliveryTimer{obs: s.metrics.deliveryWS}},
		pace: newPacer(s.streams.opts.Coalesce), wake: notify, cmds: make(chan *clientCmd, maxCommandsPerWake), pings: make(chan string, 1),
		done: make(chan struct{}), access: s.streamAccess(c), user: userOf(c), life: s.startLife(c, 0, notify),
	}, nil
}

// wsConn is one WebSocket: one reader (read, on the handler's goroutine),
// one writer goroutine (writer) that owns every write, pongs and close
// frames included, and the subscriptions, which only the writer touches.
//
// The writer waits on one channel, wake, which everything that gives it
// work signals without blocking: the subscriptions (it is their notify),
// the reader after handing over a command or a ping, the ping timer, and
// the server's shutdown. Woken, it does all that is pending.
type wsConn struct {
	hub     *streamHub
	srv     *Server // reads a window's question (the reader's)
	opts    *StreamOptions
	r       Reader
	log     *slog.Logger
	conn    *websocket.Conn
	mux     bool
	frames  frameWriter           // the writer's messages
	pace    pacer                 // the writer's, between its writes
	wake    chan struct{}         // the writer has something to do
	cmds    chan *clientCmd       // reader → writer; closed when the reader stops
	pings   chan string           // peer pings the writer must answer
	pingDue atomic.Bool           // set by the ping timer
	done    chan struct{}         // closed when the writer has stopped
	subs    []*wsSub              // served round-robin, in this order
	peer    *websocket.CloseError // set by the reader before it closes cmds
	access  *access               // the caller's, when authorizing; used by the reader
	user    *auth.User            // the caller, for streams across clusters
	life    *streamLife           // ends the socket: token revoked, lifetime over
}

type wsSub struct {
	id    string
	sub   cache.Subscription
	fleet *fleetStream // instead of sub, a stream across clusters
	tag   []byte       // `{"id":"…",` on the multiplexed socket
	pos   position     // where the client would resume
}

// clientCmd is one message from the reader: parsed, or why it is not.
type clientCmd struct {
	msg        clientMessage
	err        error
	namespaces []string                 // a subscribe's authorized scope (cache.WatchQuery.Namespaces)
	addresses  *cache.AddressWatchQuery // an address stream's subscribe, authorized
	window     *cache.WindowQuery       // a window op's question, read and authorized
	fleet      *fleetStream             // a subscribe across clusters, opened
}

func (w *wsConn) add(id string, sub cache.Subscription) {
	ws := &wsSub{id: id, sub: sub}
	if w.mux {
		ws.tag = append(jsonscan.AppendString([]byte(`{"id":`), id), ',')
	}
	w.subs = append(w.subs, ws)
}

// find returns the index of subscription id, or -1.
func (w *wsConn) find(id string) int {
	return slices.IndexFunc(w.subs, func(ws *wsSub) bool { return ws.id == id })
}

func (w *wsConn) removeAt(i int) {
	if fs := w.subs[i].fleet; fs != nil {
		fs.close()
	} else {
		w.hub.unsubscribe(w.subs[i].sub)
	}
	w.subs = slices.Delete(w.subs, i, i+1)
}

// signal wakes the writer up, without blocking.
func signal(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// run serves the connection until the peer leaves, a write fails, the
// subscription of a single-resource socket ends, or the server shuts down.
//
// What an idle socket costs is mostly goroutine stacks. The handler's is
// deep (net/http, echo, the middleware) and stays so while the socket
// lives, so the reader, which needs little, runs there; the writer gets
// its own goroutine, whose stack shrinks back while the socket is idle,
// since it waits in a shallow frame.
func (w *wsConn) run() {
	defer w.hub.leave()
	pongWait := 2 * w.opts.PingInterval
	w.conn.SetReadLimit(w.opts.readLimit())
	w.conn.SetReadDeadline(time.Now().Add(pongWait))
	w.conn.SetPongHandler(func(string) error { return w.conn.SetReadDeadline(time.Now().Add(pongWait)) })
	w.conn.SetPingHandler(func(data string) error {
		select {
		case w.pings <- data:
			signal(w.wake)
		default: // a pong is already due
		}
		return nil
	})
	w.conn.SetCloseHandler(func(int, string) error { return nil }) // the writer answers
	// At shutdown the writer must wake up, and a write stuck on a peer that
	// does not read must not hold it up for a whole WriteTimeout.
	defer context.AfterFunc(w.hub.ctx, func() {
		w.conn.NetConn().SetWriteDeadline(time.Now().Add(closeGrace))
		signal(w.wake)
	})()
	go w.writer()
	w.read(pongWait)
	<-w.done
	// A stream across clusters the reader opened and the writer never
	// took: its parts are subscriptions to end.
	for cmd := range w.cmds {
		if cmd.fleet != nil {
			cmd.fleet.close()
		}
	}
}

// read turns client messages into commands for the writer.
func (w *wsConn) read(pongWait time.Duration) {
	defer signal(w.wake)
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
		if !w.received(typ, r, pongWait) {
			return
		}
	}
}

// received hands one client message to the writer; false once the writer
// has stopped.
func (w *wsConn) received(typ int, r io.Reader, pongWait time.Duration) bool {
	w.conn.SetReadDeadline(time.Now().Add(pongWait))
	cmd := w.authorize(w.readMessage(typ, r))
	select {
	case w.cmds <- &cmd:
		signal(w.wake)
		return true
	case <-w.done:
		if cmd.fleet != nil {
			cmd.fleet.close()
		}
		return false
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
