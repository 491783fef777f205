package server

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// The writer pings the peer every interval, answers the peer's pings, and
// a peer that stops answering is disconnected; events flow meanwhile.
func TestWebSocketPingsAndPongs(t *testing.T) {
	ss := startStreams(t, Options{Streams: StreamOptions{PingInterval: 500 * time.Millisecond}}, cachetest.PodSpec())

	conn := dialWS(t, ss.wsURL("/api/v1/pods?watch=true&snapshot=false"), nil)
	var pings, events atomic.Int64
	pong := make(chan string, 1)
	conn.SetPingHandler(func(data string) error {
		pings.Add(1)
		return conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	conn.SetPongHandler(func(data string) error {
		pong <- data
		return nil
	})
	go func() {
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
			events.Add(1)
		}
	}()
	if err := conn.WriteControl(websocket.PingMessage, []byte("are you there"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case data := <-pong:
		if data != "are you there" {
			t.Errorf("pong %q; expect the ping's data", data)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no pong")
	}
	// The subscription may join after the upgrade's answer, and it asked
	// for no snapshot: churn until its events come, not once before.
	cachetest.Eventually(t, "the server pings, and events flow", func() bool {
		if events.Load() < 2 {
			churn(t, ss, 1)
		}
		return pings.Load() >= 3 && events.Load() >= 2
	})

	silent := dialWS(t, ss.wsURL("/api/v1/pods?watch=true&snapshot=false"), nil)
	silent.SetPingHandler(func(string) error { return nil }) // never answers
	ended := make(chan error, 1)
	go func() {
		for {
			if _, _, err := silent.ReadMessage(); err != nil {
				ended <- err
				return
			}
		}
	}()
	select {
	case <-ended:
	case <-time.After(15 * time.Second):
		t.Fatal("a peer that answers no ping stays connected")
	}
	before := events.Load()
	churn(t, ss, 3)
	cachetest.Eventually(t, "the answering peer stays connected", func() bool { return events.Load() > before })
}
