package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/cache"
)

// watchSSE streams one subscription as Server-Sent Events. Each message is
// an event whose "event:" is the message type and whose "data:" is the
// message JSON; "id:" is the resourceVersion to resume from, so a browser
// EventSource resumes by itself (Last-Event-ID). Snapshot items carry no
// id: a stream cannot resume from inside its snapshot. RESYNC_REQUIRED
// clears the id, so the EventSource's automatic reconnect starts afresh
// with a snapshot.
//
// Errors are returned only before the status line is written; after that,
// the stream just ends.
func (s *Server) watchSSE(c echo.Context, resource string, q cache.WatchQuery) error {
	w := c.Response()
	sub, notify, err := s.subscribe(resource, q, w.Header())
	if err != nil {
		return err
	}
	defer s.unsubscribe(sub)
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // proxies must not hold events back
	w.WriteHeader(http.StatusOK)
	out := &sseWriter{conn: sseConn{rc: http.NewResponseController(w), w: w, timeout: s.streams.opts.WriteTimeout},
		delivery: deliveryTimer{obs: s.metrics.deliverySSE}}
	defer out.conn.rc.SetWriteDeadline(time.Time{}) // the connection may serve another request
	if err := s.pumpSSE(c.Request().Context(), sub, notify, out); err != nil {
		s.log.Debug("event stream ended", "resource", resource, "err", err)
	}
	return nil
}

// pumpSSE writes the subscription's messages until it ends, the client
// goes away or the server shuts down.
func (s *Server) pumpSSE(ctx context.Context, sub *cache.Subscription, notify <-chan struct{}, out *sseWriter) error {
	pace := newPacer(s.streams.opts.Coalesce)
	for {
		pace.hold()
		wrote := false
		for n := 1; ; n++ {
			m, ok := sub.Next()
			if !ok {
				break
			}
			wrote = true
			if err := out.write(&m); err != nil {
				out.release()
				return err
			}
			if m.Terminal() {
				return out.flush()
			}
			if n%256 == 0 && (ctx.Err() != nil || s.streams.ctx.Err() != nil) {
				out.release()
				return nil
			}
		}
		if err := out.flush(); err != nil {
			return err
		}
		if wrote {
			pace.wrote(notify)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.streams.ctx.Done():
			return nil
		case <-notify:
		}
	}
}

// sseBuffers batch the writes of event streams. A stream takes one only
// while it has messages to write, so idle streams hold none.
var sseBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}

// sseWriter writes messages in batches: through a buffer from sseBuffers
// until flush gives it back.
type sseWriter struct {
	conn     sseConn
	bw       *bufio.Writer // nil between batches
	delivery deliveryTimer // the batch's live events
}

// sseConn is the response, each write bounded by the write timeout.
type sseConn struct {
	rc      *http.ResponseController
	w       io.Writer
	timeout time.Duration
}

func (c *sseConn) Write(p []byte) (int, error) {
	if err := c.rc.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return 0, err
	}
	return c.w.Write(p)
}

func (w *sseWriter) write(m *cache.Message) error {
	if w.bw == nil {
		w.bw = sseBuffers.Get().(*bufio.Writer)
		w.bw.Reset(&w.conn)
	}
	switch {
	case m.Type == cache.ResyncRequired:
		w.bw.WriteString("id:\n")
	case !m.Snapshot() && m.ResourceVersion != "":
		w.bw.WriteString("id: ")
		w.bw.WriteString(m.ResourceVersion)
		w.bw.WriteByte('\n')
	}
	w.bw.WriteString("event: ")
	w.bw.WriteString(string(m.Type))
	w.bw.WriteString("\ndata: ")
	if _, err := m.WriteTo(sseData{w.bw}); err != nil {
		return err
	}
	if _, err := w.bw.WriteString("\n\n"); err != nil {
		return err
	}
	w.delivery.add(m)
	return nil
}

// release gives the buffer back, dropping what it holds.
func (w *sseWriter) release() {
	w.delivery.dropped()
	if w.bw != nil {
		w.bw.Reset(nil)
		sseBuffers.Put(w.bw)
		w.bw = nil
	}
}

// flush writes the batch out and gives its buffer back.
func (w *sseWriter) flush() error {
	if w.bw == nil {
		return nil
	}
	err := w.bw.Flush()
	if err == nil {
		err = w.conn.rc.Flush() // within the deadline the last write set
	}
	if err == nil {
		w.delivery.written()
	}
	w.release()
	return err
}

// sseData keeps a message on "data:" lines: a line break (only possible as
// JSON whitespace) continues on a new data line, which the client joins back
// with a newline.
type sseData struct{ w *bufio.Writer }

func (d sseData) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		i := lineBreak(p)
		if _, err := d.w.Write(p[:i]); err != nil {
			return n, err
		}
		n += i
		if i == len(p) {
			break
		}
		if _, err := d.w.WriteString("\ndata: "); err != nil {
			return n, err
		}
		n++
		p = p[i+1:]
	}
	return n, nil
}

var _ io.Writer = sseData{}

// lineBreak returns the index of p's first CR or LF, or len(p).
func lineBreak(p []byte) int {
	i := bytes.IndexByte(p, '\n')
	if i < 0 {
		i = len(p)
	}
	if j := bytes.IndexByte(p[:i], '\r'); j >= 0 {
		return j
	}
	return i
}
