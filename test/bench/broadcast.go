package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Broadcaster is the fan-out ceiling's comparison: the smallest correct
// gorilla/websocket server that sends a watch's events to every client. It
// follows the pods watch of an API server (the fake source) and sends each
// event as kubeindex's stream frames it, {"type","resourceVersion","object"},
// to every socket: one PreparedMessage per event (encoded once), one writer
// goroutine per connection draining a bounded queue, and a client that
// lets its queue fill is disconnected rather than waited for. Every socket
// first gets {"type":"SYNCED"}, so that the same clients read both servers.
type Broadcaster struct {
	mu      sync.Mutex
	conns   map[*bcConn]struct{}
	Dropped atomic.Int64 // clients disconnected for a full queue
}

// bcQueue is a connection's queue of events, kubeindex's default too
// (cache.DefaultQueueSize).
const bcQueue = 1024

type bcConn struct {
	ws   *websocket.Conn
	out  chan *websocket.PreparedMessage
	gone chan struct{}
	once sync.Once
}

func (c *bcConn) close() { c.once.Do(func() { close(c.gone); c.ws.Close() }) }

var bcSynced = []byte(`{"type":"SYNCED"}`)

// NewBroadcaster returns a broadcaster with no client.
func NewBroadcaster() *Broadcaster { return &Broadcaster{conns: map[*bcConn]struct{}{}} }

// ServeHTTP upgrades any request to a WebSocket subscribed to every event.
func (b *Broadcaster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{ReadBufferSize: 512, WriteBufferSize: 16 << 10, CheckOrigin: func(*http.Request) bool { return true }}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(4 << 10)
	c := &bcConn{ws: ws, out: make(chan *websocket.PreparedMessage, bcQueue), gone: make(chan struct{})}
	b.mu.Lock()
	b.conns[c] = struct{}{}
	b.mu.Unlock()
	go b.write(c)
	go func() { // the reader: control frames, and noticing the client leave
		defer b.remove(c)
		for {
			if _, _, err := ws.NextReader(); err != nil {
				return
			}
		}
	}()
}

func (b *Broadcaster) remove(c *bcConn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	c.close()
}

// write is the connection's only writer.
func (b *Broadcaster) write(c *bcConn) {
	defer b.remove(c)
	c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := c.ws.WriteMessage(websocket.TextMessage, bcSynced); err != nil {
		return
	}
	for {
		select {
		case <-c.gone:
			return
		case m := <-c.out:
			c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if err := c.ws.WritePreparedMessage(m); err != nil {
				return
			}
		}
	}
}

// publish hands one frame to every client without waiting for any.
func (b *Broadcaster) publish(frame []byte) error {
	m, err := websocket.NewPreparedMessage(websocket.TextMessage, frame)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.conns {
		select {
		case c.out <- m:
		default:
			b.Dropped.Add(1)
			delete(b.conns, c)
			c.close()
		}
	}
	return nil
}

var (
	watchHead = []byte(`{"type":"`)
	watchObj  = []byte(`","object":`)
	rvKey     = []byte(`"resourceVersion":"`)
)

// Follow watches source's pods and publishes each event until the watch
// ends. It calls opened once the watch is established. The watch is the API server's JSON lines,
// {"type":T,"object":OBJ}; OBJ's first "resourceVersion" is its metadata's
// (metadata precedes spec and status, and no earlier member has one).
func (b *Broadcaster) Follow(ctx context.Context, source string, opened func()) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, source+"/api/v1/pods?watch=true", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("watch: %s", resp.Status)
	}
	opened()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var frame []byte // reused: NewPreparedMessage copies it
	for sc.Scan() {
		line := sc.Bytes()
		rest, ok := bytes.CutPrefix(line, watchHead)
		typ, obj, ok2 := bytes.Cut(rest, watchObj)
		if !ok || !ok2 || len(obj) < 2 {
			return fmt.Errorf("watch: malformed event %.80q", line)
		}
		obj = obj[:len(obj)-1] // the event's closing brace
		if string(typ) == "BOOKMARK" {
			continue
		}
		var rv []byte
		if i := bytes.Index(obj, rvKey); i >= 0 {
			rv = obj[i+len(rvKey):]
			rv = rv[:max(0, bytes.IndexByte(rv, '"'))]
		}
		frame = append(frame[:0], watchHead...)
		frame = append(frame, typ...)
		frame = append(frame, `","resourceVersion":"`...)
		frame = append(frame, rv...)
		frame = append(frame, watchObj...)
		frame = append(frame, obj...)
		frame = append(frame, '}')
		if err := b.publish(frame); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("watch ended")
}
