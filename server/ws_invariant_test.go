package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// The frame writer's invariant (ARCHITECTURE.md): frameWriter writes on
// the connection beneath gorilla, so gorilla must never write while a batch
// is being written, and no write may split a frame. Both hold because every
// write after the upgrade (batches, and gorilla's pings, pongs and close)
// is made by the one writer goroutine.

// writeLog records, for each write on a server connection, the goroutine
// that made it and its bytes, and whether two writes ever overlapped.
type writeLog struct {
	mu         sync.Mutex
	goroutines []string
	writes     [][]byte
	inWrite    atomic.Int32
	overlapped atomic.Bool
}

// loggedConn is a server connection whose writes go to a writeLog.
type loggedConn struct {
	net.Conn
	log *writeLog
}

func (c loggedConn) Write(p []byte) (int, error) {
	if c.log.inWrite.Add(1) > 1 {
		c.log.overlapped.Store(true)
	}
	defer c.log.inWrite.Add(-1)
	c.log.mu.Lock()
	c.log.goroutines = append(c.log.goroutines, goroutineID())
	c.log.writes = append(c.log.writes, bytes.Clone(p))
	c.log.mu.Unlock()
	return c.Conn.Write(p)
}

// goroutineID is the calling goroutine's number, from its stack header
// ("goroutine 42 [running]:").
func goroutineID() string {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	f := strings.Fields(string(buf[:n]))
	if len(f) < 2 {
		return "?"
	}
	return f[1]
}

// loggingListener gives each accepted connection its own writeLog.
type loggingListener struct {
	net.Listener
	logs chan *writeLog
}

func (l loggingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	wl := &writeLog{}
	l.logs <- wl
	return loggedConn{Conn: c, log: wl}, nil
}

// TestOneGoroutineWritesEachSocket: on a multiplexed socket carrying
// batches of events while both sides ping, every write after the upgrade
// comes from one goroutine, no two writes overlap, and each write holds
// whole frames only: gorilla's control frames land between batches.
func TestOneGoroutineWritesEachSocket(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	s := New(f.Cache, Options{Streams: StreamOptions{PingInterval: 300 * time.Millisecond}})
	hs := httptest.NewUnstartedServer(s.Handler())
	logs := make(chan *writeLog, 1)
	hs.Listener = loggingListener{Listener: hs.Listener, logs: logs}
	hs.Start()
	t.Cleanup(func() {
		s.streams.stop()
		hs.Close()
	})

	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(hs.URL, "http")+"/api/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wl := <-logs
	var serverPings atomic.Int32
	conn.SetPingHandler(func(data string) error {
		serverPings.Add(1)
		return conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	var pongs atomic.Int32
	conn.SetPongHandler(func(string) error { pongs.Add(1); return nil })
	for i := range 3 {
		sub := fmt.Sprintf(`{"op":"subscribe","id":"s%d","resource":"pods","namespace":"inv","snapshot":false}`, i)
		if err := conn.WriteMessage(websocket.TextMessage, []byte(sub)); err != nil {
			t.Fatal(err)
		}
	}

	// Events in batches of several frames, with the client's pings in
	// between, until both sides have pinged and been answered (bounded).
	const events, maxEvents = 300, 20000
	stop := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		pad := strings.Repeat("x", 2000)
		for i := range maxEvents {
			select {
			case <-stop:
				return
			default:
			}
			pod := fmt.Sprintf(`{"metadata":{"name":"p%d","namespace":"inv","annotations":{"pad":%q}},"spec":{"nodeName":"node-1"}}`, i%20, pad)
			if err := f.Sim.Apply("pods", []byte(pod)); err != nil {
				t.Error(err)
				return
			}
			if i%10 == 0 {
				conn.WriteControl(websocket.PingMessage, []byte("client"), time.Now().Add(time.Second))
			}
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	got := 0
	for got < 3*events || serverPings.Load() == 0 || pongs.Load() == 0 {
		conn.SetReadDeadline(deadline)
		_, msg, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("after %d events (%d server pings, %d pongs): %v", got, serverPings.Load(), pongs.Load(), err)
		}
		if bytes.Contains(msg, []byte(`"type":"MODIFIED"`)) || bytes.Contains(msg, []byte(`"type":"ADDED"`)) {
			got++
		}
	}
	close(stop)
	<-produced
	conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	for {
		if _, _, err := conn.ReadMessage(); err != nil {
			break // the server's close frame, or the connection's end
		}
	}

	wl.mu.Lock()
	defer wl.mu.Unlock()
	if wl.overlapped.Load() {
		t.Error("two writes on the socket overlapped")
	}
	if len(wl.writes) < 3 {
		t.Fatalf("%d writes: the test did not exercise the socket", len(wl.writes))
	}
	// The first write is the upgrade's answer, from the handler.
	if !bytes.HasPrefix(wl.writes[0], []byte("HTTP/1.1 101")) {
		t.Fatalf("first write %.40q is not the upgrade's answer", wl.writes[0])
	}
	writer := wl.goroutines[1]
	var kinds = map[byte]int{}
	multiFrame := 0
	for i, w := range wl.writes[1:] {
		if g := wl.goroutines[i+1]; g != writer {
			t.Errorf("write %d (%.20q) from goroutine %s; the writer is %s", i+1, w, g, writer)
		}
		r := bufio.NewReader(bytes.NewReader(w))
		frames := 0
		for {
			if _, err := r.Peek(1); err == io.EOF {
				break
			}
			h, payload, err := readFrame(r)
			if err != nil {
				t.Fatalf("write %d does not hold whole frames: %v", i+1, err)
			}
			if h&0x08 != 0 && (h&0x80 == 0 || len(payload) > 125) {
				t.Errorf("write %d: control frame %#x of %d bytes is fragmented or too long", i+1, h, len(payload))
			}
			kinds[h]++
			frames++
		}
		if frames > 1 {
			multiFrame++
		}
	}
	// Pings (0x89) and pongs (0x8a) from gorilla, text frames (0x81) from
	// frameWriter, several to a write: both writers were exercised.
	if kinds[0x89] == 0 || kinds[0x8a] == 0 || kinds[0x81] == 0 || multiFrame == 0 {
		t.Errorf("frames by header %v, %d writes of several frames; want pings, pongs and batched text frames", kinds, multiFrame)
	}
}
