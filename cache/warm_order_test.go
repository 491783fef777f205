package cache

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// watchingServer serves a pod list and, on watches, the events sent to
// it (one watch at a time).
func watchingServer(t *testing.T, list []byte) (srv *httptest.Server, send func(event []byte)) {
	events := make(chan []byte, 16)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") != "true" {
			w.Write(list)
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case ev := <-events:
				w.Write(ev)
				w.(http.Flusher).Flush()
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func(ev []byte) { events <- ev }
}

// TestAFirstSortWaitsForTheStandingIndexAndMissesNoChange: a sort by a
// standing column asked the moment the pods are ready, while the column
// warmer has yet to build the standing indexes, waits for the warmer's
// index instead of building its own (the namespace/name order, which
// renders nothing, does not wait), which the warmer builds before the
// other standing ones; and pods changed while the warmer renders their
// rows, and while the standing indexes are built, are in that first
// answer as they are now.
func TestAFirstSortWaitsForTheStandingIndexAndMissesNoChange(t *testing.T) {
	const pods = 2000
	srv, send := watchingServer(t, benchLayoutFixture(t, pods))
	sc := podSchema()
	keys, err := sc.ParseSort("-restarts")
	if err != nil {
		t.Fatal(err)
	}
	restartCount := regexp.MustCompile(`"restartCount":\d+`)
	version := regexp.MustCompile(`"resourceVersion":"\d+"`)
	var c *Cache
	answer := make(chan ListResult, 1)
	var once sync.Once
	changed := map[string]string{} // by stage: the pod changed there
	builtFirst := false
	_, rtext, _ := canonicalSort(keys)
	_, ntext, _ := canonicalSort(nil)
	restartsID, nameID := orderID(rtext, nil, sc), orderID(ntext, nil, sc)
	// change gives a pod many restarts through the watch, and returns
	// once the handler has applied it.
	change := func(stage string, i, restarts int) {
		r := c.byName["pods"]
		o := r.objects()[i]
		raw := restartCount.ReplaceAll(o.Raw(), []byte(fmt.Sprintf(`"restartCount":%d`, restarts)))
		raw = version.ReplaceAll(raw, []byte(fmt.Sprintf(`"resourceVersion":"%d"`, 900001+restarts)))
		before := r.versionsHandled()
		send(append(append([]byte(`{"type":"MODIFIED","object":`), raw...), "}\n"...))
		for deadline := time.Now().Add(30 * time.Second); r.versionsHandled() == before; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("%s: the change of %s was not handled", stage, o.Key())
				return
			}
		}
		changed[stage] = o.Key()
	}
	hook := func(stage string) {
		switch {
		case stage == "warm" && changed["warm"] == "":
			// The namespace/name order, standing too, renders nothing:
			// a question builds it without waiting for the warmer.
			done := make(chan struct{})
			go func() {
				r := c.byName["pods"]
				r.orders.index(r, nil, nil, sc)
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Error("the namespace/name order waits for the warmer")
			}
			// A question now, which must wait for the warmer.
			once.Do(func() {
				go func() {
					res, err := c.List("pods", ListQuery{Limit: 3, Ask: &Ask{Schema: sc, Sort: keys, SortText: "-restarts", Now: time.Now()}})
					if err != nil {
						t.Error(err)
					}
					answer <- res
				}()
			})
			for deadline := time.Now().Add(30 * time.Second); c.waitingForWarmer() != 1; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Error("a sort by a standing column asked before the warmer built it does not wait for it")
					break
				}
			}
			change("warm", 10, 9000)
		case stage == "build" && changed["build"] == "":
			change("build", 20, 9001)
		case stage == "built" && !builtFirst:
			builtFirst = true
			for _, ix := range c.byName["pods"].orders.live() {
				select {
				case <-ix.ready:
					if ix.id != restartsID && ix.id != nameID {
						t.Errorf("index %q was built with the one a question waits for", ix.id)
					}
				default:
					if ix.id == restartsID {
						t.Error("the index a question waits for is not built first")
					}
				}
			}
		}
	}
	_, stop := startSyncedPodsWith(t, &rest.Config{Host: srv.URL, DisableCompression: true}, Spec{Resource: "pods"},
		Options{PodSortIndexes: []string{"status", "restarts"}}, pods, func(cc *Cache) { c, cc.warmHook = cc, hook })
	defer stop()
	var res ListResult
	select {
	case res = <-answer:
	case <-time.After(time.Minute):
		t.Fatal("no answer a minute after the sync")
	}
	if t.Failed() {
		return
	}
	var got []string
	for _, o := range res.Items {
		got = append(got, o.Key())
	}
	if len(got) < 2 || got[0] != changed["build"] || got[1] != changed["warm"] {
		t.Fatalf("the first sort by -restarts begins %q; expect %q (changed while the index was built), then %q (while the rows were rendered)",
			got, changed["build"], changed["warm"])
	}
	r := c.byName["pods"]
	for _, ix := range r.orders.live() {
		if !ix.standing {
			t.Errorf("index %q is not standing: the question built its own", ix.id)
		}
		// The answer came once its own index was built; the others may
		// still be building.
		select {
		case <-ix.ready:
		case <-time.After(time.Minute):
			t.Fatalf("index %q not built a minute after the first answer", ix.id)
		}
		if err := ix.check(r.objects()); err != nil {
			t.Error(err)
		}
	}
	if n := len(r.orders.live()); n != 3 {
		t.Errorf("%d indexes; expect the three standing ones", n)
	}
	if !builtFirst {
		t.Error("the standing indexes were not built in two groups")
	}
	if !bytes.Contains(res.Items[0].Raw(), []byte(`"restartCount":9001`)) {
		t.Errorf("the first pod is not its version changed during the build")
	}
}
