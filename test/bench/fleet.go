package bench

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// fleetClusters is how many clusters the fleet figure splits N pods over.
const fleetClusters = 10

// fleetSide is one of the two kubeindexes the fleet figure compares: its
// configuration, the kubeconfig its clusters are contexts of, and the
// paths its clusters' APIs are under ("" for a single cluster).
type fleetSide struct {
	name       string
	kubeconfig string
	prefixes   []string
	config     func(selector string) string
}

// fleetFigures compares, in one run, one kubeindex serving a fleet of 10
// clusters of N/10 pods each with one serving a single cluster of N pods,
// every cluster simulated by the demo's fake API server as a process of
// its own (real API servers of this size take hours to seed here): the
// costs a fleet should not add, per pod and per request. Each round
// starts both afresh, one after the other (which goes first alternating),
// for the initial sync's CPU and wall time per pod; the last two stay up
// for their live heap per pod, each above an empty kubeindex of its own
// shape (a fleet's clusters each cost a fixed amount, said in the note),
// and by-IP lookups, sequential and alternating request by request.
// minFleetClusterPods is the fewest pods a simulated cluster of the fleet
// figure holds: well above the demo scenario's own.
const minFleetClusterPods = 200

func (r *runner) fleetFigures(ctx context.Context) error {
	// The demo's scenario makes about 50 pods of its own before any crowd:
	// a cluster asked for fewer holds the scenario's, so each of the ten
	// holds at least minFleetClusterPods for both sides to hold N.
	per := max(r.o.Pods/fleetClusters, minFleetClusterPods)
	n := per * fleetClusters
	if n != r.o.Pods {
		r.logf("fleet: %d pods make clusters below the demo scenario's own; the fleet figure uses %d", r.o.Pods, n)
	}
	r.logf("fleet: generating the simulated clusters: 1 of %d pods, %d of %d", n, fleetClusters, per)
	// Generating 100,000 pods takes about a minute on a quiet machine.
	_, one, err := r.startReadyWithin(ctx, 15*time.Minute, "benchfeed-fleet-single", r.feedBin, "-pods", fmt.Sprint(n))
	if err != nil {
		return err
	}
	var many []string
	for i := range fleetClusters {
		_, src, err := r.startReadyWithin(ctx, 15*time.Minute, fmt.Sprintf("benchfeed-fleet-%d", i+1), r.feedBin, "-pods", fmt.Sprint(per))
		if err != nil {
			return err
		}
		many = append(many, src)
	}
	sides, err := r.fleetSides(one, many)
	if err != nil {
		return err
	}
	sizes := [2]int{n, n}
	var wall, cpu [][2]float64
	var ks [2]*kubeindex
	defer func() {
		for _, k := range ks {
			if k != nil {
				k.stop()
			}
		}
	}()
	for round := range r.o.slowRounds() {
		var w, c [2]float64
		for turn := range 2 {
			i := (turn + round) % 2
			if ks[i] != nil {
				ks[i].stop()
			}
			k, kWall, kCPU, err := r.syncFleetSide(ctx, sides[i], fmt.Sprintf("kubeindex-%s-%d", sides[i].name, round), sizes[i])
			if err != nil {
				return err
			}
			ks[i] = k
			w[i] = float64(kWall) / float64(time.Microsecond) / float64(sizes[i])
			c[i] = float64(kCPU) / float64(time.Microsecond) / float64(sizes[i])
			r.logf("fleet round %d: %s synced %d pods in %v wall, %v CPU", round, sides[i].name, sizes[i], kWall.Round(time.Millisecond), kCPU)
		}
		wall, cpu = append(wall, w), append(cpu, c)
	}
	against := fmt.Sprintf("1 cluster of %d pods", n)
	name := func(what string) string { return fmt.Sprintf("fleet: %s, %d clusters against 1", what, fleetClusters) }
	simulated := fmt.Sprintf("%d clusters of %d pods against 1 of %d, each the demo's fake API server (benchfeed, the demo's crowd) as a process of its own, simulated, not real API servers", fleetClusters, per, n)

	if err := r.fleetHeap(ctx, sides, ks, n, name("live heap per pod"), against, simulated); err != nil {
		return err
	}
	if err := r.fleetLookups(ctx, sides, ks, name, against, simulated); err != nil {
		return err
	}
	if err := r.fleetQuestions(ctx, ks, n, simulated); err != nil {
		return err
	}
	syncNote := "each round a fresh kubeindex of each, one after the other (which goes first alternating), from process start to /readyz (a fleet's: every cluster synced); " + simulated
	f := pairFigure(name("initial sync CPU per pod"), "µs", against, "ratio <= 1.1", cpu, kOverC, func(x float64) bool { return x <= 1.1 })
	f.Note = "kubeindex's CPU (the kernel's CPU clock of the process) until ready; " + syncNote
	r.add(f)
	f = pairFigure(name("initial sync wall per pod"), "µs", against, information, wall, kOverC, func(float64) bool { return true })
	f.Note = syncNote
	r.add(f)
	r.report.Context = append(r.report.Context, "fleet: "+simulated)
	return nil
}

