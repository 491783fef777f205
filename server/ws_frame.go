package server

import (
	"encoding/binary"
	"net"
	"sync"
	"time"

	"github.com/kubeindex/kubeindex/cache"
)

// Batches of outgoing frames are written once they reach frameBatchBytes:
// a few pod-sized messages per write. Their buffers come from frameBuffers
// for one batch: a socket holds one only while it writes (or waits for a
// peer slow to read), so idle sockets hold none. A buffer that a huge
// message grew beyond maxPooledFrameBuffer is not kept.
const (
	frameBatchBytes      = 32 << 10
	maxPooledFrameBuffer = 256 << 10
)

var frameBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, frameBatchBytes+16<<10) // room for a typical frame past the threshold
	return &b
}}

// frameWriter writes a WebSocket's text messages, several per write. A
// server's frames are not masked, so a frame is a header and the message:
// each message is copied once, from the event's encoding that all
// subscribers share into the batch, and not encoded, masked or buffered
// again on its way to the socket.
//
// It writes to the connection beneath gorilla's Conn, which sees none of
// these frames: only the writer goroutine uses it, and the control frames
// that go through gorilla (pings, pongs, close) are written between
// batches, never inside one. Each write holds whole frames, and a TCP
// connection's Write is never interleaved with another (the descriptor's
// write lock is held for the whole call), so even the close frame gorilla's
// reader sends on a protocol error cannot land inside a frame.
//
// Not safe for concurrent use.
type frameWriter struct {
	conn     net.Conn
	timeout  time.Duration // bounds each write
	buf      *[]byte       // the batch; nil when there is none
	delivery deliveryTimer // the batch's live events
	writes   uint64        // batches written so far
}

// add appends m as one text frame. With a tag (`{"id":"…",`), the message
// is spliced behind it: the tag takes the place of its opening brace.
func (f *frameWriter) add(m *cache.Message, tag []byte) error {
	n := m.Len()
	if tag != nil {
		n += len(tag) - 1
	}
	b, err := f.reserve(n)
	if err != nil {
		return err
	}
	b = appendFrameHeader(b, n)
	if tag != nil {
		b = append(b, tag[:len(tag)-1]...)
		i := len(b)
		b = m.AppendTo(b)
		b[i] = ','
	} else {
		b = m.AppendTo(b)
	}
	f.delivery.add(m)
	return f.added(b)
}

// addRaw appends msg, a complete message, as one text frame.
func (f *frameWriter) addRaw(msg []byte) error {
	b, err := f.reserve(len(msg))
	if err != nil {
		return err
	}
	return f.added(append(appendFrameHeader(b, len(msg)), msg...))
}

// reserve returns the batch to append a frame of n bytes to, after writing
// out what is batched if the frame would take it past the threshold.
func (f *frameWriter) reserve(n int) ([]byte, error) {
	if f.buf == nil {
		f.buf = frameBuffers.Get().(*[]byte)
	}
	if b := *f.buf; len(b) > 0 && len(b)+maxFrameHeader+n > cap(b) {
		if err := f.write(); err != nil {
			return nil, err
		}
	}
	return *f.buf, nil
}

func (f *frameWriter) added(b []byte) error {
	*f.buf = b
	if len(b) >= frameBatchBytes {
		return f.write()
	}
	return nil
}

// write writes the batch out and empties it.
func (f *frameWriter) write() error {
	b := *f.buf
	*f.buf = b[:0]
	if len(b) == 0 {
		return nil
	}
	if err := f.conn.SetWriteDeadline(time.Now().Add(f.timeout)); err != nil {
		f.delivery.dropped()
		return err
	}
	f.writes++
	if _, err := f.conn.Write(b); err != nil {
		f.delivery.dropped()
		return err
	}
	f.delivery.written()
	return nil
}

// flush writes what is batched and gives the buffer back.
func (f *frameWriter) flush() error {
	if f.buf == nil {
		return nil
	}
	err := f.write()
	if cap(*f.buf) <= maxPooledFrameBuffer {
		frameBuffers.Put(f.buf)
	}
	f.buf = nil
	return err
}

// maxFrameHeader is the longest header of an unmasked frame.
const maxFrameHeader = 10

// appendFrameHeader appends the header of a final, unmasked text frame of
// n payload bytes (RFC 6455, section 5.2).
func appendFrameHeader(b []byte, n int) []byte {
	const finText = 0x80 | 0x1
	switch {
	case n < 126:
		return append(b, finText, byte(n))
	case n <= 0xffff:
		return append(b, finText, 126, byte(n>>8), byte(n))
	}
	return binary.BigEndian.AppendUint64(append(b, finText, 127), uint64(n))
}
