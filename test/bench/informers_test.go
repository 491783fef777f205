package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestInformersRecordFailedLists: a server that resets every list in the
// middle of its body, as the API server does when a list outlives its
// request timeout, is recorded (which informers failed, how often, why)
// and the informers keep trying, as client-go's do; nothing aborts.
func TestInformersRecordFailedLists(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"a","namespace":"n","resourceVersion":"5"}},`))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	s, err := startInformerSet(ctx, plainClient, srv.URL, modeList, 3)
	defer func() { cancel(); s.done.Wait() }()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		informers, requests, reasons := s.fail.summary()
		if informers == 3 && requests >= 3 {
			if !strings.Contains(reasons, `list: after N items: unexpected EOF`) {
				t.Errorf("reasons: %s", reasons)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: %d informers, %d requests failed (%s)", informers, requests, reasons)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := len(s.syncedNow()); got != 0 {
		t.Errorf("%d informers synced from a list that never ended", got)
	}
	if got := s.lists.Load(); got < 3 {
		t.Errorf("%d lists asked, want at least 3", got)
	}
}
