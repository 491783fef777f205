// Package bench is kubeindex's side-by-side benchmark (make bench): it
// starts the real test cluster, seeds it with realistic pods, runs the
// kubeindex binary against it and, in the same run, the comparisons the
// targets are defined against (a trivial echo server, the API server's own
// field-selector list, a typed client-go informer), and reports figures and
// ratios. Ratios are taken pair by pair, because the machine is shared.
//
// Nothing here asserts a timing: the test in this package runs the harness
// at a tiny N only to prove that it works.
package bench

import (
	"io"
	"time"
)

// Options says how big the run is. Zero values take the defaults noted.
type Options struct {
	// Pods to seed. Default 50000.
	Pods int
	// Rounds of each measurement; each figure is their median. Default 5
	// (3 for the initial sync and the churn figures, which are slow).
	Rounds int
	// Concurrency of the requests/s load generator. Default 16.
	Concurrency int
	// RoundTime bounds one requests/s round. Default 2s.
	RoundTime time.Duration
	// LatencyRequests per round for kubeindex's by-IP latency. Default 2000.
	LatencyRequests int
	// APIServerRequests per round for the API server's field-selector list.
	// Default 30.
	APIServerRequests int
	// Subscribers of the stream fan-out. Default 1000.
	Subscribers int
	// ChurnRate is the pod updates per second sent during the fan-out.
	// Default 150 (150,000 frames/s offered to 1,000 subscribers).
	ChurnRate int
	// LightChurnRate is the pod updates per second of the fan-out's light
	// rounds, which time the event-to-client delay off saturation.
	// Default 30.
	LightChurnRate int
	// ChurnTime is how long one fan-out churn round lasts. Default 5s.
	ChurnTime time.Duration
	// FloorRates are the pod updates per second the fan-out ceiling
	// (fanfloor) steps through, each offered to every subscriber, until a
	// step is not sustained. Default 5, 10, 20, 30, 50, 75, 100, 150, 200, 300, 400, 600, 800.
	FloorRates []int
	// FloorStep is how long one step of the fan-out ceiling publishes.
	// Default 3s.
	FloorStep time.Duration
	// InformerSyncTimeout bounds how long the informers of the kinformers
	// figure have to sync: a server that cannot sync N of them in it is
	// reported as such (how many synced, what failed). Default 3m.
	InformerSyncTimeout time.Duration
	// APIServerRSSShare and MinAvailableShare are the memory budget of
	// each kinformers round: once the round has grown the API server's
	// RSS by 5% of the machine's memory (MemTotal), it is stopped, and
	// reported as stopped, when that RSS passes APIServerRSSShare of
	// MemTotal or the machine's available memory falls below
	// MinAvailableShare of it. Defaults 0.4 and 0.2.
	APIServerRSSShare, MinAvailableShare float64
	// InformerModes are the ways the kinformers figure's informers sync:
	// "list" (a list, then a watch) and "watch-list" (sendInitialEvents).
	// Default both.
	InformerModes []string
	// UpkeepEvents per round of the index upkeep figure. Default 3000.
	UpkeepEvents int
	// UpkeepRounds of the index upkeep figure. Default that of the other
	// churn figures (Rounds, at most 3); more show whether a process's
	// CPU per event, or its live heap, grows with the events it has
	// handled (each round's log line gives both processes' GCs and last
	// live heap).
	UpkeepRounds int
	// IdleTime is how long the idle figure holds its subscribers open
	// with nothing changing. Default 60s.
	IdleTime time.Duration
	// Figures selects what to measure besides the initial sync, which
	// always runs: rate, latency, heap, fanout, upkeep, kinformers (the API
	// server under N client-go informers, list and watch-list, directly
	// and through /k8s), klist (a full list and kubectl get pods -A),
	// kwatch (watch delivery), idle (CPU and allocations with Subscribers
	// idle streams), fanfloor (the fan-out ceiling from a fake source,
	// beside a bare WebSocket broadcaster), questions (sorted, filtered
	// pages and grouped counts beside an in-memory SQLite of the same rows,
	// and the same page through the API server), proto (typed informers
	// syncing from /k8s over protobuf against JSON: their CPU and
	// kubeindex's), shards (10 shardSelector consumers of /k8s: their
	// shares of the objects and events, the API server's pod watches),
	// scale (heap per pod, sync and lookup latency at N against a kubeindex
	// caching N/3). Empty: all.
	Figures []string
	// QuestionPods is the size of the questions' cluster (figure
	// questions): the demo's crowd of that many pods in a fake API server
	// of its own (benchfeed -pods), still while asked, which a kubeindex
	// syncs and SQLite loads from it; seeding the real API server with
	// 100,000 pods takes hours on a shared machine. The same page through
	// the API server is asked of the seeded cluster, at Pods. Negative:
	// ask the seeded cluster's kubeindex itself. Default 100000.
	QuestionPods int
	// IdleGCWait is how long the heap and scale figures wait for a GC of each
	// kubeindex while idle (the Go runtime forces one after two minutes
	// without), whose marked heap holds nothing allocated under load;
	// past it, the median of the GCs under load is used. Default 3m.
	IdleGCWait time.Duration
	// Builds are other kubeindex source trees (module roots, "label=dir"
	// or a dir, labelled by its name): each is built and started on the
	// seeded pods, and the rate and latency figures ask it in the same
	// rounds as the main kubeindex and echo, the order of asking permuted,
	// each with figures of its own (named with the label in brackets);
	// the sync figure starts each in its rounds too, alone, and compares
	// the main kubeindex with it round by round ("initial sync CPU vs
	// label"); the upkeep figure has each watch its churn with the five
	// indexes ("index upkeep CPU per event [label]", and "… vs label").
	Builds []string
	// Dir keeps the cluster's state (and seeded pods) between runs; empty
	// means a fresh temporary directory. The kinformers figure writes the
	// API server's CPU profiles (N >= 10) to Dir/profiles when it is set.
	Dir string
	// Out is where the JSON results go; empty: not written.
	Out string
	// Log receives progress lines. Default io.Discard.
	Log io.Writer
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Pods, 50000)
	def(&o.Rounds, 5)
	def(&o.Concurrency, 16)
	def(&o.LatencyRequests, 2000)
	def(&o.APIServerRequests, 30)
	def(&o.Subscribers, 1000)
	def(&o.ChurnRate, 150)
	def(&o.LightChurnRate, 30)
	def(&o.UpkeepEvents, 3000)
	if o.QuestionPods == 0 {
		o.QuestionPods = 100000
	}
	if o.RoundTime <= 0 {
		o.RoundTime = 2 * time.Second
	}
	if o.IdleTime <= 0 {
		o.IdleTime = time.Minute
	}
	if o.ChurnTime <= 0 {
		o.ChurnTime = 5 * time.Second
	}
	if len(o.FloorRates) == 0 {
		o.FloorRates = []int{5, 10, 20, 30, 50, 75, 100, 150, 200, 300, 400, 600, 800}
	}
	if o.FloorStep <= 0 {
		o.FloorStep = 3 * time.Second
	}
	if o.InformerSyncTimeout <= 0 {
		o.InformerSyncTimeout = 3 * time.Minute
	}
	if o.IdleGCWait <= 0 {
		o.IdleGCWait = 3 * time.Minute
	}
	if o.APIServerRSSShare <= 0 {
		o.APIServerRSSShare = 0.4
	}
	if o.MinAvailableShare <= 0 {
		o.MinAvailableShare = 0.2
	}
	if len(o.InformerModes) == 0 {
		o.InformerModes = []string{string(modeList), string(modeWatchList)}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// memBudget is the kinformers rounds' memory budget.
func (o Options) memBudget() memBudget {
	return memBudget{rssShare: o.APIServerRSSShare, availShare: o.MinAvailableShare, growShare: 0.05}
}

// slowRounds is the round count of the expensive figures (a full sync, a
// churn round).
func (o Options) slowRounds() int { return min(o.Rounds, 3) }

// upkeepRounds is the index upkeep figure's round count.
func (o Options) upkeepRounds() int {
	if o.UpkeepRounds > 0 {
		return o.UpkeepRounds
	}
	return o.slowRounds()
}
