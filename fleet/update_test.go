package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/server"
)

// sseStream reads an event stream's events (event and data lines joined)
// on its own goroutine; events is closed when the stream ends.
type sseStream struct {
	events chan string
	cancel context.CancelFunc
}

func openStream(t *testing.T, url string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("stream %s: %s", url, resp.Status)
	}
	s := &sseStream{events: make(chan string, 1<<14), cancel: cancel}
	t.Cleanup(cancel)
	go func() {
		defer close(s.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		var ev strings.Builder
		for sc.Scan() {
			if sc.Text() == "" {
				s.events <- ev.String()
				ev.Reset()
				continue
			}
			ev.WriteString(sc.Text() + "\n")
		}
	}()
	return s
}

// waitFor reads events until one contains want; false if the stream ended
// first.
func (s *sseStream) waitFor(t *testing.T, want string) (last string, ok bool) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, open := <-s.events:
			if !open {
				return last, false
			}
			last = ev
			if strings.Contains(ev, want) {
				return ev, true
			}
		case <-timeout:
			t.Fatalf("no event with %q within 20s", want)
		}
	}
}

func podJSON(name string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"default","labels":{"app":"probe"}},`+
		`"spec":{"nodeName":"node-1","containers":[{"name":"c","image":"probe:1"}]},"status":{"phase":"Running","podIP":"10.99.0.1"}}`, name)
}

// TestUpdateChangesOnlyWhatChanged: a cluster added starts, one whose
// configuration changed restarts (its streams end saying so), one removed
// stops (its streams end saying so, its path is unknown), and an
// unchanged cluster keeps its cache and its open stream throughout. An
// invalid update changes nothing.
func TestUpdateChangesOnlyWhatChanged(t *testing.T) {
	east, west, north := newSimulated(t, 1), newSimulated(t, 2), newSimulated(t, 3)
	shared := server.NewShared(server.LimitOptions{}, server.StreamOptions{})
	cluster := func(name, version string, sim *simulated) Cluster {
		return Cluster{Name: name, Version: version, Connect: connectTo(sim.srv.URL, name, shared)}
	}
	f, err := New([]Cluster{cluster("east", "1", east), cluster("west", "1", west)},
		Options{Logger: quiet(), RetryInitial: 50 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	front := server.New(noReader(t), server.Options{Clusters: f, Shared: shared, Logger: quiet()})
	hs := httptest.NewServer(front.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done; hs.Close() })
	synced := func(name string) func() bool {
		return func() bool { return stateOf(f, name).State == server.ClusterSynced }
	}
	eventually(t, "east synced", synced("east"))
	eventually(t, "west synced", synced("west"))
	eastCache := f.Reader("east")
	eastStream := openStream(t, hs.URL+"/clusters/east/api/v1/pods?watch=true")
	westStream := openStream(t, hs.URL+"/clusters/west/api/v1/pods?watch=true")

	// west changes, north is added, east stays.
	ch, err := f.Update([]Cluster{cluster("east", "1", east), cluster("west", "2", west), cluster("north", "1", north)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ch.Added, []string{"north"}) || !slices.Equal(ch.Restarted, []string{"west"}) || len(ch.Removed) != 0 {
		t.Errorf("changes %+v; expect north added, west restarted", ch)
	}
	if last, ok := westStream.waitFor(t, "restarts with a changed configuration"); !ok || !strings.Contains(last, "ERROR") {
		t.Errorf("west's stream ended with %q; expect an ERROR saying it restarts", last)
	}
	eventually(t, "north synced", synced("north"))
	eventually(t, "west synced again", synced("west"))
	if !slices.Equal(f.Names(), []string{"east", "west", "north"}) {
		t.Errorf("names %v", f.Names())
	}

	// west is removed.
	westStream = openStream(t, hs.URL+"/clusters/west/api/v1/pods?watch=true")
	if ch, err = f.Update([]Cluster{cluster("east", "1", east), cluster("north", "1", north)}); err != nil || !slices.Equal(ch.Removed, []string{"west"}) {
		t.Errorf("removing west: %+v %v", ch, err)
	}
	if last, ok := westStream.waitFor(t, "removed from the configuration"); !ok || !strings.Contains(last, "ERROR") {
		t.Errorf("west's stream ended with %q; expect an ERROR saying it was removed", last)
	}
	if code, body := get(t, hs.Config.Handler, "/clusters/west/api/v1/pods"); code != 404 {
		t.Errorf("a removed cluster: %d %.200s; expect 404", code, body)
	}

	// Refused: nothing changes.
	for name, bad := range map[string][]Cluster{
		"no cluster":    nil,
		"a name twice":  {cluster("east", "2", east), cluster("east", "3", east)},
		"a bad name":    {cluster("Bad_Name", "1", east)},
		"no connection": {{Name: "south", Version: "1"}},
	} {
		if _, err := f.Update(bad); err == nil {
			t.Errorf("%s: the update was applied", name)
		}
	}
	if !slices.Equal(f.Names(), []string{"east", "north"}) || stateOf(f, "east").State != server.ClusterSynced {
		t.Errorf("after refused updates: %v %+v", f.Names(), f.States())
	}

	// east was never disturbed: the same cache, and its stream, opened
	// before every update, still follows changes.
	if f.Reader("east") != eastCache {
		t.Error("east's cache was rebuilt")
	}
	if err := east.sim.Apply("pods", podJSON("after-the-updates")); err != nil {
		t.Fatal(err)
	}
	if last, ok := eastStream.waitFor(t, "after-the-updates"); !ok {
		t.Errorf("east's stream ended: %q", last)
	}
	var list struct{ Clusters []server.ClusterState }
	_, body := get(t, hs.Config.Handler, "/api/v1/clusters")
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Clusters) != 2 {
		t.Errorf("/api/v1/clusters: %s %v", body, err)
	}
}
