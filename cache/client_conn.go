package cache

import (
	"bufio"
	"context"
	"net"
	"sync/atomic"
	"time"
)

// connReadBuffer is how much of what the API server sent a connection
// takes in one read.
const connReadBuffer = 64 << 10

// bufferedDial wraps dial (net.Dialer's, as client-go's, when nil) so that
// each connection to the API server is read through a buffer of
// connReadBuffer bytes.
//
// Why: TLS asks its connection for about one record at a time, so a large
// list took a read system call per record, and Go wakes its sysmon thread
// on each (entersyscall): the reads, the wake-ups and the TLS record
// headers were a large share of an initial sync's CPU (BenchmarkInitialSync
// and make bench's sync figure; BENCHMARKS.md). A buffered connection takes whatever the
// socket holds, up to the buffer, in one system call, and hands TLS its
// records from memory. A read returns as soon as the socket gives
// anything (bufio.Reader reads once), so a watch event is delivered no
// later than before.
func bufferedDial(dial func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		bc := &bufferedConn{Conn: c}
		bc.r = bufio.NewReaderSize(pacedReader{bc}, connReadBuffer)
		return bc, nil
	}
}

// bufferedConn is a connection read through r. Everything else, writes,
// deadlines and Close included, goes to the connection itself.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
	// paced is set while a list's body is read (pace): then a read that
	// found less than half the buffer waits pauseAfterShortRead before
	// the next one.
	paced atomic.Bool
	// unpaced is what a paced read may still take before the pauses
	// begin (pace sets it to paceListsAfter).
	unpaced atomic.Int64
	short   bool // the last read found less than half the buffer
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// pauseAfterShortRead is how long a paced connection lets the socket fill
// after a read that found it nearly empty: at the rate an API server
// writes a large list on loopback, about a buffer's worth.
const pauseAfterShortRead = time.Millisecond

// sleepAfterShortRead is time.Sleep; tests see the pauses through it.
var sleepAfterShortRead = time.Sleep

// paceListsAfter is how much of a list is read before its reads are
// paced: a small list (a thousand pods is about 11 MB) is over before the
// pauses save more than they cost; each is a timer and a wake-up. A
// variable so that tests can pace from the first byte.
var paceListsAfter int64 = 16 << 20

// pacedReader reads the socket for the buffer.
//
// Why: an API server writes a list in pieces of a few KB, one TLS record
// each, and a reader faster than it reads each piece as it comes: a read,
// a read that finds nothing (EAGAIN), a wait in the poller and a wake-up
// per piece (counted for make bench's sync figure in BENCHMARKS.md).
// Paced, a reader that is ahead lets the pieces pile up and takes them in
// one read. Only a list's body is paced, past its first paceListsAfter
// bytes: it is read to the end as fast as it comes, so a pause costs no
// wall time (the sender only blocks when the socket's buffer, megabytes on
// a fast link, is full); a watch is never paced, its events are delivered
// as soon as they arrive.
type pacedReader struct{ c *bufferedConn }

func (r pacedReader) Read(p []byte) (int, error) {
	c := r.c
	paced := c.paced.Load()
	if paced && c.short && c.unpaced.Load() <= 0 {
		sleepAfterShortRead(pauseAfterShortRead)
	}
	n, err := c.Conn.Read(p)
	c.short = n < len(p)/2
	if paced {
		c.unpaced.Add(-int64(n))
	}
	return n, err
}

// pace paces conn's reads (see pacedReader) until the returned function
// is called; conn is the connection a request got (httptrace.GotConnInfo),
// TLS or not. A connection that is not ours is left as it is.
func pace(conn net.Conn) (stop func()) {
	if tc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		conn = tc.NetConn()
	}
	bc, ok := conn.(*bufferedConn)
	if !ok {
		return func() {}
	}
	bc.unpaced.Store(paceListsAfter)
	bc.paced.Store(true)
	return func() { bc.paced.Store(false) }
}
