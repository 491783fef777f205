package bench

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/test/cluster"
)

func TestMain(m *testing.M) { os.Exit(cluster.RunTests(m)) }

// TestHarness runs the whole benchmark at a tiny size to prove the harness
// works: every figure gets a value and the JSON is written. It asserts no
// timing: on a tiny cluster and a shared machine the figures mean nothing.
func TestHarness(t *testing.T) {
	c := cluster.StartForTest(t)
	var log strings.Builder
	out := filepath.Join(t.TempDir(), "results.json")
	rep, err := Run(t.Context(), c, Options{
		Pods: 200, Rounds: 1, RoundTime: 200 * time.Millisecond, LatencyRequests: 100, APIServerRequests: 5,
		Subscribers: 20, ChurnRate: 40, ChurnTime: time.Second, UpkeepEvents: 50, IdleTime: 2 * time.Second, Out: out, Log: &log,
		FloorRates: []int{10, 20}, FloorStep: 500 * time.Millisecond, IdleGCWait: time.Second, QuestionPods: 1000,
	})
	t.Log(log.String())
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	rep.Print(&table)
	t.Log("\n" + table.String())
	want := []string{"initial sync CPU", "initial sync wall", "GET by key requests/s", "by-IP lookup requests/s",
		"GET by key CPU per request", "by-IP lookup CPU per request",
		"GET by key requests/s vs echo of one body", "by-IP lookup requests/s vs echo of one body",
		"by-IP latency p50", "by-IP latency p99", "GET by key latency p50", "GET by key latency p99",
		"by-IP latency p50 vs echo of one body", "GET by key latency p50 vs echo of one body",
		"by-IP latency p50 vs API server", "by-IP latency p99 vs API server", "live heap per pod", "live heap per pod vs informer",
		"memory per idle WebSocket", "stream fan-out frames/s", "stream event-to-client p99", "index upkeep CPU per event",
		"API server CPU, 1 informers (list)", "API server CPU, 10 informers (list)", "API server CPU, 100 informers (list)",
		"API server CPU growth, 1 to 100 informers (list)",
		"API server CPU, 1 informers (watch-list)", "API server CPU, 10 informers (watch-list)",
		"API server CPU, 100 informers (watch-list)", "API server CPU growth, 1 to 100 informers (watch-list)",
		"full pod list wall", "full pod list CPU", "kubectl get pods -A wall", "watch event to 20 watchers p99",
		"idle CPU", "idle allocation rate",
		"fan-out ceiling frames/s (fake source)", "fan-out CPU per frame (fake source)",
		"live heap per pod at N against N/3", "by-IP latency p50 at N against N/3", "by-IP latency p99 at N against N/3",
		"initial sync wall per pod at N against N/3", "initial sync CPU per pod at N against N/3",
		"live heap per pod after the questions", "question memory per pod vs SQLite",
		"ordered index memory per pod", "live heap per pod with the pod columns indexed", "live heap per pod settled",
		"question page 1 (running by restarts) vs API server list", "question page 1 (running by restarts) bytes vs API server list",
		"typed informer sync client CPU, protobuf", "kubeindex CPU serving 10 protobuf informers", "kubeindex CPU serving the first protobuf informer",
		"largest share of the objects, 10 shards", "largest share of the events, 10 shards", "API server pod watches, 10 shards open"}
	want = append(want, fleetFigureNames...)
	for _, q := range []string{"running by restarts", "running by node (columns)"} {
		for _, page := range []string{"page 1", "page 900"} {
			want = append(want, "question p50: "+page+" ("+q+")", "question p99: "+page+" ("+q+")")
		}
		want = append(want, "question p99 page 900 vs page 1: ("+q+")")
	}
	want = append(want, "question p50: counts (phase x node)", "question p99: counts (phase x node)",
		"question p50: page 1 after a change (running by restarts)", "question p99: page 1 after a change (running by restarts)",
		"question p50: counts after a change (phase x node)", "question p99: counts after a change (phase x node)")
	got := map[string]*Figure{}
	for _, f := range rep.Figures {
		got[f.Name] = f
	}
	for _, name := range want {
		f, ok := got[name]
		switch {
		case !ok:
			t.Errorf("figure %q missing", name)
		case f.Against != "" && math.IsNaN(f.Ratio) && !strings.HasPrefix(name, "live heap"):
			// Heap figures may be n/a at this size (the GC trace has
			// 1 MB resolution); every other ratio must be computable,
			// CPU included, which is read in nanoseconds (cpuOf).
			t.Errorf("figure %q: ratio not computable: %+v", name, f)
		}
	}
	// The request figures are paired with the bare handler answering as
	// many distinct bodies as kubeindex's objects, the API server's list
	// and echo's one body staying as information.
	for _, name := range []string{"by-IP latency p50", "GET by key latency p99", "GET by key requests/s", "by-IP lookup requests/s"} {
		if f := got[name]; f != nil && f.Against != echoSame {
			t.Errorf("figure %q compared with %q, want the echo server's set", name, f.Against)
		}
	}
	for _, name := range []string{"GET by key requests/s vs echo of one body", "by-IP latency p50 vs echo of one body", "GET by key CPU per request"} {
		if f := got[name]; f != nil && f.Target != information {
			t.Errorf("figure %q has a target: %+v", name, f)
		}
	}
	if f := got["by-IP latency p50 vs API server"]; f != nil && f.Target != information {
		t.Errorf("the API server comparison has a target: %+v", f)
	}
	// The idle figure held every subscriber, of both kinds, and read
	// kubeindex's allocations.
	if f := got["idle CPU"]; f != nil && !strings.Contains(f.Note, "10 WebSocket and 10 event-stream subscribers") {
		t.Errorf("idle figure lacks its subscribers: %s", f.Note)
	}
	if f := got["idle allocation rate"]; f != nil && !(f.Kubeindex > 0) {
		t.Errorf("idle allocation rate not measured: %+v", f)
	}
	// The fan-out says where its time went: the processes' CPU, and
	// kubeindex's own delivery delay from its histogram, which must have
	// seen the round's frames.
	if f := got["stream fan-out frames/s"]; f != nil && !strings.Contains(f.Note, "µs per frame") {
		t.Errorf("fan-out note lacks the CPU split: %s", f.Note)
	}
	if f := got["stream event-to-client p99"]; f != nil && (!strings.Contains(f.Note, " deliveries)") || strings.Contains(f.Note, "no deliveries")) {
		t.Errorf("event-to-client note lacks kubeindex's own delivery delay: %s", f.Note)
	}
	// It also times the light churn's rounds, off saturation.
	if f := got["stream event-to-client p99"]; f != nil {
		_, light, ok := strings.Cut(f.Note, "under a light churn")
		if !ok || !strings.Contains(light, " deliveries)") || strings.Contains(light, "no deliveries") {
			t.Errorf("event-to-client note lacks the light churn's rounds: %s", f.Note)
		}
	}
	// The fan-out ceiling stepped both servers' rates (whether a step was
	// sustained is a timing, not asserted).
	if f := got["fan-out ceiling frames/s (fake source)"]; f != nil &&
		(!strings.Contains(f.Note, "kubeindex 10/s: ") || !strings.Contains(f.Note, "broadcaster 10/s: ")) {
		t.Errorf("fan-out ceiling: a server's ladder is missing: %s", f.Note)
	}
	// The informer figures say what the API server's memory did, and that
	// every informer synced and followed the churn, in the way asked: at
	// this size nothing should fail.
	for _, mode := range []string{"list", "watch-list"} {
		f := got["API server CPU, 100 informers ("+mode+")"]
		if f == nil {
			continue
		}
		if !strings.Contains(f.Note, "MiB at start, peak") {
			t.Errorf("informer figure lacks the API server's RSS: %s", f.Note)
		}
		if n := strings.Count(f.Note, "100 of 100 synced"); n != 2 {
			t.Errorf("informer figure (%s): not all synced both ways: %s", mode, f.Note)
		}
		if n := strings.Count(f.Note, "seen whole by 100 of the 100 synced"); n != 2 {
			t.Errorf("informer figure (%s): not all followed the churn: %s", mode, f.Note)
		}
		// Synced that way: at least one request of its own kind per
		// informer (an informer whose stream broke on the loaded machine
		// asks again, as client-go does), and none of the other kind but
		// what a failed request explains: a watch-list that breaks falls
		// back to a list in client-go.
		asked := regexp.MustCompile(`; ([0-9]+) list requests and ([0-9]+) watch-lists asked; failed: [0-9]+ informers, ([0-9]+) requests`)
		counts := asked.FindAllStringSubmatch(f.Note, -1)
		if len(counts) != 2 {
			t.Errorf("informer figure (%s): not the requests of both sides: %s", mode, f.Note)
		}
		for _, c := range counts {
			lists, _ := strconv.Atoi(c[1])
			watchLists, _ := strconv.Atoi(c[2])
			failed, _ := strconv.Atoi(c[3])
			own, other := lists, watchLists
			if mode == "watch-list" {
				own, other = watchLists, lists
			}
			if own < 100 || other > failed {
				t.Errorf("informer figure (%s): %d requests of its kind for 100 informers, %d of the other with %d failed: %s",
					mode, own, other, failed, f.Note)
			}
		}
	}
	// The scale figures compare with a kubeindex caching the first third
	// (it synced exactly that many, or the run would have failed).
	for _, name := range []string{"live heap per pod at N against N/3", "by-IP latency p50 at N against N/3"} {
		if f := got[name]; f != nil && f.Against != "N/3: kubeindex caching the first 66" {
			t.Errorf("figure %q compared with %q, want the first 66 pods", name, f.Against)
		}
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("results JSON: %v", err)
	}
}

