package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/kubeindex/kubeindex/demo"
)

// publishPath is the control route: GET publishPath?rate=R&count=N
// publishes N pod updates at R per second and answers
// {"sent":N,"seconds":S} once the last is written.
const publishPath = "/bench/publish"

// Feed is the fan-out ceiling's event source: the demo's fake API server
// (discovery, list, watch) holding the demo's generated pods, which change
// only when told to, each change a MODIFIED event of a realistic pod
// carrying its send time (Unix nanoseconds) in the stamp annotation. It
// publishes at any rate asked, so that the servers fed from it, not it,
// are the bottleneck.
type Feed struct {
	api   *demo.TestCluster
	stamp string
	pods  []map[string]any // the generated pods, decoded once
	mu    sync.Mutex       // one publication at a time
	next  int
}

// publishedPods bounds the pods Publish updates in turn (decoded once,
// kept whole): a crowd of 100,000 decoded would cost gigabytes.
const publishedPods = 5000

// NewFeed generates the demo cluster, grown to pods (0: the scenario's
// own; see demo.Options.Pods). Its watches may lag far behind (a buffer of
// 1<<16 events) before the source closes them: a server that falls behind
// shows it in its own clients, not as a dropped watch.
func NewFeed(stamp string, pods int) (*Feed, error) {
	api, err := demo.NewTest(demo.Options{Seed: 1, Pods: pods, HistorySize: 1 << 16, WatchBuffer: 1 << 16, BookmarkInterval: time.Hour})
	if err != nil {
		return nil, err
	}
	f := &Feed{api: api, stamp: stamp}
	all := api.Objects(demo.Pods)
	for _, raw := range all[:min(len(all), publishedPods)] {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		f.pods = append(f.pods, m)
	}
	if len(f.pods) == 0 {
		return nil, fmt.Errorf("the demo cluster has no pods")
	}
	return f, nil
}

// Handler serves the fake API server and the control route.
func (f *Feed) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", f.api.Handler())
	mux.HandleFunc(publishPath, f.publishHandler)
	return mux
}

func (f *Feed) publishHandler(w http.ResponseWriter, r *http.Request) {
	rate, err1 := strconv.Atoi(r.URL.Query().Get("rate"))
	count, err2 := strconv.Atoi(r.URL.Query().Get("count"))
	if err1 != nil || err2 != nil || rate <= 0 || count < 0 || count > 10_000_000 {
		http.Error(w, "rate (> 0) and count (0 to 10,000,000) are required integers", http.StatusBadRequest)
		return
	}
	begin := time.Now()
	sent, err := f.Publish(rate, count)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(feedResult{Sent: sent, Seconds: time.Since(begin).Seconds()})
}

// feedResult is the control route's answer.
type feedResult struct {
	Sent    int     `json:"sent"`
	Seconds float64 `json:"seconds"`
}

// Publish writes count pod updates, paced at rate per second (a tick every
// millisecond sends what is due), round robin over the pods.
func (f *Feed) Publish(rate, count int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	begin := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	sent := 0
	for sent < count {
		due := min(count, int(time.Since(begin).Seconds()*float64(rate))+1)
		for ; sent < due; sent++ {
			if err := f.update(); err != nil {
				return sent, err
			}
		}
		if sent < count {
			<-tick.C
		}
	}
	return sent, nil
}

// update stamps the next pod with the time now and writes it.
func (f *Feed) update() error {
	pod := f.pods[f.next%len(f.pods)]
	f.next++
	md := pod["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		md["annotations"] = ann
	}
	ann[f.stamp] = strconv.FormatInt(time.Now().UnixNano(), 10)
	b, err := json.Marshal(pod)
	if err != nil {
		return err
	}
	return f.api.Apply(demo.Pods, b)
}
