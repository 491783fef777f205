package fakeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/demo/scenario"
)

// fixedClock makes generated objects byte-identical across runs.
func fixedClock() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

// testCluster is a server holding a generated scenario, with the test
// controls.
type testCluster struct {
	*Server
	TestControls
	sc *scenario.Scenario
}

// newCluster returns a small deterministic cluster: the scenario of
// opts.Seed, with a fixed clock unless opts has one.
func newCluster(t *testing.T, opts Options) *testCluster {
	t.Helper()
	if opts.Now == nil {
		opts.Now = fixedClock
	}
	s := New(opts)
	sc, err := scenario.New(scenario.Options{Seed: opts.Seed, Now: opts.Now}, s)
	if err != nil {
		t.Fatal(err)
	}
	s.ForgetHistory()
	return &testCluster{Server: s, TestControls: Controls(s), sc: sc}
}

// newTestCluster returns newCluster served over HTTP.
func newTestCluster(t *testing.T, opts Options) (*testCluster, *httptest.Server) {
	t.Helper()
	c := newCluster(t, opts)
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return c, srv
}

// Apply writes an object, as tests outside this package do.
func (c *testCluster) Apply(resource string, obj []byte) error {
	_, err := c.Put(resource, obj)
	return err
}

// Step makes one churn step; a failure is a bug in the scenario.
func (c *testCluster) Step() {
	if err := c.sc.Step(); err != nil {
		panic(err)
	}
}

// run makes a churn step every interval until ctx is done.
func (c *testCluster) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.Step()
		}
	}
}

// get fetches a URL and returns the status code and body.
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return resp.StatusCode, body
}

// mustGet fetches a URL that must answer 200.
func mustGet(t *testing.T, url string) []byte {
	t.Helper()
	code, body := get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	return body
}

// wevent is one decoded watch event.
type wevent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

func (e wevent) name() string { return gjson.GetBytes(e.Object, "metadata.name").Str }
func (e wevent) rv() string   { return gjson.GetBytes(e.Object, "metadata.resourceVersion").Str }

// watchStream reads a watch response in the background.
type watchStream struct {
	events chan wevent
	cancel context.CancelFunc
}

// openWatch starts a watch request; the stream is closed at cleanup.
func openWatch(t *testing.T, url string) *watchStream {
	t.Helper()
	w, err := startWatch(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.cancel)
	return w
}

// startWatch starts a watch request; it may be called from any goroutine.
// The caller cancels it.
func startWatch(url string) (*watchStream, error) {
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("watch %s: status %d", url, resp.StatusCode)
	}
	w := &watchStream{events: make(chan wevent, 10000), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		defer close(w.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var e wevent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				e = wevent{Type: "UNDECODABLE", Object: json.RawMessage(`{}`)}
			}
			w.events <- e
		}
	}()
	return w, nil
}

// next returns the next event, or fails after a deadline. ok is false when
// the stream ended.
func (w *watchStream) next(t *testing.T) (wevent, bool) {
	t.Helper()
	select {
	case e, ok := <-w.events:
		return e, ok
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event within 5s")
		return wevent{}, false
	}
}

// collect reads exactly n events.
func (w *watchStream) collect(t *testing.T, n int) []wevent {
	t.Helper()
	var out []wevent
	for len(out) < n {
		e, ok := w.next(t)
		if !ok {
			t.Fatalf("stream ended after %d of %d events", len(out), n)
		}
		out = append(out, e)
	}
	return out
}

// quiet asserts that no event but a bookmark arrives for a short while.
func (w *watchStream) quiet(t *testing.T) {
	t.Helper()
	deadline := time.After(150 * time.Millisecond)
	for {
		select {
		case e, ok := <-w.events:
			if ok && e.Type != "BOOKMARK" {
				t.Fatalf("unexpected event %s %s", e.Type, e.Object)
			}
			if !ok {
				return
			}
		case <-deadline:
			return
		}
	}
}

// ended waits for the stream to end, skipping events.
func (w *watchStream) ended(t *testing.T) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-w.events:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch stream still open after 5s")
		}
	}
}

// listRV lists a collection and returns its resourceVersion.
func listRV(t *testing.T, url string) string {
	t.Helper()
	return gjson.GetBytes(mustGet(t, url), "metadata.resourceVersion").Str
}

func podJSON(ns, name string, labels map[string]string) []byte {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"namespace": ns, "name": name, "labels": labels},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}},
	})
	return b
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// mustResource returns a resource this package serves.
func mustResource(plural string) *resource {
	r, err := resourceByName(plural)
	if err != nil {
		panic(err)
	}
	return r
}
