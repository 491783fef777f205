package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// subscriber is one WebSocket client of the per-resource watch, counting
// what it receives and timing each churn event from its send stamp.
type subscriber struct {
	conn     *websocket.Conn
	synced   chan struct{}
	frames   atomic.Int64 // ADDED/MODIFIED/DELETED frames
	resyncs  atomic.Int64
	mu       sync.Mutex
	seen     []stamped    // churn events received: send stamp, arrival
	lastSeen atomic.Int64 // unix nanoseconds of the last event frame
	done     chan struct{}
	err      error
}

var (
	stampNeedle  = []byte(`"` + stampKey + `":"`)
	typeSynced   = []byte(`"type":"SYNCED"`)
	typeResync   = []byte(`"type":"RESYNC_REQUIRED"`)
	typeModified = []byte(`"type":"MODIFIED"`)
)

// subscribe opens n sockets on the pods watch, without a snapshot (a
// thousand snapshots of every pod would measure something else), and
// waits until each has its SYNCED marker.
func subscribe(ctx context.Context, base string, n int) ([]*subscriber, error) {
	u := "ws" + strings.TrimPrefix(base, "http") + "/api/v1/pods?watch=true&snapshot=false"
	dialer := &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 16 << 10}
	subs := make([]*subscriber, 0, n)
	for range n {
		conn, resp, err := dialer.DialContext(ctx, u, nil)
		if err != nil {
			closeAll(subs)
			if resp != nil {
				b, _ := io.ReadAll(resp.Body)
				err = fmt.Errorf("%w: %s: %s", err, resp.Status, b)
			}
			return nil, fmt.Errorf("subscriber %d: %w", len(subs), err)
		}
		s := &subscriber{conn: conn, synced: make(chan struct{}), done: make(chan struct{})}
		go s.read()
		subs = append(subs, s)
	}
	deadline := time.After(30 * time.Second)
	for i, s := range subs {
		select {
		case <-s.synced:
		case <-s.done:
			closeAll(subs)
			return nil, fmt.Errorf("subscriber %d ended before SYNCED: %v", i, s.err)
		case <-deadline:
			closeAll(subs)
			return nil, fmt.Errorf("subscriber %d: no SYNCED in 30s", i)
		}
	}
	return subs, nil
}

func (s *subscriber) read() {
	defer close(s.done)
	buf := bytes.NewBuffer(make([]byte, 0, 16<<10))
	syncedOnce := sync.OnceFunc(func() { close(s.synced) })
	for {
		_, r, err := s.conn.NextReader()
		if err != nil {
			s.err = err
			return
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			s.err = err
			return
		}
		now := time.Now()
		msg := buf.Bytes()
		head := msg[:min(len(msg), 48)]
		switch {
		case bytes.Contains(head, typeSynced):
			syncedOnce()
		case bytes.Contains(head, typeResync):
			s.resyncs.Add(1)
		case bytes.Contains(head, typeModified):
			s.frames.Add(1)
			s.lastSeen.Store(now.UnixNano())
			if i := bytes.Index(msg, stampNeedle); i >= 0 {
				rest := msg[i+len(stampNeedle):]
				if j := bytes.IndexByte(rest, '"'); j > 0 {
					if sent, err := strconv.ParseInt(string(rest[:j]), 10, 64); err == nil {
						s.mu.Lock()
						s.seen = append(s.seen, stamped{sent, now.UnixNano()})
						s.mu.Unlock()
					}
				}
			}
		}
	}
}

// ended reports whether the server closed the subscription.
func (s *subscriber) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func closeAll(subs []*subscriber) {
	for _, s := range subs {
		s.conn.Close()
	}
	for _, s := range subs {
		<-s.done
	}
}

// stamped is one churn update as someone saw it: its send stamp (Unix
// nanoseconds, the key) and when it arrived.
type stamped struct{ sent, at int64 }

// fanOut is one round's delivery figures.
type fanOut struct {
	Frames       int64
	FramesPerSec float64
	// From the update's send, before the API server's write, to the
	// client's read.
	P99, P50 time.Duration
	// From the API server's answer to the update (the event exists once
	// the write is committed) to the client's read: the delay that is
	// kubeindex's, not the API server's.
	AckP99, AckP50 time.Duration
	Resyncs        int64
	Expected       int64
}

// collect waits until every subscriber has received `want` more event
// frames than it had at `before` (or until timeout), then sums up. Frames
// per second count from the churn's start to the last frame delivered.
func collect(subs []*subscriber, before []int64, want int64, begin time.Time, timeout time.Duration, acked map[int64]int64) fanOut {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		all := true
		for i, s := range subs {
			if s.frames.Load()-before[i] < want && s.resyncs.Load() == 0 && !s.ended() {
				all = false
				break
			}
		}
		if all {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var out fanOut
	var last int64
	var lat, ack []time.Duration
	for i, s := range subs {
		out.Frames += s.frames.Load() - before[i]
		out.Resyncs += s.resyncs.Load()
		last = max(last, s.lastSeen.Load())
		s.mu.Lock()
		for _, e := range s.seen {
			lat = append(lat, time.Duration(e.at-e.sent))
			if at, ok := acked[e.sent]; ok {
				ack = append(ack, time.Duration(e.at-at))
			}
		}
		s.seen = s.seen[:0]
		s.mu.Unlock()
	}
	out.Expected = want * int64(len(subs))
	if el := time.Unix(0, last).Sub(begin); el > 0 {
		out.FramesPerSec = float64(out.Frames) / el.Seconds()
	}
	slices.Sort(lat)
	slices.Sort(ack)
	out.P50, out.P99 = percentile(lat, 0.50), percentile(lat, 0.99)
	out.AckP50, out.AckP99 = percentile(ack, 0.50), percentile(ack, 0.99)
	return out
}

func frameCounts(subs []*subscriber) []int64 {
	out := make([]int64, len(subs))
	for i, s := range subs {
		out[i] = s.frames.Load()
	}
	return out
}