// fleetFigureNames are the fleet figure's figures.
var fleetFigureNames = []string{
	"fleet: live heap per pod, 10 clusters against 1", "fleet: by-IP latency p50, 10 clusters against 1",
	"fleet: by-IP latency p99, 10 clusters against 1", "fleet: initial sync CPU per pod, 10 clusters against 1",
	"fleet: initial sync wall per pod, 10 clusters against 1",
}

// TestFleetFigures runs the fleet figure alone at a tiny size: it needs no
// test cluster (its clusters are simulated), every figure gets a value
// and the single cluster is compared with the fleet that holds as many
// pods. It asserts no timing.
func TestFleetFigures(t *testing.T) {
	var log strings.Builder
	rep, err := Run(t.Context(), nil, Options{
		Pods: 2000, Rounds: 1, LatencyRequests: 100, IdleGCWait: time.Second, Figures: []string{"fleet"}, Log: &log,
	})
	t.Log(log.String())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*Figure{}
	for _, f := range rep.Figures {
		got[f.Name] = f
	}
	for _, name := range fleetFigureNames {
		f, ok := got[name]
		switch {
		case !ok:
			t.Errorf("figure %q missing", name)
		case f.Against != "1 cluster of 2000 pods":
			t.Errorf("figure %q compared with %q", name, f.Against)
		case math.IsNaN(f.Ratio) && !strings.Contains(name, "heap"):
			t.Errorf("figure %q: ratio not computable: %+v", name, f)
		case !strings.Contains(f.Note, "10 clusters of 200 pods") || !strings.Contains(f.Note, "simulated"):
			t.Errorf("figure %q does not say what was compared: %s", name, f.Note)
		}
	}
	// The questions at the fleet's root are timed alone, their target
	// absolute (the single cluster's time in the note).
	questions := []string{
		"fleet: cross-cluster sorted page of 100 p99 over 2000 pods, 10 clusters",
		"fleet: cross-cluster sorted page of 100 p50 over 2000 pods, 10 clusters",
		"fleet: cross-cluster list of 10,000 p50 over 2000 pods, 10 clusters",
		"fleet: cross-cluster list of 10,000 p99 over 2000 pods, 10 clusters",
	}
	for _, name := range questions {
		f, ok := got[name]
		switch {
		case !ok:
			t.Errorf("figure %q missing", name)
		case math.IsNaN(f.Kubeindex) || f.Kubeindex <= 0:
			t.Errorf("figure %q: no time measured: %+v", name, f)
		case !strings.Contains(f.Note, "single cluster of 2000 pods") || !strings.Contains(f.Note, "simulated"):
			t.Errorf("figure %q does not say what was compared: %s", name, f.Note)
		}
	}
	if want := len(fleetFigureNames) + len(questions); len(rep.Figures) != want {
		t.Errorf("%d figures; expect the fleet's %d only", len(rep.Figures), want)
	}
}
