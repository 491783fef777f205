package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
	"github.com/kubeindex/kubeindex/internal/text"
)

const (
	// maxCommandsPerWake bounds the client messages the writer handles
	// before it serves the subscriptions again; it is also how many the
	// reader may hand over ahead.
	maxCommandsPerWake = 8
	// maxMessagesPerWake bounds what the writer takes from one
	// subscription before it serves the next one, or the client's messages.
	maxMessagesPerWake = 64
)

// writer is the writer goroutine. It waits for a wake-up in this shallow
// frame, so that an idle socket's writer has a small stack; then ends the
// socket, which ends the reader.
func (w *wsConn) writer() {
	ping := time.AfterFunc(w.opts.PingInterval, func() {
		w.pingDue.Store(true)
		signal(w.wake)
	})
	for range w.wake {
		w.pace.hold()
		writes := w.frames.writes
		if !w.serve(ping) {
			break
		}
		if w.frames.writes != writes {
			w.pace.wrote(w.wake)
		}
	}
	ping.Stop()
	w.life.stop()
	for len(w.subs) > 0 {
		w.removeAt(len(w.subs) - 1)
	}
	w.frames.flush() // gives the batch buffer back, if a failed write left it
	w.conn.Close()
	close(w.done)
}

// serve does what is pending; false when the socket is done.
func (w *wsConn) serve(ping *time.Timer) (open bool) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("panic writing a WebSocket", "panic", p)
			open = false
		}
	}()
	open, err := w.act(ping)
	if err != nil {
		w.log.Debug("WebSocket write failed", "err", err)
		return false
	}
	return open
}

// act answers, in this order, the server's shutdown, the client's leaving
// or messages, its ping, the ping timer, and then the subscriptions.
func (w *wsConn) act(ping *time.Timer) (open bool, err error) {
	if w.hub.ctx.Err() != nil {
		w.closeWith(websocket.CloseGoingAway, "server shutting down")
		return false, nil
	}
	for range maxCommandsPerWake {
		select {
		case cmd, ok := <-w.cmds:
			if !ok {
				w.closeWith(w.peerCode(), "")
				return false, nil
			}
			if err := w.handle(cmd); err != nil {
				return false, err
			}
			continue
		default:
		}
		break
	}
	if len(w.cmds) > 0 {
		signal(w.wake) // come back for them after the subscriptions
	}
	if why := w.life.over(); why != nil {
		return false, w.endLife(why)
	}
	select {
	case data := <-w.pings:
		if err := w.conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(w.opts.WriteTimeout)); err != nil {
			return false, err
		}
	default:
	}
	if w.pingDue.CompareAndSwap(true, false) {
		if err := w.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(w.opts.WriteTimeout)); err != nil {
			return false, err
		}
		ping.Reset(w.opts.PingInterval)
	}
	return w.drain()
}

// peerCode is the close code to answer the peer's close with.
func (w *wsConn) peerCode() int {
	if w.peer != nil && w.peer.Code != websocket.CloseNoStatusReceived {
		return w.peer.Code
	}
	return websocket.CloseNormalClosure
}

// drain writes what the subscriptions have, a bounded batch from each in
// turn so one busy subscription cannot starve the others or the control
// traffic; if any has more, the writer comes back after the next wake-up.
// What one drain sends goes out in as few writes as the batch size allows,
// so a socket that lags catches up with fewer, larger writes. open is
// false once a single-resource socket's subscription ended.
func (w *wsConn) drain() (open bool, err error) {
	more := false
	for i := 0; i < len(w.subs); i++ {
		full, ended, err := w.drainOne(w.subs[i])
		if err != nil {
			return false, err
		}
		more = more || full
		if ended {
			w.removeAt(i)
			i--
			if !w.mux {
				if err := w.frames.flush(); err != nil {
					return false, err
				}
				w.closeWith(websocket.CloseNormalClosure, "resync required")
				return false, nil
			}
		}
	}
	if err := w.frames.flush(); err != nil {
		return false, err
	}
	if more {
		signal(w.wake)
	}
	return true, nil
}