// fleetSides writes the kubeconfigs and configurations of the two
// kubeindexes: [0] the fleet over many, [1] the single cluster one.
func (r *runner) fleetSides(one string, many []string) ([2]fleetSide, error) {
	single := filepath.Join(r.dir, "fleet-single.kubeconfig")
	if err := os.WriteFile(single, fmt.Appendf(nil, feedKubeconfig, one), 0o600); err != nil {
		return [2]fleetSide{}, err
	}
	var kc, clusters strings.Builder
	kc.WriteString("apiVersion: v1\nkind: Config\nusers: [{name: feed, user: {}}]\nclusters:\n")
	for i, src := range many {
		fmt.Fprintf(&kc, "- {name: c%d, cluster: {server: %q}}\n", i+1, src)
	}
	kc.WriteString("contexts:\n")
	var prefixes []string
	for i := range many {
		fmt.Fprintf(&kc, "- {name: c%d, context: {cluster: c%d, user: feed}}\n", i+1, i+1)
		fmt.Fprintf(&clusters, "- {name: c%d, context: c%d}\n", i+1, i+1)
		prefixes = append(prefixes, fmt.Sprintf("/clusters/c%d", i+1))
	}
	kc.WriteString("current-context: c1\n")
	fleetKC := filepath.Join(r.dir, "fleet.kubeconfig")
	if err := os.WriteFile(fleetKC, []byte(kc.String()), 0o600); err != nil {
		return [2]fleetSide{}, err
	}
	resources := func(selector string) string {
		cfg := "resources:\n- resource: pods\n"
		if selector != "" {
			cfg += "  labelSelector: " + selector + "\n"
		}
		return cfg + "  indexes:" + fiveIndexes + "\n"
	}
	return [2]fleetSide{
		{name: "fleet", kubeconfig: fleetKC, prefixes: prefixes,
			config: func(sel string) string { return resources(sel) + "clusters:\n" + clusters.String() }},
		{name: "single", kubeconfig: single, prefixes: []string{""}, config: resources},
	}, nil
}

// syncFleetSide starts one side's kubeindex, waits until it is ready and
// checks it holds want pods.
func (r *runner) syncFleetSide(ctx context.Context, side fleetSide, name string, want int) (*kubeindex, time.Duration, time.Duration, error) {
	k, err := r.startFleetSide(side, name, "")
	if err != nil {
		return nil, 0, 0, err
	}
	wall, err := k.waitReady(ctx, 15*time.Minute)
	if err != nil {
		return nil, 0, 0, err
	}
	cpu, err := k.cpu()
	if err != nil {
		return nil, 0, 0, err
	}
	k.syncedGCs = len(k.gcs())
	got, err := fleetObjects(ctx, k)
	if err != nil {
		return nil, 0, 0, err
	}
	if got != want {
		return nil, 0, 0, fmt.Errorf("%s synced %d pods, want %d", name, got, want)
	}
	return k, wall, cpu, nil
}

func (r *runner) startFleetSide(side fleetSide, name, selector string) (*kubeindex, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	k, err := startKubeindexConfig(r.kubeindex, r.dir, side.kubeconfig, name, side.config(selector), addr)
	if err != nil {
		return nil, err
	}
	r.track(k.proc)
	return k, nil
}

