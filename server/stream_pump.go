package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubeindex/kubeindex/cache"
)

// messageWriter encodes a stream's messages into batches on an HTTP
// response: event streams (SSE) and the Kubernetes API's watches.
type messageWriter interface {
	// write adds m to the batch. A terminal message (RESYNC_REQUIRED) is
	// written as the transport says it, or not at all.
	write(m *cache.Message) error
	// flush writes the batch out and gives its buffer back.
	flush() error
	// release drops the batch.
	release()
	// end writes what ends a stream whose life is over (why is
	// errLifetimeOver, or the token no longer valid) and flushes; pos is
	// where the client would resume.
	end(why error, pos position) error
}

// pump writes the subscription's messages until it ends, its life is
// over, the client goes away or the server shuts down: the one loop of
// every stream on a plain HTTP response. It takes what is queued, writes
// it as one batch, then waits for more, holding the next batch back by the
// pacer's interval.
func (s *Server) pump(ctx context.Context, sub cache.Subscription, notify <-chan struct{}, out messageWriter, life *streamLife) error {
	pace := newPacer(s.streams.opts.Coalesce)
	var pos position
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
			pos.follow(&m)
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
		case <-life.ended:
			return out.end(life.why, pos)
		case <-notify:
		}
	}
}

// streamBuffers batch the writes of streams on HTTP responses. A stream
// takes one only while it has messages to write, so idle streams hold none.
var streamBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}

// streamBatch is the buffer and the delivery timing shared by the message
// writers: begin takes a buffer from streamBuffers, flush or release gives
// it back.
type streamBatch struct {
	conn     sseConn
	bw       *bufio.Writer // nil between batches
	delivery deliveryTimer // the batch's live events
}

func (s *Server) newBatch(w http.ResponseWriter, delivery prometheus.Observer) streamBatch {
	return streamBatch{conn: sseConn{rc: http.NewResponseController(w), w: w, timeout: s.streams.opts.WriteTimeout},
		delivery: deliveryTimer{obs: delivery}}
}

// begin makes sure a batch has its buffer.
func (b *streamBatch) begin() {
	if b.bw == nil {
		b.bw = streamBuffers.Get().(*bufio.Writer)
		b.bw.Reset(&b.conn)
	}
}

// release gives the buffer back, dropping what it holds.
func (b *streamBatch) release() {
	b.delivery.dropped()
	if b.bw != nil {
		b.bw.Reset(nil)
		streamBuffers.Put(b.bw)
		b.bw = nil
	}
}

// flush writes the batch out and gives its buffer back.
func (b *streamBatch) flush() error {
	if b.bw == nil {
		return nil
	}
	err := b.bw.Flush()
	if err == nil {
		err = b.conn.rc.Flush() // within the deadline the last write set
	}
	if err == nil {
		b.delivery.written()
	}
	b.release()
	return err
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
