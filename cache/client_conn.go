package cache

import (
	"bufio"
	"context"
	"net"
	"time"
)

// connReadBuffer is how much of what the API server sent a connection
// takes in one read.
const connReadBuffer = 64 << 10

// bufferedDial wraps dial (net.Dialer's, as client-go's, when nil) so that
// each connection to the API server is read through a buffer of
// connReadBuffer bytes.
//
// Why: TLS asks its connection for about one record (16 KB) at a time, so
// a list of 50,000 pods (575 MB) took tens of thousands of read system
// calls, and Go wakes its sysmon thread on each (entersyscall): the reads,
// the wake-ups and the TLS record headers were a quarter of kubeindex's
// CPU for an initial sync. A buffered connection takes whatever the
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
		return &bufferedConn{Conn: c, r: bufio.NewReaderSize(c, connReadBuffer)}, nil
	}
}

// bufferedConn is a connection read through r. Everything else, writes,
// deadlines and Close included, goes to the connection itself.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