// drainOne batches up to maxMessagesPerWake of ws's messages. full: it may
// have more; ended: its last message was the terminal RESYNC_REQUIRED.
func (w *wsConn) drainOne(ws *wsSub) (full, ended bool, err error) {
	if ws.fleet != nil {
		full, err = w.drainFleet(ws.fleet)
		return full, false, err
	}
	for range maxMessagesPerWake {
		if w.hub.ctx.Err() != nil {
			return true, false, nil
		}
		m, ok := ws.sub.Next()
		if !ok {
			return false, false, nil
		}
		if err := w.frames.add(&m, ws.tag); err != nil {
			return false, false, err
		}
		ws.pos.follow(&m)
		if m.Terminal() {
			return false, true, nil
		}
	}
	return true, false, nil
}

// sendRaw writes one message at once.
func (w *wsConn) sendRaw(b []byte) error {
	if err := w.frames.addRaw(b); err != nil {
		return err
	}
	return w.frames.flush()
}

// handle executes one client message. Only a failed write is an error:
// anything wrong with the message is answered with an ERROR message.
func (w *wsConn) handle(cmd *clientCmd) error {
	if cmd.err != nil {
		if errors.Is(cmd.err, errTokenRevoked) {
			w.life.end(cmd.err) // once the refusal is sent
		}
		return w.sendRaw(errorMessage(cmd.msg.ID, cmd.err))
	}
	m := cmd.msg
	if m.Op == "unsubscribe" {
		i := w.find(m.ID)
		if i < 0 {
			return w.sendRaw(errorMessage(m.ID, fmt.Errorf("%w: no subscription %q", errBadRequest, text.Truncate(m.ID, 64))))
		}
		w.removeAt(i)
		return w.sendRaw(fmt.Appendf(jsonscan.AppendString([]byte(`{"id":`), m.ID), `,"type":"%s"}`, cache.Unsubscribed))
	}
	if cmd.addresses != nil {
		return w.subscribeAddresses(m.ID, *cmd.addresses)
	}
	if cmd.fleet != nil {
		return w.subscribeFleet(m.ID, cmd.fleet)
	}
	switch {
	case cmd.window != nil:
		return w.openWindow(m.ID, m.Resource, *cmd.window)
	case m.Op == "scroll":
		return w.scrollWindow(m)
	}
	if err := w.subscribe(m, cmd.namespaces); err != nil {
		return w.sendRaw(errorMessage(m.ID, err))
	}
	return nil
}

func (w *wsConn) subscribe(m clientMessage, namespaces []string) error {
	if err := w.checkNewSubscription(m.ID); err != nil {
		return err
	}
	q, err := m.watchQuery()
	if err != nil {
		return err
	}
	q.QueueSize, q.Namespaces = w.opts.QueueSize, namespaces
	sub, err := w.hub.subscribe(w.r, m.Resource, q, w.wake)
	if err != nil {
		return err
	}
	w.add(m.ID, sub)
	return nil
}

// endLife closes the socket before its client leaves. At the end of its
// lifetime each subscription that has a position is sent it, as a
// BOOKMARK after everything written so far, so that the client resumes
// from there without loss; a token no longer valid closes it with 1008
// (policy violation) and the reason.
func (w *wsConn) endLife(why error) error {
	if !errors.Is(why, errLifetimeOver) {
		code := websocket.ClosePolicyViolation
		if errorStatus(why).Code != http.StatusUnauthorized {
			code = websocket.CloseTryAgainLater
		}
		w.closeWith(code, errorStatus(why).Message)
		return nil
	}
	for _, ws := range w.subs {
		if ws.fleet != nil {
			if b, ok := ws.fleet.bookmark(); ok {
				if err := w.frames.addRaw(b); err != nil {
					return err
				}
			}
			continue
		}
		if m, ok := ws.pos.bookmark(); ok {
			if err := w.frames.add(&m, ws.tag); err != nil {
				return err
			}
		}
	}
	if err := w.frames.flush(); err != nil {
		return err
	}
	w.closeWith(websocket.CloseGoingAway, "stream lifetime over: resume from the last resourceVersion")
	return nil
}

// checkNewSubscription refuses an id in use, or one subscription too many.
func (w *wsConn) checkNewSubscription(id string) error {
	if w.find(id) >= 0 {
		return fmt.Errorf("%w: subscription id %q is in use; unsubscribe it first", errBadRequest, text.Truncate(id, 64))
	}
	if len(w.subs) >= w.opts.MaxSubscriptionsPerSocket {
		return echo.NewHTTPError(http.StatusTooManyRequests,
			fmt.Sprintf("this socket has its maximum of %d subscriptions", w.opts.MaxSubscriptionsPerSocket))
	}
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
