package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
	lc.hold()
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
	lc.hold()
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
