package cache

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// countingConn counts the reads made on the connection itself.
type countingConn struct {
	net.Conn
	reads int
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads++
	return c.Conn.Read(p)
}

// TestBufferedConnReadsWhatIsThereAtOnce: what the peer sent is taken in
// few reads of the connection however small the reads asked of it (TLS
// asks for a record at a time), and a read returns what has arrived
// without waiting for the buffer to fill (a watch event is not held back).
func TestBufferedConnReadsWhatIsThereAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(peer)
			return
		}
		peer <- c
	}()
	var raw *countingConn
	dial := bufferedDial(func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, address)
		raw = &countingConn{Conn: c}
		return raw, err
	})
	c, err := dial(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := <-peer
	if p == nil {
		t.Fatal("no connection accepted")
	}
	defer p.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a read waiting for more fails, never hangs

	// A small message is read as soon as it is there.
	if _, err := p.Write([]byte("event")); err != nil {
		t.Fatal(err)
	}
	small := make([]byte, 1024)
	if n, err := c.Read(small); err != nil || string(small[:n]) != "event" {
		t.Fatalf("read %q, %v; want the 5 bytes sent", small[:n], err)
	}

	// 40 KB that arrived together are taken in a few reads of the
	// connection, though asked for 1 KB at a time.
	want := bytes.Repeat([]byte("0123456789abcdef"), 40<<10/16)
	if _, err := p.Write(want); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let it all arrive: only the count of reads depends on it
	raw.reads = 0
	got := make([]byte, 0, len(want))
	for len(got) < len(want) {
		n, err := c.Read(small)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		got = append(got, small[:n]...)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes read differ from those sent")
	}
	if raw.reads > 4 {
		t.Fatalf("%d reads of the connection for 40 KB read 1 KB at a time; want a few", raw.reads)
	}
}
