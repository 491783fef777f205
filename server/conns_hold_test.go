package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// writeSizes is a connection that records each write it is asked for.
type writeSizes struct {
	net.Conn
	mu     *sync.Mutex
	writes *[]int
	fail   error
}

func (w writeSizes) Write(p []byte) (int, error) {
	w.mu.Lock()
	*w.writes = append(*w.writes, len(p))
	w.mu.Unlock()
	if w.fail != nil {
		return 0, w.fail
	}
	return w.Conn.Write(p)
}

// SendBuffers records a vectored send as one write, as writev makes it.
func (w writeSizes) SendBuffers(bufs *net.Buffers) (int64, error) {
	n := 0
	for _, b := range *bufs {
		n += len(b)
	}
	w.mu.Lock()
	*w.writes = append(*w.writes, n)
	w.mu.Unlock()
	if w.fail != nil {
		return 0, w.fail
	}
	return bufs.WriteTo(w.Conn)
}

type writeSizesListener struct {
	net.Listener
	mu     sync.Mutex
	writes []int
}

func (l *writeSizesListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return writeSizes{Conn: c, mu: &l.mu, writes: &l.writes}, nil
}

// since returns the sizes of the writes from the n-th on, and how many
// there are in all.
func (l *writeSizesListener) since(n int) ([]int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.writes[n:]...), len(l.writes)
}

// An answer of known length leaves in one write however many bytes it has
// beyond net/http's 4 KiB buffer (which splits it in two otherwise), and a
// long answer arrives whole and in order.
func TestAnswerLeavesInOneWrite(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	pod := podOnThePodNetwork(t, f.Cache)
	ip := gjson.GetBytes(pod.Raw(), "status.podIP").Str
	var ll *writeSizesListener
	_, addr := serveRealOn(t, f.Cache, Options{}, func(ln net.Listener) net.Listener {
		ll = &writeSizesListener{Listener: ln}
		return ll
	})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	get := func(target string) (*http.Response, []byte) {
		t.Helper()
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", target)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: reading the body: %v", target, err)
		}
		return resp, body
	}
	seen := 0
	for _, tc := range []struct{ name, target string }{
		{"an IP's owners", "/api/v1/ip/" + ip},
		{"a pod", "/api/v1/pods/" + pod.Key()},
		{"a refusal", "/api/v1/ip/not-an-address"},
		{"a short list", "/api/v1/pods?limit=2"},
	} {
		resp, body := get(tc.target)
		var writes []int
		writes, seen = ll.since(seen)
		if tc.name != "a refusal" && len(body) <= 4096 {
			t.Fatalf("%s: %d bytes; the test needs an answer beyond net/http's 4 KiB buffer", tc.name, len(body))
		}
		if len(writes) != 1 {
			t.Errorf("%s (%s, %d bytes of body): %d writes %v, want one", tc.name, resp.Status, len(body), len(writes), writes)
		}
	}

	resp, body := get("/api/v1/pods")
	if resp.StatusCode != http.StatusOK || len(body) < 4*maxHeld {
		t.Fatalf("the whole list: %s, %d bytes; want 200 and more than %d", resp.Status, len(body), 4*maxHeld)
	}
	items := gjson.GetBytes(body, "items")
	st, err := f.Cache.ResourceStatus("pods")
	if err != nil {
		t.Fatal(err)
	}
	if want := int(st.Count); !gjson.ValidBytes(body) || len(items.Array()) != want {
		t.Errorf("the whole list arrived with %d items (valid JSON: %v), want %d", len(items.Array()), gjson.ValidBytes(body), want)
	}
}

