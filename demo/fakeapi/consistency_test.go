package fakeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// collections are the URLs of every served collection.
var collections = map[string]string{
	Namespaces: "/api/v1/namespaces", Nodes: "/api/v1/nodes", Pods: "/api/v1/pods",
	Services: "/api/v1/services", Deployments: "/apis/apps/v1/deployments", ReplicaSets: "/apis/apps/v1/replicasets",
}

// canonical drops apiVersion and kind, which list items lack and watch
// events carry, so both compare to Objects.
func canonical(raw []byte) string {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return "undecodable: " + string(raw)
	}
	delete(m, "apiVersion")
	delete(m, "kind")
	b, _ := json.Marshal(m)
	return string(b)
}

func keyOf(raw []byte) string {
	md := gjson.GetBytes(raw, "metadata")
	return md.Get("namespace").Str + "/" + md.Get("name").Str
}

// mirror is what a client rebuilds from a list and a watch: raw objects
// by namespace/name.
type mirror struct {
	rv      string
	objects map[string][]byte
}

// versions returns namespace/name -> resourceVersion.
func versions(objs map[string][]byte) map[string]string {
	out := make(map[string]string, len(objs))
	for k, b := range objs {
		out[k] = gjson.GetBytes(b, "metadata.resourceVersion").Str
	}
	return out
}

// sameObjects compares two object sets, ignoring apiVersion and kind.
func sameObjects(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, func(x, y []byte) bool { return canonical(x) == canonical(y) })
}

// listAll lists a collection page by page.
func listAll(t *testing.T, base string, limit int) mirror {
	t.Helper()
	m, err := fetchAll(base, limit)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fetchAll lists a collection page by page; it may run in any goroutine.
func fetchAll(base string, limit int) (mirror, error) {
	m := mirror{objects: map[string][]byte{}}
	next := ""
	for {
		u := fmt.Sprintf("%s?limit=%d&continue=%s", base, limit, url.QueryEscape(next))
		resp, err := http.Get(u)
		if err != nil {
			return m, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusGone && next != "" {
			// The snapshot left the history mid-list: list in one page,
			// as client-go's pager does.
			m.objects, next, limit = map[string][]byte{}, "", 0
			continue
		}
		if err != nil || resp.StatusCode != http.StatusOK {
			return m, fmt.Errorf("GET %s: %d %s %v", u, resp.StatusCode, body, err)
		}
		m.rv = gjson.GetBytes(body, "metadata.resourceVersion").Str
		for _, it := range gjson.GetBytes(body, "items").Array() {
			m.objects[keyOf([]byte(it.Raw))] = []byte(it.Raw)
		}
		if next = gjson.GetBytes(body, "metadata.continue").Str; next == "" {
			return m, nil
		}
	}
}

// apply applies one watch event, as a reflector's store would.
func (m *mirror) apply(e wevent) error {
	switch e.Type {
	case "ADDED", "MODIFIED":
		m.objects[keyOf(e.Object)] = e.Object
	case "DELETED":
		delete(m.objects, keyOf(e.Object))
	case "BOOKMARK":
	default:
		return fmt.Errorf("unexpected event %s %s", e.Type, e.Object)
	}
	m.rv = e.rv()
	return nil
}

func oracle(c *testCluster, resource string) map[string][]byte {
	out := map[string][]byte{}
	for _, b := range c.Objects(resource) {
		out[keyOf(b)] = b
	}
	return out
}

// follow applies events to m until it has the versions of the oracle,
// then checks the objects are the same.
func follow(t *testing.T, c *testCluster, resource string, m mirror, w *watchStream) {
	t.Helper()
	want := oracle(c, resource)
	wantVersions := versions(want)
	deadline := time.After(10 * time.Second)
	for !maps.Equal(versions(m.objects), wantVersions) {
		select {
		case e, ok := <-w.events:
			if !ok {
				t.Fatalf("%s: watch ended before the mirror caught up", resource)
			}
			if err := m.apply(e); err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatalf("%s: mirror of %d objects never matched the %d of the cluster", resource, len(m.objects), len(want))
		}
	}
	if !sameObjects(m.objects, want) {
		t.Errorf("%s: mirror has the oracle's versions but not its objects", resource)
	}
	w.quiet(t)
}

func TestListPlusWatchReproducesObjects(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 21})
	mirrors, watches := map[string]mirror{}, map[string]*watchStream{}
	for r, path := range collections {
		mirrors[r] = listAll(t, srv.URL+path, 10)
		if want := oracle(c, r); !sameObjects(mirrors[r].objects, want) {
			t.Fatalf("%s: list differs from Objects", r)
		}
		watches[r] = openWatch(t, srv.URL+path+"?watch=true&allowWatchBookmarks=true&resourceVersion="+mirrors[r].rv)
	}
	for range 100 {
		c.Step()
	}
	for r := range collections {
		follow(t, c, r, mirrors[r], watches[r])
	}
}

// client lists, then watches, and re-watches from its last resourceVersion
// whenever the stream ends (relisting after 410), until done is closed.
func client(base string, limit int, done <-chan struct{}) (mirror, error) {
	m, err := fetchAll(base, limit)
	if err != nil {
		return m, err
	}
	for {
		w, err := startWatch(base + "?watch=true&allowWatchBookmarks=true&resourceVersion=" + m.rv)
		if err != nil {
			return m, err
		}
		for e := range w.events {
			if e.Type == "ERROR" {
				if m, err = fetchAll(base, limit); err != nil {
					return m, err
				}
				continue
			}
			if err := m.apply(e); err != nil {
				w.cancel()
				return m, err
			}
		}
		w.cancel()
		select {
		case <-done:
			return m, nil
		default:
		}
	}
}

// TestConcurrentChurnListsAndWatches runs churn, paged lists, watches,
// dropped watches and resumptions at once (run it with -race), then
// checks every client ends with the cluster's state.
func TestConcurrentChurnListsAndWatches(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 33,
		BookmarkInterval: 20 * time.Millisecond, HistorySize: 200})
	ctx, stop := context.WithCancel(context.Background())
	churned := make(chan struct{})
	go func() {
		c.run(ctx, 5*time.Millisecond)
		close(churned)
	}()
	done := make(chan struct{})
	t.Cleanup(func() { // on failure too: let the server close
		stop()
		select {
		case <-done:
		default:
			close(done)
		}
		c.SetUnavailable(true)
	})
	rs := []string{Pods, Pods, Deployments, ReplicaSets, Nodes, Pods}
	mirrors, errs := make([]mirror, len(rs)), make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mirrors[i], errs[i] = client(srv.URL+collections[r], 5+i, done)
		}()
	}
	for range 4 {
		time.Sleep(80 * time.Millisecond)
		c.DropWatches()
		listAll(t, srv.URL+"/api/v1/pods", 3)
	}
	stop()
	<-churned
	close(done)
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	for waiting := true; waiting; {
		c.DropWatches() // until every client has seen done
		select {
		case <-finished:
			waiting = false
		case <-time.After(20 * time.Millisecond):
		}
	}
	if c.ResourceVersion() == "0" {
		t.Fatal("no churn")
	}
	for i, r := range rs {
		if errs[i] != nil {
			t.Fatalf("client %d (%s): %v", i, r, errs[i])
		}
		w := openWatch(t, srv.URL+collections[r]+"?watch=true&resourceVersion="+mirrors[i].rv)
		follow(t, c, r, mirrors[i], w)
	}
}