// fleetObjects is how many objects k caches over all its clusters.
func fleetObjects(ctx context.Context, k *kubeindex) (int, error) {
	var list struct{ Clusters []struct{ Objects int } }
	if err := getJSON(ctx, http.DefaultClient, k.base+"/api/v1/clusters", &list); err != nil {
		return 0, err
	}
	total := 0
	for _, c := range list.Clusters {
		total += c.Objects
	}
	return total, nil
}

// fleetHeap adds the live heap per pod of both sides, each above an empty
// kubeindex of its own shape (its clusters, no pod).
func (r *runner) fleetHeap(ctx context.Context, sides [2]fleetSide, ks [2]*kubeindex, n int, name, against, simulated string) error {
	var base [2]float64
	for i, side := range sides {
		empty, err := r.startFleetSide(side, "kubeindex-"+side.name+"-empty", noneSelector)
		if err != nil {
			return err
		}
		if _, err := empty.waitReady(ctx, 5*time.Minute); err != nil {
			return err
		}
		startGCs := len(empty.gcs())
		if err := collectGarbage(ctx, empty, startGCs+5); err != nil {
			return err
		}
		base[i], _ = empty.liveHeap(startGCs)
		empty.stop()
	}
	var perPod, loaded [2]float64
	var notes [2]string
	idleFrom := [2]int{}
	for i, k := range ks {
		live, m, err := syncedHeap(ctx, k)
		if err != nil {
			return err
		}
		loaded[i], idleFrom[i] = live, len(k.gcs())
		notes[i] = fmt.Sprintf("%s: empty %.0f MB, median of %d GCs under /metrics load %.0f MB", sides[i].name, base[i], m, live)
	}
	for i, k := range ks {
		live, err := idleGC(ctx, k, idleFrom[i], r.o.IdleGCWait)
		if err != nil {
			return err
		}
		if math.IsNaN(live) {
			live = loaded[i]
			notes[i] += fmt.Sprintf(", no idle GC within %v: the loaded median is used", r.o.IdleGCWait)
		} else {
			notes[i] += fmt.Sprintf(", idle GC %.0f MB", live)
		}
		perPod[i] = (live - base[i]) * (1 << 20) / float64(n)
	}
	f := pairFigure(name, "B", against, "ratio <= 1.05", [][2]float64{{perPod[0], perPod[1]}}, kOverC, func(x float64) bool { return x <= 1.05 })
	f.Note = fmt.Sprintf("live heap marked by a GC while idle, less that of an empty kubeindex of the same clusters (GODEBUG=gctrace=1, 1 MB resolution), five indexes; %s; %s; %s", notes[0], notes[1], simulated)
	r.add(f)
	return nil
}

// fleetLookups adds the by-IP latencies of both sides, over addresses of
// pods each holds (the fleet's asked under their cluster's prefix).
func (r *runner) fleetLookups(ctx context.Context, sides [2]fleetSide, ks [2]*kubeindex, name func(string) string, against, simulated string) error {
	var urls [2][]string
	for i, side := range sides {
		for _, prefix := range side.prefixes {
			ips, err := podIPs(ctx, ks[i].base+prefix, 1000/len(side.prefixes))
			if err != nil {
				return err
			}
			for _, ip := range ips {
				urls[i] = append(urls[i], ks[i].base+prefix+"/api/v1/ip/"+ip)
			}
		}
		if len(urls[i]) == 0 {
			return fmt.Errorf("fleet: %s holds no pod address to look up", side.name)
		}
	}
	url := func(i, round int) func(int) string {
		return func(j int) string { return urls[i][(j*7+round)%len(urls[i])] }
	}
	client := loopbackClient(2)
	defer client.CloseIdleConnections()
	buf := make([]byte, 64<<10)
	if _, _, err := pairedLatencies(ctx, client, 200, url(0, 0), url(1, 0), buf); err != nil {
		return err
	}
	pairs := make([][][2]float64, len(latencyTargets))
	for round := range r.o.Rounds {
		a, b, err := pairedLatencies(ctx, client, r.o.LatencyRequests, url(0, round), url(1, round), buf)
		if err != nil {
			return err
		}
		for t, lt := range latencyTargets {
			pairs[t] = append(pairs[t], [2]float64{ms(percentile(a, lt.q)), ms(percentile(b, lt.q))})
		}
		r.logf("fleet by-IP latency round %d: fleet p50 %v p99 %v, single p50 %v p99 %v (%d each)", round,
			percentile(a, .5), percentile(a, .99), percentile(b, .5), percentile(b, .99), len(a))
	}
	for t, lt := range latencyTargets {
		target, met := information, func(float64) bool { return true }
		if lt.q == .50 {
			target, met = "ratio <= 1.1", func(x float64) bool { return x <= 1.1 }
		}
		f := pairFigure(name("by-IP latency "+lt.label), "ms", against, target, pairs[t], kOverC, met)
		f.Note = fmt.Sprintf("sequential over keep-alive loopback HTTP, one client, the two in turn (which goes first alternating), %d requests each per round; the fleet's under /clusters/{name}/ over %d addresses of its 10 clusters, the single's over %d; %s",
			r.o.LatencyRequests, len(urls[0]), len(urls[1]), simulated)
		r.add(f)
	}
	return nil
}

