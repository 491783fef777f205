package cache

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
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

// TestListReadIsPacedWatchIsNot: given an API server that sends a list in
// two pieces, when the reader has taken the first (less than half its
// buffer), then it pauses before reading on (the server sends the rest
// only once it has: without the pause the list never ends); and a watch
// on the same client afterwards is never paced, however small its events.
func TestListReadIsPacedWatchIsNot(t *testing.T) {
	var pauses atomic.Int32
	resumed := make(chan struct{})
	var once sync.Once
	sleepAfterShortRead = func(time.Duration) {
		pauses.Add(1)
		once.Do(func() { close(resumed) })
	}
	t.Cleanup(func() { sleepAfterShortRead = time.Sleep })
	defer func(after int64) { paceListsAfter = after }(paceListsAfter)
	paceListsAfter = 0 // this list is small: pace it from its first byte
	pod := func(name string) string {
		return fmt.Sprintf(`{"metadata":{"namespace":"ns","name":%q,"uid":%q,"resourceVersion":"5"}}`, name, name)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			for _, name := range []string{"a", "b", "c"} {
				fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", pod(name))
				w.(http.Flusher).Flush()
				time.Sleep(10 * time.Millisecond)
			}
			<-r.Context().Done()
			return
		}
		fmt.Fprintf(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[%s`, pod("a"))
		w.(http.Flusher).Flush()
		select {
		case <-resumed:
		case <-time.After(10 * time.Second):
			return // the reader never paused: the list is cut short, and fails
		}
		fmt.Fprintf(w, `,%s]}`, pod("b"))
	}))
	defer srv.Close()
	client, err := newAPIClient(&rest.Config{Host: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pods := podsResource
	lw := &listWatch{client: client, res: &pods, shape: Shape{APIVersion: "v1", Kind: "Pod"},
		conn: newConnState(time.Now), listTimeout: time.Minute, idleTimeout: time.Minute}
	l, err := lw.ListWithContext(t.Context(), metav1.ListOptions{})
	if err != nil || len(l.(*objectList).Items) != 2 {
		t.Fatalf("list: %v; want both pods (did the reader pause after the first piece?)", err)
	}
	listed := pauses.Load()

	w, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{ResourceVersion: "5"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for range 3 {
		select {
		case <-w.ResultChan():
		case <-time.After(10 * time.Second):
			t.Fatal("no watch event")
		}
	}
	if got := pauses.Load(); got != listed {
		t.Fatalf("the watch paused %d times; a watch is never paced", got-listed)
	}
}

// TestSmallListIsNotPaced: given a list sent in pieces of which the first
// is short, when the whole list is shorter than paceListsAfter, then the
// reader never pauses; when it is longer, then it does once past it.
func TestSmallListIsNotPaced(t *testing.T) {
	var pauses atomic.Int32
	sleepAfterShortRead = func(time.Duration) { pauses.Add(1) }
	t.Cleanup(func() { sleepAfterShortRead = time.Sleep })
	defer func(after int64) { paceListsAfter = after }(paceListsAfter)
	pod := func(name string) string {
		return fmt.Sprintf(`{"metadata":{"namespace":"ns","name":%q,"uid":%q,"resourceVersion":"5"}}`, name, name)
	}
	const pieces = 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[%s`, pod("p0"))
		for i := 1; i < pieces; i++ {
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond) // each piece a short read
			fmt.Fprintf(w, `,%s`, pod(fmt.Sprintf("p%d", i)))
		}
		fmt.Fprint(w, `]}`)
	}))
	defer srv.Close()
	client, err := newAPIClient(&rest.Config{Host: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pods := podsResource
	lw := &listWatch{client: client, res: &pods, shape: Shape{APIVersion: "v1", Kind: "Pod"},
		conn: newConnState(time.Now), listTimeout: time.Minute, idleTimeout: time.Minute}
	for _, tc := range []struct {
		after  int64
		paused bool
	}{{after: 1 << 20, paused: false}, {after: 512, paused: true}} {
		pauses.Store(0)
		paceListsAfter = tc.after
		l, err := lw.ListWithContext(t.Context(), metav1.ListOptions{})
		if err != nil || len(l.(*objectList).Items) != pieces {
			t.Fatalf("list: %v; want %d pods", err, pieces)
		}
		if got := pauses.Load() > 0; got != tc.paused {
			t.Errorf("a list of about %d bytes paced after %d: paused %d times, want pauses %v", pieces*80, tc.after, pauses.Load(), tc.paused)
		}
	}
}
