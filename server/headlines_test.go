package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// TestHeaderLinesAsTheMap asks the same questions over a plain HTTP/1.1
// connection, where the connection writes the security and freshness
// headers as lines after the status line (headlines.go), and through the
// header map (a recorder, as over HTTP/2 or TLS): a client reads the same
// headers either way, each key once, with authentication off and on (its
// Cache-Control stays in the map, where handlers replace it).
func TestHeaderLinesAsTheMap(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	pod := podOnThePodNetwork(t, f.Cache)
	podIP := gjson.GetBytes(pod.Raw(), "status.podIP").Str
	st, err := auth.ParseStaticTokens([]byte("s3cret,alice,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []Options{{}, {Auth: AuthOptions{Authenticator: st}}} {
		s, addr := serveReal(t, f.Cache, opts)
		private := opts.Auth.Authenticator != nil
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		for _, tt := range []struct{ method, target string }{
			{"GET", "/api/v1/pods/" + pod.Key()},
			{"HEAD", "/api/v1/pods/" + pod.Key()},
			{"GET", "/api/v1/ip/" + podIP},
			{"GET", "/api/v1/pods?namespace=kube-system&limit=1"},
			{"GET", "/api/v1/resources/pods"},
			{"GET", "/api/v1/resources"},
			{"GET", "/healthz"},
			{"GET", "/"}, // the dashboard, with headers of its own
			{"GET", "/api/v1/pods/kube-system/nope"},
			{"GET", "/api/v1/ip/not-an-ip"},
			{"GET", "/api/v1/widgets"},
			{"GET", "/no/such/route"},
			{"DELETE", "/api/v1/pods"},
			{"GET", "/k8s/api/v1/namespaces/" + pod.Namespace() + "/pods/" + pod.Name()},
		} {
			name := fmt.Sprintf("private=%v %s %s", private, tt.method, tt.target)
			req := "Host: " + addr + "\r\n"
			if private {
				req += "Authorization: Bearer s3cret\r\n"
			}
			spliced := linesSpliced.Load()
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\n%s\r\n", tt.method, tt.target, req)
			wire, err := readHead(r, tt.method)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if linesSpliced.Load() == spliced {
				t.Errorf("%s: the headers came through the map, not as the connection's lines", name)
			}
			rq := localRequest(tt.method, tt.target, nil)
			if private {
				rq.Header.Set("Authorization", "Bearer s3cret")
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, rq)
			if rec.Code != wire.code {
				t.Errorf("%s: %d on the wire, %d through the map", name, wire.code, rec.Code)
			}
			for k, v := range rec.Header() {
				if got := wire.header[k]; !slices.Equal(got, v) {
					t.Errorf("%s: %s is %q on the wire, %q through the map", name, k, got, v)
				}
			}
			for k, v := range wire.header {
				switch k {
				case "Date", "Content-Length", "Transfer-Encoding":
					continue // net/http's own, written on the wire
				}
				if rec.Header()[k] == nil {
					t.Errorf("%s: %s %q on the wire, not through the map", name, k, v)
				}
			}
			for k, v := range wire.header {
				if len(v) != 1 {
					t.Errorf("%s: %s %q on the wire; expect it once", name, k, v)
				}
			}
			for _, k := range []string{"X-Content-Type-Options", "Cross-Origin-Resource-Policy"} {
				if wire.header[k] == nil {
					t.Errorf("%s: no %s on the wire", name, k)
				}
			}
			if tt.target == "/api/v1/ip/"+podIP && wire.header[HeaderResourceVersion] == nil {
				t.Errorf("%s: no freshness on the wire: %v", name, wire.header)
			}
			if private && wire.code == 200 && tt.target != "/" && wire.header.Get("Cache-Control") != "no-store" {
				t.Errorf("%s: Cache-Control %q; expect no-store", name, wire.header["Cache-Control"])
			}
		}
	}
}

type head struct {
	code   int
	header http.Header
}

// readHead reads an answer from r as its bytes came, every line kept (a
// key sent twice has two values), and skips its body.
func readHead(r *bufio.Reader, method string) (head, error) {
	status, err := r.ReadString('\n')
	if err != nil {
		return head{}, err
	}
	var h head
	if _, err := fmt.Sscanf(status, "HTTP/1.1 %d", &h.code); err != nil {
		return head{}, fmt.Errorf("status line %q: %v", status, err)
	}
	h.header = http.Header{}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return head{}, err
		}
		line = strings.TrimSuffix(line, "\r\n")
		if line == "" {
			break
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok || http.CanonicalHeaderKey(k) != k {
			return head{}, fmt.Errorf("header line %q", line)
		}
		h.header[k] = append(h.header[k], v)
	}
	if method == "HEAD" {
		return h, nil
	}
	if h.header.Get("Transfer-Encoding") == "chunked" {
		for {
			var n int
			line, err := r.ReadString('\n')
			if err != nil {
				return head{}, err
			}
			if _, err := fmt.Sscanf(line, "%x", &n); err != nil {
				return head{}, err
			}
			if _, err := r.Discard(n + 2); err != nil {
				return head{}, err
			}
			if n == 0 {
				return h, nil
			}
		}
	}
	var n int
	if _, err := fmt.Sscanf(h.header.Get("Content-Length"), "%d", &n); err != nil {
		return head{}, fmt.Errorf("no length: %v", err)
	}
	_, err = r.Discard(n)
	return h, err
}

