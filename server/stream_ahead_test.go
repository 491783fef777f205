package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// waitSignal is a Reader that says when a stream starts waiting for a
// position.
type waitSignal struct {
	Reader
	once    sync.Once
	waiting chan struct{}
}

func (w *waitSignal) WaitPosition(ctx context.Context, resource string, rv uint64) (uint64, bool, error) {
	w.once.Do(func() { close(w.waiting) })
	return w.Reader.WaitPosition(ctx, resource, rv)
}

// A client that switches replicas resumes from a position the new one may
// not have reached: positions are the API server's resourceVersions, and
// the other replica got the event a moment earlier. The stream waits for
// the position and then resumes without a gap or a repeat, instead of
// telling the client to resync.
func TestResumeFromAPositionAheadWaitsForIt(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	r := &waitSignal{Reader: f.Cache, waiting: make(chan struct{})}
	s := New(r, Options{})
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.streams.stop()
		hs.Close()
	})
	ss := &streamServer{f: f, s: s, url: hs.URL}

	steady := openSSE(t, ss.url+"/api/v1/pods?watch=true&snapshot=false", nil)
	ev, _ := steady.next(t)
	at, err := strconv.ParseUint(ev.id, 10, 64)
	if ev.event != "SYNCED" || err != nil {
		t.Fatalf("first event %+v; expect SYNCED with a position", ev)
	}
	ahead := at + 3 // what another replica sends three changes later

	resumed := make(chan *sseClient, 1)
	go func() {
		resumed <- openSSE(t, ss.url+"/api/v1/pods?watch=true", http.Header{"Last-Event-ID": {strconv.FormatUint(ahead, 10)}})
	}()
	select {
	case <-r.waiting:
	case c := <-resumed:
		ev, _ := c.next(t)
		t.Fatalf("the resume from %d, ahead of %d, was answered at once with %s: it did not wait", ahead, at, ev.event)
	}
	churn(t, ss, 20)
	c := <-resumed
	if c.resp.StatusCode != http.StatusOK {
		t.Fatalf("resume: %d", c.resp.StatusCode)
	}

	// Exactly the steady stream's events after the position, in order.
	var want, got []string
	for len(want) < 5 {
		ev, ok := steady.next(t)
		if !ok {
			t.Fatal("the steady stream ended")
		}
		if rv, _ := strconv.ParseUint(ev.id, 10, 64); ev.event != "BOOKMARK" && rv > ahead {
			want = append(want, ev.event+" "+ev.id+" "+ev.data)
		}
	}
	// The replay comes first, then SYNCED, then live events: read until
	// both SYNCED and as many events as the steady stream gave.
	synced := false
	for !synced || len(got) < len(want) {
		ev, ok := c.next(t)
		switch {
		case !ok:
			t.Fatalf("the resumed stream ended after %d events", len(got))
		case ev.event == "SYNCED":
			synced = true
		case ev.event != "BOOKMARK":
			got = append(got, ev.event+" "+ev.id+" "+ev.data)
		}
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d after %d:\n got %.200s\nwant %.200s", i, ahead, got[i], want[i])
		}
	}
}
