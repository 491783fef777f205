package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
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
	sub, notify, err := s.subscribe(resource, q, w.Header(), s.freshnessDetail(c, resource))
	if err != nil {
		return err
	}
	defer s.unsubscribe(sub)
	out, done := s.beginSSE(c)
	defer done()
	life := s.startLife(c, 0, nil)
	defer life.stop()
	if err := s.pump(c.Request().Context(), sub, notify, out, life); err != nil {
		s.log.Debug("event stream ended", "resource", resource, "err", err)
	}
	return nil
}

// beginSSE answers 200 with an event stream's headers and returns its
// writer; done clears the write deadline after, as the connection may
// serve another request.
func (s *Server) beginSSE(c echo.Context) (out *sseWriter, done func()) {
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // proxies must not hold events back
	w.WriteHeader(http.StatusOK)
	out = &sseWriter{s.newBatch(w, s.metrics.deliverySSE)}
	return out, func() { out.conn.rc.SetWriteDeadline(time.Time{}) }
}

// sseWriter writes messages as Server-Sent Events, in batches.
type sseWriter struct{ streamBatch }

func (w *sseWriter) write(m *cache.Message) error {
	w.begin()
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

// end closes the stream with its position when its lifetime is over (an
// EventSource reconnects by itself, with that position as Last-Event-ID),
// or with an ERROR event when the token is no longer valid (the
// EventSource's reconnection is then refused).
func (w *sseWriter) end(why error, pos position) error {
	if errors.Is(why, errLifetimeOver) {
		if m, ok := pos.bookmark(); ok {
			if err := w.write(&m); err != nil {
				w.release()
				return err
			}
		}
		return w.flush()
	}
	w.begin()
	w.bw.WriteString("event: ")
	w.bw.WriteString(string(cache.StreamError))
	w.bw.WriteString("\ndata: ")
	w.bw.Write(errorMessage("", why))
	w.bw.WriteString("\n\n")
	return w.flush()
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