// TestHeaderLinesSplice holds what the connection does with an answer's
// lines: after the final status line, never after an interim one (100
// Continue) nor in body bytes, in what is held or in the write itself, and
// a write's count is of the caller's bytes, the lines apart.
func TestHeaderLinesSplice(t *testing.T) {
	lines := []byte("X-A: 1\r\n")
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
	spliced := "HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 2\r\n\r\n{}"
	for _, tc := range []struct {
		name   string
		hold   bool
		writes []string
		expect string
	}{
		{"unheld", false, []string{string(answer)}, spliced},
		{"held", true, []string{string(answer)}, spliced},
		{"continue first", false, []string{"HTTP/1.1 100 Continue\r\n\r\n", string(answer)},
			"HTTP/1.1 100 Continue\r\n\r\n" + spliced},
		{"no status line: dropped", false, []string{"HTTP/1.1 200 OK", "\r\n\r\n"}, "HTTP/1.1 200 OK\r\n\r\n"},
		{"body bytes: dropped", true, []string{"{}", string(answer)}, "{}" + string(answer)},
	} {
		var out bytes.Buffer
		lc := &limitedConn{Conn: writeConn{&out}, l: newLimiter(LimitOptions{}.withDefaults())}
		if tc.hold {
			lc.hold(true)
		}
		lc.startLines(true, lines)
		for _, w := range tc.writes {
			n, err := lc.Write([]byte(w))
			if err != nil || n != len(w) {
				t.Errorf("%s: Write(%q) = %d, %v", tc.name, w, n, err)
			}
		}
		if err := lc.release(); err != nil {
			t.Errorf("%s: release: %v", tc.name, err)
		}
		if out.String() != tc.expect {
			t.Errorf("%s: sent %q; expect %q", tc.name, out.String(), tc.expect)
		}
		if on, _ := lc.linesFresh(); on {
			t.Errorf("%s: lines still on after the answer", tc.name)
		}
	}

	// A send that fails part way counts what of the caller's bytes left.
	for _, tc := range []struct{ sent, expect int }{{5, 5}, {17, 17}, {20, 17}, {25, 17}, {26, 18}} {
		lc := &limitedConn{Conn: writeConn{&limitWriter{n: tc.sent}}, l: newLimiter(LimitOptions{}.withDefaults())}
		lc.startLines(true, lines)
		if n, err := lc.Write(answer); n != tc.expect || err == nil {
			t.Errorf("%d bytes sent: Write = %d, %v; expect %d and an error", tc.sent, n, err, tc.expect)
		}
	}
}

// TestHeaderLinesRendered holds the lines to what net/http writes for the
// same values, a value's CR and LF included.
func TestHeaderLinesRendered(t *testing.T) {
	f := cache.Freshness{ResourceVersion: " 12\r\nX-Evil: 1\n", LastEvent: time.Date(2026, 11, 28, 0, 1, 2, 3, time.UTC)}
	v := newFreshnessValues(f)
	var expect bytes.Buffer
	http.Header{HeaderResourceVersion: v.resourceVersionValue}.Write(&expect)
	if string(v.resourceVersionLine) != expect.String() {
		t.Errorf("resource version line %q; net/http writes %q", v.resourceVersionLine, expect.String())
	}
	expect.Reset()
	http.Header{HeaderLastEvent: v.lastEventValue}.Write(&expect)
	if string(v.lastEventLine) != expect.String() {
		t.Errorf("last event line %q; net/http writes %q", v.lastEventLine, expect.String())
	}
	for i, l := range stateLines {
		expect.Reset()
		h := http.Header{}
		new(Server).setFreshnessHeader(h, cache.Freshness{Synced: i&1 != 0, Stale: i&2 != 0, WatchConnected: i&4 != 0}, false)
		h.Write(&expect)
		if got := sortedLines(string(l)); got != sortedLines(expect.String()) {
			t.Errorf("state %d: lines %q; net/http writes %q", i, got, expect.String())
		}
	}
}

func sortedLines(s string) string {
	l := strings.SplitAfter(s, "\r\n")
	slices.Sort(l)
	return strings.Join(l, "")
}

// writeConn is a connection that writes to w.
type writeConn struct{ w io.Writer }

func (c writeConn) Write(p []byte) (int, error)    { return c.w.Write(p) }
func (writeConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (writeConn) Close() error                     { return nil }
func (writeConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (writeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (writeConn) SetDeadline(time.Time) error      { return nil }
func (writeConn) SetReadDeadline(time.Time) error  { return nil }
func (writeConn) SetWriteDeadline(time.Time) error { return nil }

// limitWriter takes n bytes, then fails.
type limitWriter struct{ n int }

func (w *limitWriter) Write(p []byte) (int, error) {
	if len(p) <= w.n {
		w.n -= len(p)
		return len(p), nil
	}
	n := w.n
	w.n = 0
	return n, errors.New("closed")
}
