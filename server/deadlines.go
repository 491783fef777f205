package server

import (
	"net"
	"sync/atomic"
	"time"
)

// Deadlines applied when a read or a write needs them. net/http sets a
// keep-alive connection's deadlines seven times per request (the idle
// deadline, the header deadline, none while the request is served and
// none for its background read, a past one and none again to stop that
// read, none for writes after the handler), and the limits add a write
// deadline and lift it:
// each is a call into the runtime's poller and its timers. Most are
// replaced before any read or write could meet them. So a deadline asked
// is kept (limitedConn.dl) and applied to the socket only before the next
// read or write, or at once while one is under way (a deadline set to
// stop a pending read, or to extend it): every read and write meets the
// deadline last asked, as when each was applied, with three applied per
// request rather than nine (TestDeadlinesAppliedWhenMet).

// deadlines (under dmu) are a connection's deadlines asked and applied,
// and the reads and writes under way.
type deadlines struct {
	readAsked, readSet   time.Time
	writeAsked, writeSet time.Time
	reading, writing     int
}

// deadlinesApplied counts the deadlines applied to sockets, which the
// test reads.
var deadlinesApplied atomic.Uint64

func (c *limitedConn) SetReadDeadline(t time.Time) error {
	if !t.IsZero() && !c.authenticated.Load() {
		if short := time.Now().Add(c.l.opts.UnauthenticatedTimeout); t.After(short) {
			t = short
		}
	}
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.dl.readAsked = t
	if c.dl.reading > 0 {
		return c.applyRead()
	}
	return nil
}

func (c *limitedConn) SetWriteDeadline(t time.Time) error {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.dl.writeAsked = t
	if c.dl.writing > 0 {
		return c.applyWrite()
	}
	return nil
}

func (c *limitedConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// applyRead (under dmu) gives the socket the read deadline asked.
func (c *limitedConn) applyRead() error {
	if c.dl.readAsked.Equal(c.dl.readSet) {
		return nil
	}
	deadlinesApplied.Add(1)
	err := c.Conn.SetReadDeadline(c.dl.readAsked)
	if err == nil {
		c.dl.readSet = c.dl.readAsked
	}
	return err
}

// applyWrite (under dmu) gives the socket the write deadline asked.
func (c *limitedConn) applyWrite() error {
	if c.dl.writeAsked.Equal(c.dl.writeSet) {
		return nil
	}
	deadlinesApplied.Add(1)
	err := c.Conn.SetWriteDeadline(c.dl.writeAsked)
	if err == nil {
		c.dl.writeSet = c.dl.writeAsked
	}
	return err
}

// Read reads under the read deadline last asked. A failure to apply it
// (a closed socket) is left to the read to meet.
func (c *limitedConn) Read(p []byte) (int, error) {
	c.dmu.Lock()
	c.dl.reading++
	c.applyRead()
	c.dmu.Unlock()
	n, err := c.Conn.Read(p)
	c.dmu.Lock()
	c.dl.reading--
	c.dmu.Unlock()
	return n, err
}

// startWrite and endWrite surround every write to the socket, which
// meets the write deadline last asked.
func (c *limitedConn) startWrite() {
	c.dmu.Lock()
	c.dl.writing++
	c.applyWrite()
	c.dmu.Unlock()
}

func (c *limitedConn) endWrite() {
	c.dmu.Lock()
	c.dl.writing--
	c.dmu.Unlock()
}

// connWrite and connSend write p, and bufs, to the socket.
func (c *limitedConn) connWrite(p []byte) (int, error) {
	c.startWrite()
	defer c.endWrite()
	return c.Conn.Write(p)
}

func (c *limitedConn) connSend(bufs *net.Buffers) (int64, error) {
	c.startWrite()
	defer c.endWrite()
	return sendBuffers(c.Conn, bufs)
}