// podIPs are up to limit addresses of pods (not on the host network) the
// kubeindex API at base lists.
func podIPs(ctx context.Context, base string, limit int) ([]string, error) {
	var list struct {
		Items []struct {
			Spec   struct{ HostNetwork bool }
			Status struct{ PodIP string }
		}
	}
	if err := getJSON(ctx, http.DefaultClient, fmt.Sprintf("%s/api/v1/pods?limit=%d", base, 4*limit), &list); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range list.Items {
		if p.Status.PodIP != "" && !p.Spec.HostNetwork && len(out) < limit {
			out = append(out, p.Status.PodIP)
		}
	}
	return out, nil
}

// fleetQuestions adds the latencies of questions across the fleet's
// clusters at its root, each beside the same question asked of the
// single cluster (the two in turn): a sorted page of 100 over every pod
// (target p99 <= 10 ms), and a list of 10,000 (target p50 <= 250 ms).
func (r *runner) fleetQuestions(ctx context.Context, ks [2]*kubeindex, n int, simulated string) error {
	client := loopbackClient(2)
	defer client.CloseIdleConnections()
	buf := make([]byte, 64<<10)
	for _, q := range []struct {
		what, query string
		requests    int
		at          float64
		label       string
		limit       float64
	}{
		{"cross-cluster sorted page of 100", "sort=-restarts,-age&limit=100", r.o.LatencyRequests, .99, "p99", 10},
		{"cross-cluster sorted page of 100", "sort=-restarts,-age&limit=100", r.o.LatencyRequests, .50, "p50", 0},
		{"cross-cluster list of 10,000", "limit=10000", 20, .50, "p50", 250},
		{"cross-cluster list of 10,000", "limit=10000", 20, .99, "p99", 0},
	} {
		url := func(i int) func(int) string {
			return func(int) string { return ks[i].base + "/api/v1/pods?" + q.query }
		}
		if _, _, err := pairedLatencies(ctx, client, 3, url(0), url(1), buf); err != nil { // the sort's ordered indexes
			return err
		}
		var fleet []float64
		var single []float64
		for range r.o.Rounds {
			a, b, err := pairedLatencies(ctx, client, q.requests, url(0), url(1), buf)
			if err != nil {
				return err
			}
			fleet, single = append(fleet, ms(percentile(a, q.at))), append(single, ms(percentile(b, q.at)))
		}
		target, met := information, func(float64) bool { return true }
		if q.limit > 0 {
			target, met = fmt.Sprintf("<= %g ms", q.limit), func(v float64) bool { return v <= q.limit }
		}
		f := absFigure(fmt.Sprintf("fleet: %s %s over %d pods, %d clusters", q.what, q.label, n, fleetClusters), "ms", target, fleet, met)
		f.Note = fmt.Sprintf("GET /api/v1/pods?%s at the fleet's root, %d requests per round over keep-alive loopback HTTP, one client, in turn with the same question of the single cluster of %d pods (its %s %.1f ms); %s",
			q.query, q.requests, n, q.label, median(single), simulated)
		r.add(f)
	}
	return nil
}
