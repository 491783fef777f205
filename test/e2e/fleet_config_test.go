package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"
)

// southReconfigured: with a stream open on every cluster, south, its
// connection hung, is removed from the configuration file: its streams
// (SSE, a WebSocket and a Kubernetes watch) end saying why, its prefix
// answers 404 and the lists across clusters leave it out, while east's
// and west's streams carry every change without a gap. South is then
// added back: it serves under its prefix and joins the lists, and east's
// and west's streams are still the same, unbroken, ones.
func (f *fleetE2E) southReconfigured(t *testing.T) {
	k := f.k
	south := f.member("south")
	others := f.others("south")
	streams := f.openStreams(t, f.members)
	k8sWatch := openRawWatch(t, k.URL+"/clusters/south"+k8sPrefix+"/api/v1/pods?watch=true")
	ws := openWebSocket(t, k, "/clusters/south/api/v1/stream", `{"op":"subscribe","id":"p","resource":"pods"}`)

	eventually(t, converge, "the WebSocket subscription's snapshot", func() error {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		if ws.messages == 0 || ws.err != nil {
			return fmt.Errorf("%d messages, %v", ws.messages, ws.err)
		}
		return nil
	})

	// An operator removes a broken cluster: south's connection hangs as
	// it is removed, which must not hold the removal up.
	south.px.setHung(true)
	f.writeConfig(t, others...)
	eventually(t, converge, "south gone from the fleet", func() error {
		if names := k.clusterNames(t); !slices.Equal(names, []string{"east", "west"}) {
			return fmt.Errorf("clusters %v; expect east, west", names)
		}
		return nil
	})
	eventually(t, converge, "south's stream ended with the reason", func() error {
		if err := streams["south"].endedWith("was removed from the configuration"); err != nil {
			return err
		}
		if err := k8sWatch.endedWith("was removed from the configuration"); err != nil {
			return err
		}
		return ws.closedWith(websocket.CloseTryAgainLater, "was removed from the configuration")
	})
	for _, path := range []string{"/clusters/south/api/v1/pods", "/clusters/south/k8s/api/v1/pods", "/clusters/south/api/v1/pods?watch=true"} {
		if r := k.get(t, path); r.code != http.StatusNotFound {
			t.Errorf("GET %s once south is removed: %d %.200s; expect 404", path, r.code, r.body)
		}
	}
	churn(t, others, "removed")
	f.streamsFollow(t, others, streams, "the changes made as south was removed")
	fleetUnion(t, k, oraclesOf(others))

	south.px.setHung(false)
	f.writeConfig(t, f.members...)
	f.recovered(t, south)
	eventually(t, converge, "south back in the fleet, in configuration order", func() error {
		if names := k.clusterNames(t); !slices.Equal(names, []string{"east", "west", "south"}) {
			return fmt.Errorf("clusters %v; expect east, west, south", names)
		}
		return nil
	})
	churn(t, f.members, "added")
	f.streamsFollow(t, others, streams, "the changes made after south was added")
	fleetUnion(t, k, f.oracles())
	fleetStatusCounts(t, k, f.apiKubectls(t))
	var fs struct {
		Configuration struct {
			Watched bool
			Reloads int
			Error   string
		}
	}
	if err := k.getJSON("/api/v1/clusters", &fs); err != nil {
		t.Fatal(err)
	}
	if c := fs.Configuration; !c.Watched || c.Reloads != 2 || c.Error != "" {
		t.Errorf("configuration %+v; expect watched, two reloads applied, no error", c)
	}
	// A stream of the added south, as any client opens one.
	added := subscribeSSE(t, k, "/clusters/south/api/v1/pods?watch=true")
	f.streamsFollow(t, []*fleetAPI{south}, map[string]*sseView{"south": added}, "a stream of the added south")
}

// rawWatch is a Kubernetes watch read line by line, as a client-go
// reflector's connection carries it.
type rawWatch struct {
	mu    sync.Mutex
	lines []string
	ended bool
}

// openRawWatch GETs url (a watch=true list) and reads its events until it
// ends or the test does.
func openRawWatch(t *testing.T, url string) *rawWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, res.StatusCode)
	}
	w := &rawWatch{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			w.mu.Unlock()
		}
		w.mu.Lock()
		w.ended = true
		w.mu.Unlock()
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return w
}

// endedWith is nil once the watch has ended with an ERROR event whose
// Status says why.
func (w *rawWatch) endedWith(why string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended || len(w.lines) == 0 {
		return fmt.Errorf("the watch goes on (%d events)", len(w.lines))
	}
	last := w.lines[len(w.lines)-1]
	if !strings.Contains(last, `"type":"ERROR"`) || !strings.Contains(last, why) {
		return stopPolling{fmt.Errorf("the watch ended with %.300s; expect an ERROR saying %q", last, why)}
	}
	return nil
}

// wsStream is a WebSocket stream read until it closes.
type wsStream struct {
	mu       sync.Mutex
	messages int
	err      error // why reading ended
}

// openWebSocket dials path, sends the messages, and reads until the
// socket closes or the test ends.
func openWebSocket(t *testing.T, k *kubeindex, path string, messages ...string) *wsStream {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(k.URL, "http")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range messages {
		if err := conn.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	s := &wsStream{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, _, err := conn.ReadMessage()
			s.mu.Lock()
			if err != nil {
				s.err = err
				s.mu.Unlock()
				return
			}
			s.messages++
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return s
}

// closedWith is nil once the socket was closed with code and a reason
// containing why.
func (s *wsStream) closedWith(code int, why string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		return fmt.Errorf("the socket is open (%d messages)", s.messages)
	}
	var ce *websocket.CloseError
	if !errors.As(s.err, &ce) || ce.Code != code || !strings.Contains(ce.Text, why) {
		return stopPolling{fmt.Errorf("the socket ended with %v; expect close %d saying %q", s.err, code, why)}
	}
	return nil
}