// Held writes go out in order: a write that would pass maxHeld leaves with
// what was held, holding goes on, and release sends the rest. A failed
// send is kept: every later write fails with it.
func TestHeldWritesKeepTheirOrderAndTheirError(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	var mu sync.Mutex
	var writes []int
	lc := &limitedConn{Conn: writeSizes{Conn: server, mu: &mu, writes: &writes}, l: newLimiter(LimitOptions{}.withDefaults()), addr: "pipe"}
	got := make(chan []byte)
	go func() { b, _ := io.ReadAll(client); got <- b }()

	parts := [][]byte{
		bytes.Repeat([]byte("a"), 10<<10),
		bytes.Repeat([]byte("b"), maxHeld-1), // passes maxHeld with the first
		bytes.Repeat([]byte("c"), 1<<10),
	}
	lc.hold(true)
	for i, p := range parts {
		if n, err := lc.Write(p); n != len(p) || err != nil {
			t.Fatalf("write %d: %d, %v; want %d, nil", i, n, err, len(p))
		}
	}
	mu.Lock()
	if len(writes) == 0 {
		t.Errorf("nothing sent when the held bytes passed %d", maxHeld)
	}
	mu.Unlock()
	if err := lc.release(); err != nil {
		t.Fatal(err)
	}
	lc.Conn.Close()
	if want := bytes.Join(parts, nil); !bytes.Equal(<-got, want) {
		t.Error("the bytes arrived changed or out of order")
	}

	broken := errors.New("connection reset")
	lc = &limitedConn{Conn: writeSizes{Conn: server, mu: &mu, writes: &writes, fail: broken}, l: lc.l, addr: "pipe"}
	lc.hold(true)
	if _, err := lc.Write([]byte("HTTP/1.1 200 OK\r\n")); err != nil {
		t.Fatalf("a held write failed: %v", err)
	}
	if err := lc.release(); !errors.Is(err, broken) {
		t.Errorf("release: %v, want %v", err, broken)
	}
	if _, err := lc.Write([]byte("more")); !errors.Is(err, broken) || !strings.Contains(fmt.Sprint(err), "reset") {
		t.Errorf("a write after a failed send: %v, want %v", err, broken)
	}
}

