package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// serveReal runs the server's own Serve (its http.Server, header limit and
// connection limit) on a loopback port until the test ends.
func serveReal(t testing.TB, r Reader, opts Options) (*Server, string) {
	return serveRealOn(t, r, opts, func(ln net.Listener) net.Listener { return ln })
}

func serveRealOn(t testing.TB, r Reader, opts Options, wrap func(net.Listener) net.Listener) (*Server, string) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	s := New(r, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln = wrap(ln)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	h := New(panicky{f.Cache}, Options{Logger: quiet()}).Handler()
	for _, tc := range []struct {
		method, target string
		code           int
	}{
		{"GET", "/api/v1/pods?limit=1", 200},
		{"GET", "/api/v1/nope", 404},
		{"DELETE", "/api/v1/pods", 405},
		{"GET", "/api/v1/ip/10.0.0.1", 500}, // panicky: a recovered panic
		{"GET", "/healthz", 200},
		{"GET", "/metrics", 200},
	} {
		rec := do(t, h, tc.method, tc.target)
		if rec.Code != tc.code {
			t.Errorf("%s %s: %d; expect %d", tc.method, tc.target, rec.Code, tc.code)
		}
		// No Content-Security-Policy: the API serves no documents (see newSecurityHeaders).
		for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "Cross-Origin-Resource-Policy": "same-origin",
			"Content-Security-Policy": ""} {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("%s %s: %s %q; expect %q", tc.method, tc.target, k, got, v)
			}
		}
	}
	// The dashboard, a document, has its own policy, and the headers of every response.
	for _, target := range []string{"/", "/ui/app.js"} {
		rec := do(t, h, "GET", target)
		if !strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'self'") ||
			rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("Cross-Origin-Resource-Policy") != "same-origin" {
			t.Errorf("dashboard %s: headers %v", target, rec.Header())
		}
	}
	if rec := do(t, h, "GET", "/api/v1/pods?limit=1"); rec.Header().Get("Cache-Control") == "no-store" {
		t.Error("without authentication answers are public: no need for no-store")
	}
}

func TestBodiesAreRefused(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	h := New(f.Cache, Options{Logger: quiet()}).Handler()
	for _, tc := range []struct {
		name string
		req  *http.Request
	}{
		{"a body", localRequest("GET", "/api/v1/pods", strings.NewReader("{}"))},
		{"a chunked body", func() *http.Request {
			r := localRequest("GET", "/api/v1/pods", io.NopCloser(strings.NewReader("x")))
			r.ContentLength = -1
			return r
		}()},
		{"a POST with a body", localRequest("POST", "/api/v1/pods", strings.NewReader("{}"))},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, tc.req)
		if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), `"reason":"RequestEntityTooLarge"`) {
			t.Errorf("%s: %d %s; expect 413", tc.name, rec.Code, rec.Body)
		}
	}
}

func TestStreamsPerClientAreBounded(t *testing.T) {
	ss := startStreams(t, Options{Limits: LimitOptions{MaxStreamsPerClient: 2}})
	a := openSSE(t, ss.url+"/api/v1/pods?watch=true", nil)
	openSSE(t, ss.url+"/api/v1/nodes?watch=true", nil)
	if c := openSSE(t, ss.url+"/api/v1/pods?watch=true", nil); c.resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("third stream: %d; expect 429", c.resp.StatusCode)
	}
	if conn, resp, err := websocket.DefaultDialer.Dial(ss.wsURL("/api/v1/stream"), nil); err == nil || resp.StatusCode != http.StatusTooManyRequests {
		if conn != nil {
			conn.Close()
		}
		t.Errorf("third stream as a WebSocket: %v; expect 429", err)
	}
	if rec, _ := http.Get(ss.url + "/api/v1/pods?limit=1"); rec.StatusCode != 200 {
		t.Errorf("REST is not a stream: %d", rec.StatusCode)
	}
	a.close()
	cachetest.Eventually(t, "a stream slot is free again", func() bool {
		c := openSSE(t, ss.url+"/api/v1/pods?watch=true", nil)
		defer c.close()
		return c.resp.StatusCode == 200
	})
}

func TestConnectionsAreBounded(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	s, addr := serveReal(t, f.Cache, Options{Limits: LimitOptions{MaxConnections: 3, MaxConnectionsPerAddress: 3}})
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	cachetest.Eventually(t, "3 connections open", func() bool { n, _, _ := s.limits.counts(); return n == 3 })
	code, body := rawRequest(t, addr, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
	if code != 503 || !strings.Contains(body, `"reason":"ServiceUnavailable"`) {
		t.Errorf("a fourth connection: %d %q; expect 503", code, body)
	}
	for _, c := range held {
		c.Close()
	}
	cachetest.Eventually(t, "the connections are released", func() bool {
		code, _ := rawRequest(t, addr, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
		return code == 200
	})
	if _, refused, _ := s.limits.counts(); refused < 1 {
		t.Error("the refusal was not counted")
	}
}

// rawRequest writes req as is on a new connection and reads one response.
func rawRequest(t *testing.T, addr, req string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(c, req); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Logf("writing the request: %v", err) // the server may answer and close before reading it all
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%.80q: no response: %v", req, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRESTTimeoutCutsSlowReadersButNotStreams(t *testing.T) {
	ss := startStreams(t, Options{Limits: LimitOptions{RequestTimeout: 300 * time.Millisecond}})
	stream := newReplica(nil)
	openSSE(t, ss.url+"/api/v1/pods?watch=true&namespace=probe", nil).follow(stream)
	time.Sleep(600 * time.Millisecond) // longer than the REST timeout
	if err := ss.f.Sim.Apply("pods", probePod("probe", "late", "node-1", "web")); err != nil {
		t.Fatal(err)
	}
	stream.waitEqual(t, "the stream outlives the REST timeout", func() map[string]string {
		return cachetest.State(t, ss.f.Cache, "pods", cache.ListQuery{Namespace: "probe"})
	})

	// A client that asks for a large list and does not read it is cut off.
	_, addr := serveRealOn(t, ss.f.Cache, Options{Limits: LimitOptions{RequestTimeout: 300 * time.Millisecond}},
		func(ln net.Listener) net.Listener { return smallBuffers{ln} })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(1024)
	for range 20 { // pipelined: far more than the socket buffers hold
		io.WriteString(c, "GET /api/v1/pods HTTP/1.1\r\nHost: localhost\r\n\r\n")
	}
	time.Sleep(time.Second)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("a reader that stalls was not cut off: read %d bytes, then the connection stayed open", n)
	}
	// Otherwise the server closed it (EOF, or a reset: requests were left unread).
	if full, _ := io.Copy(io.Discard, do(t, New(ss.f.Cache, Options{}).Handler(), "GET", "/api/v1/pods").Result().Body); n >= 20*full {
		t.Errorf("read %d bytes: all 20 responses of %d bytes; expect the connection cut", n, full)
	}
}
