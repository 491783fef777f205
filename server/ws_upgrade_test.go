package server

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// A client may send its first message right behind the upgrade request,
// before the answer: the server has then read it into the HTTP buffer it
// takes over, which must not be released before gorilla reads it.
func TestMessageSentWithTheUpgradeRequestIsRead(t *testing.T) {
	ss := startStreams(t, Options{}, cachetest.PodSpec())
	conn, err := net.Dial("tcp", strings.TrimPrefix(ss.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	msg := []byte(`{"op":"subscribe","id":"early","resource":"pods","snapshot":false}`)
	mask := [4]byte{1, 2, 3, 4}
	frame := append([]byte{0x81, 0x80 | byte(len(msg))}, mask[:]...)
	for i, b := range msg {
		frame = append(frame, b^mask[i%4])
	}
	req := "GET /api/v1/stream HTTP/1.1\r\nHost: " + conn.RemoteAddr().String() + "\r\n" +
		"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	if _, err := conn.Write(append([]byte(req), frame...)); err != nil { // one write: one segment
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	_, payload, err := readFrame(r)
	if err != nil {
		t.Fatal(err)
	}
	if m := gjson.ParseBytes(payload); m.Get("id").Str != "early" || m.Get("type").Str != "SYNCED" {
		t.Errorf("first message %s; expect the early subscription's SYNCED", payload)
	}
}
