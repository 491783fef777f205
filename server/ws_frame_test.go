package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// recordingConn keeps each write apart.
type recordingConn struct {
	net.Conn
	writes    [][]byte
	deadlines int
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

func (c *recordingConn) SetWriteDeadline(time.Time) error {
	c.deadlines++
	return nil
}

// readFrame reads one unmasked frame as a server sends it.
func readFrame(r *bufio.Reader) (header byte, payload []byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	if h[1]&0x80 != 0 {
		return 0, nil, errors.New("a server frame is masked")
	}
	n := uint64(h[1])
	switch n {
	case 126:
		var l [2]byte
		_, err = io.ReadFull(r, l[:])
		n = uint64(binary.BigEndian.Uint16(l[:]))
		if n < 126 {
			return 0, nil, fmt.Errorf("length %d not in its shortest form", n)
		}
	case 127:
		var l [8]byte
		_, err = io.ReadFull(r, l[:])
		n = binary.BigEndian.Uint64(l[:])
		if n <= 0xffff {
			return 0, nil, fmt.Errorf("length %d not in its shortest form", n)
		}
	}
	if err != nil {
		return 0, nil, err
	}
	payload = make([]byte, n)
	_, err = io.ReadFull(r, payload)
	return h[0], payload, err
}

// Messages of every length class go out as final text frames, several per
// write, each write holding whole frames only (gorilla's control frames
// may be written between writes, never inside a frame).
func TestFrameWriterBatchesWholeFrames(t *testing.T) {
	conn := &recordingConn{}
	f := frameWriter{conn: conn, timeout: time.Second}
	tag := []byte(`{"id":"t1",`)
	var want []string
	for _, n := range []int{0, 80, 126, 1000, 0xffff, 0x10000, 200000} {
		m := cache.Message{Type: cache.ResyncRequired, Reason: strings.Repeat("r", n)}
		var tagged bool
		if n == 1000 || n == 200000 {
			tagged = true
			if err := f.add(&m, tag); err != nil {
				t.Fatal(err)
			}
		} else if err := f.add(&m, nil); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		m.WriteTo(&b)
		if tagged {
			want = append(want, string(tag)+b.String()[1:])
		} else {
			want = append(want, b.String())
		}
	}
	if err := f.addRaw([]byte(`{"type":"RAW"}`)); err != nil {
		t.Fatal(err)
	}
	want = append(want, `{"type":"RAW"}`)
	if err := f.flush(); err != nil {
		t.Fatal(err)
	}
	if f.buf != nil {
		t.Error("the batch buffer is kept after flush")
	}
	if len(conn.writes) >= len(want) {
		t.Errorf("%d writes for %d frames: not batched", len(conn.writes), len(want))
	}
	if conn.deadlines != len(conn.writes) {
		t.Errorf("%d deadlines for %d writes; expect one each", conn.deadlines, len(conn.writes))
	}
	var got []string
	for i, w := range conn.writes {
		r := bufio.NewReader(bytes.NewReader(w))
		for {
			if _, err := r.Peek(1); err == io.EOF {
				break
			}
			h, payload, err := readFrame(r)
			if err != nil {
				t.Fatalf("write %d does not hold whole frames: %v", i, err)
			}
			if h != 0x81 {
				t.Errorf("frame header %#x; expect a final text frame", h)
			}
			got = append(got, string(payload))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d frames; expect %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("frame %d: %.80s… (%d bytes); expect %.80s… (%d bytes)", i, got[i], len(got[i]), want[i], len(want[i]))
		}
	}
}

// An object far larger than a batch crosses intact, on the plain and the
// multiplexed socket alike, between smaller events.
func TestLargeObjectsStreamIntact(t *testing.T) {
	ss := startStreams(t, Options{}, cachetest.PodSpec())
	single := dialWS(t, ss.wsURL("/api/v1/pods?watch=true&namespace=big&snapshot=false"), nil)
	mux := dialWS(t, ss.wsURL("/api/v1/stream"), nil)
	if err := mux.WriteMessage(websocket.TextMessage, []byte(`{"op":"subscribe","id":"big","resource":"pods","namespace":"big","snapshot":false}`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*websocket.Conn{single, mux} {
		if _, msg, err := c.ReadMessage(); err != nil || gjson.GetBytes(msg, "type").Str != "SYNCED" {
			t.Fatalf("got %s %v; expect SYNCED", msg, err)
		}
	}
	sizes := []int{100, 300 << 10, 100, 70 << 10, 100}
	for i, n := range sizes {
		pod := fmt.Sprintf(`{"metadata":{"name":"p%d","namespace":"big","annotations":{"pad":%q}},"spec":{"nodeName":"node-1"}}`, i, strings.Repeat("x", n))
		if err := ss.f.Sim.Apply("pods", []byte(pod)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*websocket.Conn{single, mux} {
		for i, n := range sizes {
			c.SetReadDeadline(time.Now().Add(15 * time.Second))
			_, msg, err := c.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			m := gjson.ParseBytes(msg)
			if m.Get("object.metadata.name").Str != fmt.Sprint("p", i) || len(m.Get("object.metadata.annotations.pad").Str) != n {
				t.Fatalf("message %d: %.200s (%d bytes); expect p%d with %d bytes of padding", i, msg, len(msg), i, n)
			}
			if c == mux && m.Get("id").Str != "big" {
				t.Fatalf("message %d on the multiplexed socket has id %q", i, m.Get("id").Str)
			}
		}
	}
}
