package server

import (
	"bufio"
	"context"
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
	if err := s.streams.acquire(); err != nil {
		return err
	}
	defer s.streams.release()
	notify := make(chan struct{}, 1)
	sub, err := s.r.Watch(resource, q, notify)
	if err != nil {
		return err
	}
	defer sub.Close()
	w := c.Response()
	if st, err := s.r.ResourceStatus(resource); err == nil {
		setFreshness(w.Header(), st.Freshness)
	}
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // proxies must not hold events back
	w.WriteHeader(http.StatusOK)
	out := &sseWriter{rc: http.NewResponseController(w), bw: bufio.NewWriterSize(w, 32<<10), timeout: s.streams.opts.WriteTimeout}
	defer out.rc.SetWriteDeadline(time.Time{}) // the connection may serve another request
	if err := s.pumpSSE(c.Request().Context(), sub, notify, out); err != nil {
		s.log.Debug("event stream ended", "resource", resource, "err", err)
	}
	return nil
}

// pumpSSE writes the subscription's messages until it ends, the client
// goes away or the server shuts down.
func (s *Server) pumpSSE(ctx context.Context, sub *cache.Subscription, notify <-chan struct{}, out *sseWriter) error {
	for {
		for n := 1; ; n++ {
			m, ok := sub.Next()
			if !ok {
				break
			}
			if err := out.write(&m); err != nil {
				return err
			}
			if m.Terminal() {
				return out.flush()
			}
			if n%256 == 0 && (ctx.Err() != nil || s.streams.ctx.Err() != nil) {
				return nil
			}
		}
		if err := out.flush(); err != nil {
			return err
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

type sseWriter struct {
	rc      *http.ResponseController
	bw      *bufio.Writer
	timeout time.Duration
}

func (w *sseWriter) write(m *cache.Message) error {
	if err := w.rc.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
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
	_, err := w.bw.WriteString("\n\n")
	return err
}

func (w *sseWriter) flush() error {
	if err := w.bw.Flush(); err != nil {
		return err
	}
	return w.rc.Flush()
}

// sseData keeps a message on "data:" lines: a line break (only possible as
// JSON whitespace) continues on a new data line, which the client joins back
// with a newline.
type sseData struct{ w *bufio.Writer }

func (d sseData) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		i := 0
		for i < len(p) && p[i] != '\n' && p[i] != '\r' {
			i++
		}
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