// A body lent to a held connection is sent by reference after what was
// held, in the same write; bytes written after it leave after it, in
// order; a write of equal but other bytes is copied; and nothing lent
// outlives its answer.
func TestLentBodyLeavesAfterTheHeldBytes(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	var mu sync.Mutex
	var writes []int
	lc := &limitedConn{Conn: writeSizes{Conn: server, mu: &mu, writes: &writes}, l: newLimiter(LimitOptions{}.withDefaults()), addr: "pipe"}
	got := make(chan []byte)
	go func() { b, _ := io.ReadAll(client); got <- b }()

	head, body, tail := []byte("HTTP/1.1 200 OK\r\n\r\n"), bytes.Repeat([]byte("b"), 6<<10), []byte("after")
	write := func(p []byte) {
		t.Helper()
		if n, err := lc.Write(p); n != len(p) || err != nil {
			t.Fatalf("write: %d, %v; want %d, nil", n, err, len(p))
		}
	}
	lc.hold(true)
	write(head)
	lc.lend(body, nil)
	write(body)
	if lc.kept == nil {
		t.Fatal("the lent body was copied, not kept")
	}
	if err := lc.release(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(writes) != 1 || writes[0] != len(head)+len(body) {
		t.Errorf("writes %v; want one of %d bytes", writes, len(head)+len(body))
	}
	writes = writes[:0]
	mu.Unlock()

	lc.hold(true)
	write(head)
	lc.lend(body, nil)
	write(bytes.Clone(body)) // equal bytes, another array: copied
	if lc.kept != nil {
		t.Error("a copy of the lent bytes was kept by reference")
	}
	lc.lend(body, nil)
	write(body)
	write(tail) // after a kept body: the held bytes and the body leave first
	if err := lc.release(); err != nil {
		t.Fatal(err)
	}
	if lc.lent != nil || lc.kept != nil {
		t.Error("a lent body outlived its answer")
	}
	lc.hold(true)
	if !lc.lend(body, nil) { // lent, never written (a HEAD answer): forgotten at release
		t.Fatal("a holding connection declined a loan")
	}
	if err := lc.release(); err != nil || lc.lent != nil {
		t.Errorf("release after an unwritten loan: %v, lent kept: %v", err, lc.lent != nil)
	}
	pooled := answerBuffers.Get().(*[]byte)
	*pooled = append((*pooled)[:0], body...)
	lc.hold(true)
	write(head)
	lc.lend(*pooled, pooled)
	write(*pooled)
	if lc.keptPool != pooled {
		t.Error("the connection does not own the pooled body it kept")
	}
	if err := lc.release(); err != nil || lc.keptPool != nil || lc.lentPool != nil {
		t.Errorf("release of a pooled body: %v; still owned: %v", err, lc.keptPool != nil || lc.lentPool != nil)
	}
	if lc.lend(*pooled, pooled) {
		t.Error("a connection that holds nothing accepted a loan: its buffer could be reused while written")
	}
	lc.Conn.Close()
	want := bytes.Join([][]byte{head, body, head, body, body, tail, head, body}, nil)
	if !bytes.Equal(<-got, want) {
		t.Error("the bytes arrived changed or out of order")
	}
}

// An answer lent in pieces leaves as its pieces after what was held, in
// one write, in place of the marker net/http passed; the marker's own
// bytes never leave: a copy of it, or a write before it, fails the
// connection, and a connection under TLS or an answer short enough for
// net/http to copy is declined.
func TestPiecesLeaveInPlaceOfTheMarker(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	var mu sync.Mutex
	var writes []int
	lc := &limitedConn{Conn: writeSizes{Conn: server, mu: &mu, writes: &writes}, l: newLimiter(LimitOptions{}.withDefaults()), addr: "pipe"}
	got := make(chan []byte)
	go func() { b, _ := io.ReadAll(client); got <- b }()

	head := []byte("HTTP/1.1 200 OK\r\n\r\n")
	a, b := bytes.Repeat([]byte("a"), 3<<10), bytes.Repeat([]byte("b"), 3<<10)
	pieces := func() *[][]byte { p := [][]byte{nil, a, b, a}; return &p }
	n := 3 * len(a)
	lc.hold(true)
	if _, err := lc.Write(head); err != nil {
		t.Fatal(err)
	}
	marker := lc.lendPieces(n, pieces())
	if marker == nil {
		t.Fatal("a plain held connection declined an answer in pieces")
	}
	if w, err := lc.Write(marker); w != n || err != nil {
		t.Fatalf("write of the marker: %d, %v", w, err)
	}
	if err := lc.release(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(writes) != 1 || writes[0] != len(head)+n {
		t.Errorf("writes %v; want one of %d bytes", writes, len(head)+n)
	}
	mu.Unlock()

	for name, p := range map[string]func(m []byte) []byte{
		"a copy of the marker":     bytes.Clone,
		"a part of the marker":     func(m []byte) []byte { return m[:len(m)/2] },
		"other bytes before it":    func([]byte) []byte { return []byte("x") },
		"the marker without loans": nil,
	} {
		c := &limitedConn{Conn: writeSizes{Conn: server, mu: &mu, writes: &writes}, l: lc.l, addr: "pipe"}
		c.hold(true)
		m := pieceMarker[:n]
		if p != nil {
			m = p(c.lendPieces(n, pieces()))
		}
		if _, err := c.Write(m); !errors.Is(err, errMarkerCopied) {
			t.Errorf("%s: write %v, want %v", name, err, errMarkerCopied)
		}
		c.release()
	}
	tlsConn := &limitedConn{Conn: server, l: lc.l, addr: "pipe"}
	tlsConn.hold(false)
	if tlsConn.lendPieces(n, pieces()) != nil {
		t.Error("a connection under TLS took an answer in pieces: TLS would encrypt the marker")
	}
	tlsConn.release()
	lc.hold(true)
	if lc.lendPieces(minPiecesLoan-1, pieces()) != nil {
		t.Error("an answer net/http copies into its buffers was lent in pieces")
	}
	lc.release()
	server.Close()
	if want := append(append(append(slices.Clone(head), a...), b...), a...); !bytes.Equal(<-got, want) {
		t.Error("the bytes arrived changed, or the marker's own bytes left")
	}
}
