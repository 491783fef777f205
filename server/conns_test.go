package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// slotConn is a raw client connection from a chosen loopback address, for
// requests written byte for byte and answers read one at a time.
type slotConn struct {
	net.Conn
	r *bufio.Reader
}

func dialFrom(t *testing.T, from, addr string) *slotConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dialling from %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	return &slotConn{Conn: c, r: bufio.NewReader(c)}
}

// get sends one request on the connection and reads its answer; code 0
// when the connection gave none (closed).
func (c *slotConn) get(t *testing.T, path, token string) (int, string) {
	t.Helper()
	req := "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n"
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		return 0, err.Error()
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitClosed waits for the server to close the connection; false when it
// is still open after a while far beyond every short timeout of the tests.
func (c *slotConn) waitClosed() bool {
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.Copy(io.Discard, c.r)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func slotTokens(t *testing.T) auth.Authenticator {
	st, err := auth.ParseStaticTokens([]byte("admin-token,admin,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// With 20 connection slots, 20 idle sockets of one address must not lock
// everyone else out: one address holds a quarter of them, and the admin,
// from another address, still gets in.
func TestIdleSocketsOfOneAddressLeaveRoomForOthers(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	s, addr := serveReal(t, f.Cache, Options{Auth: AuthOptions{Authenticator: slotTokens(t)},
		Limits: LimitOptions{MaxConnections: 20, UnauthenticatedTimeout: time.Minute}})
	held, refused := 0, 0
	for range 20 {
		c := dialFrom(t, "127.0.0.1", addr)
		switch code, body := c.get(t, "/healthz", ""); code { // a keep-alive, idle from now on
		case 200:
			held++
		case 429:
			refused++
			if !strings.Contains(body, `"reason":"TooManyRequests"`) {
				t.Errorf("refusal of a connection beyond the address's share: %q", body)
			}
		default:
			t.Fatalf("an idle socket's request: %d %q", code, body)
		}
	}
	if held != 5 || refused != 15 {
		t.Errorf("one address holds %d connections, %d refused; expect 5 (a quarter of 20), 15", held, refused)
	}
	if code, body := dialFrom(t, "127.0.0.2", addr).get(t, "/api/v1/pods?limit=1", "admin-token"); code != 200 {
		t.Errorf("the admin, from another address: %d %q; expect 200", code, body)
	}
	if _, _, refusedAddr, _ := s.limits.allCounts(); refusedAddr != 15 {
		t.Errorf("refusals per address counted: %d; expect 15", refusedAddr)
	}
}

// An idle socket that never authenticated holds its slot for the short
// UnauthenticatedTimeout, not the whole keep-alive timeout, whether it sends nothing, a request to a public
// route or a request with a bad token; an authenticated connection keeps
// the usual keep-alive.
func TestUnauthenticatedConnectionsAreClosedSoon(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	_, addr := serveReal(t, f.Cache, Options{Auth: AuthOptions{Authenticator: slotTokens(t)},
		Limits: LimitOptions{UnauthenticatedTimeout: 200 * time.Millisecond}})
	admin := dialFrom(t, "127.0.0.2", addr)
	if code, body := admin.get(t, "/api/v1/pods?limit=1", "admin-token"); code != 200 {
		t.Fatalf("the admin: %d %q", code, body)
	}
	silent := dialFrom(t, "127.0.0.1", addr)
	public := dialFrom(t, "127.0.0.1", addr)
	if code, _ := public.get(t, "/healthz", ""); code != 200 {
		t.Fatalf("a public route without a token: %d", code)
	}
	badToken := dialFrom(t, "127.0.0.1", addr)
	if code, _ := badToken.get(t, "/api/v1/pods", "wrong"); code != 401 {
		t.Fatalf("a bad token: %d", code)
	}
	for name, c := range map[string]*slotConn{"a socket that sends nothing": silent,
		"a keep-alive after a public route": public, "a keep-alive after a 401": badToken} {
		if !c.waitClosed() {
			t.Errorf("%s is still open long after the unauthenticated timeout", name)
		}
	}
	// The admin has been idle longer than the short timeout since: its
	// connection is still there.
	if code, body := admin.get(t, "/api/v1/pods?limit=1", "admin-token"); code != 200 {
		t.Errorf("the admin's keep-alive after the short timeout: %d %q; expect it open and answered", code, body)
	}
}

// With authentication off, a request that passed the checks there are
// (the Host) makes a connection as good as authenticated.
func TestWithoutAuthenticationAServedRequestKeepsTheConnection(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	_, addr := serveReal(t, f.Cache, Options{Limits: LimitOptions{UnauthenticatedTimeout: 200 * time.Millisecond}})
	served := dialFrom(t, "127.0.0.1", addr)
	if code, _ := served.get(t, "/healthz", ""); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	if !dialFrom(t, "127.0.0.1", addr).waitClosed() {
		t.Error("a socket that sends nothing is still open long after the unauthenticated timeout")
	}
	if code, body := served.get(t, "/api/v1/pods?limit=1", ""); code != 200 {
		t.Errorf("a served connection after the short timeout: %d %q; expect it open and answered", code, body)
	}
}

// TestIdleAuthenticatedSocketsLeaveRoomForOthers: a caller with a valid
// token, whatever it may read, opens every connection slot from four
// addresses and leaves each idle after one request. Another caller must
// still be answered: at the limit, an idle connection of whoever holds the
// most is closed to make room (a keep-alive, which its client opens again
// when it needs it), rather than the newcomer refused.
func TestIdleAuthenticatedSocketsLeaveRoomForOthers(t *testing.T) {
	st, err := auth.ParseStaticTokens([]byte("hoarder-token,hoarder,1\nother-token,other,2\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := cachetest.Start(t, cachetest.PodSpec())
	s, addr := serveReal(t, f.Cache, Options{Auth: AuthOptions{Authenticator: st},
		Limits: LimitOptions{MaxConnections: 1000}})
	for i := range 1000 {
		c := dialFrom(t, fmt.Sprintf("127.0.0.%d", 2+i%4), addr)
		if code, body := c.get(t, "/api/v1/pods?limit=1", "hoarder-token"); code != 200 {
			t.Fatalf("the hoarder's connection %d: %d %q", i, code, body)
		}
	}
	if conns, _, _ := s.limits.counts(); conns != 1000 {
		t.Fatalf("%d connections open; expect the hoarder's 1,000 idle ones", conns)
	}
	start := time.Now()
	code, body := dialFrom(t, "127.0.0.1", addr).get(t, "/api/v1/pods?limit=1", "other-token")
	took := time.Since(start)
	if code != 200 {
		t.Fatalf("another caller, with 1,000 idle authenticated sockets open: %d %q; expect 200", code, body)
	}
	t.Logf("another caller answered in %v beside 1,000 idle authenticated sockets of one identity", took)
	if _, refused, _ := s.limits.counts(); refused != 0 || s.limits.reclaimed() != 1 {
		t.Errorf("%d connections refused, %d reclaimed; expect none refused, one idle connection reclaimed", refused, s.limits.reclaimed())
	}
}
