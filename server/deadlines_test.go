package server

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// TestDeadlinesAppliedWhenMet holds the deadlines kept until a read or a
// write meets them (deadlines.go) to what a socket's own do: a read or a
// write meets the deadline last asked, one asked while a read is pending
// stops it or extends it, and through a real server a request applies
// fewer than are asked (net/http's seven, the limits' two).
func TestDeadlinesAppliedWhenMet(t *testing.T) {
	newConn := func() (*limitedConn, net.Conn) {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		lc := &limitedConn{Conn: a, l: newLimiter(LimitOptions{}.withDefaults())}
		lc.authenticated.Store(true)
		return lc, b
	}
	buf := make([]byte, 1)

	lc, _ := newConn()
	lc.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := lc.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a read after a past deadline: %v", err)
	}
	lc.SetReadDeadline(time.Time{})
	lc.SetWriteDeadline(time.Now().Add(-time.Second))
	if _, err := lc.Write(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a write after a past deadline: %v", err)
	}

	// A pending read is stopped by a deadline asked meanwhile (net/http's
	// abortPendingRead), and extended by a later one.
	lc, peer := newConn()
	read := make(chan error, 1)
	go func() {
		_, err := lc.Read(buf)
		read <- err
	}()
	time.Sleep(20 * time.Millisecond)
	lc.SetReadDeadline(time.Now().Add(-time.Second))
	select {
	case err := <-read:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("a pending read stopped by a deadline: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a deadline asked during a read did not stop it")
	}
	lc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	go func() {
		_, err := lc.Read(buf)
		read <- err
	}()
	time.Sleep(10 * time.Millisecond)
	lc.SetReadDeadline(time.Now().Add(time.Minute))
	time.Sleep(100 * time.Millisecond)
	peer.Write([]byte("x"))
	if err := <-read; err != nil {
		t.Errorf("a read whose deadline was extended while pending: %v", err)
	}

	// Through a real server, on one keep-alive connection.
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	pod := podOnThePodNetwork(t, f.Cache)
	_, addr := serveReal(t, f.Cache, Options{})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	ask := func() {
		fmt.Fprintf(conn, "GET /api/v1/pods/%s HTTP/1.1\r\nHost: %s\r\n\r\n", pod.Key(), addr)
		h, err := readHead(r, "GET")
		if err != nil || h.code != 200 {
			t.Fatalf("%d, %v", h.code, err)
		}
	}
	ask()
	const n = 200
	before := deadlinesApplied.Load()
	for range n {
		ask()
	}
	per := float64(deadlinesApplied.Load()-before) / n
	t.Logf("%.2f deadlines applied per request", per)
	if per > 5 {
		t.Errorf("%.1f deadlines applied per request; expect at most 5 (3 or 4: the idle, none for the background read, its stop, the write's)", per)
	}
}
