package bench

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
)

// scale compares, in one run, a kubeindex caching all N pods with one
// caching exactly the first N/3 of the same plan (selected by the API
// server; at N = 150,000 those are the 50,000 pods a 50,000 run seeds):
// the costs that should not grow with the cluster, per pod or per
// request. Each round starts both afresh, one after the other (which goes
// first alternating), for the initial sync's wall time and CPU per pod;
// the last two stay up for their live heap per pod and by-IP lookups,
// sequential and alternating between the two request by request, over
// sample pods both hold.
func (r *runner) scale(ctx context.Context) error {
	third := r.p.n / 3
	if third == 0 {
		return fmt.Errorf("scale: %d pods have no third", r.p.n)
	}
	// The main kubeindex is idle from here on (scale is the last step):
	// at 150,000 pods three kubeindexes beside the API server (13 GB of
	// RSS at rest) would leave the shared 24 GiB machine no room.
	r.main.stop()
	sizes := [2]int{r.p.n, third}
	selectors := [2]string{"", r.p.firstSelector(third)}
	var wall, cpu [][2]float64
	var ks [2]*kubeindex
	for round := range r.o.slowRounds() {
		var w, c [2]float64
		for turn := range 2 {
			i := (turn + round) % 2 // which goes first alternates
			if ks[i] != nil {
				ks[i].stop()
			}
			k, kWall, kCPU, err := r.syncKubeindex(ctx, fmt.Sprintf("kubeindex-scale-%d-%d", sizes[i], round), selectors[i], sizes[i])
			if err != nil {
				return err
			}
			ks[i] = k
			w[i] = float64(kWall) / float64(time.Microsecond) / float64(sizes[i])
			c[i] = float64(kCPU) / float64(time.Microsecond) / float64(sizes[i])
			r.logf("scale round %d: %d pods synced in %v wall, %v CPU", round, sizes[i], kWall.Round(time.Millisecond), kCPU)
		}
		wall, cpu = append(wall, w), append(cpu, c)
	}
	defer func() {
		for _, k := range ks {
			k.stop()
		}
	}()
	against := fmt.Sprintf("N/3: kubeindex caching the first %d", third)
	name := func(what string) string { return what + " at N against N/3" }

	// Live heap per cached pod, above an empty kubeindex's.
	base, err := r.emptyHeap(ctx)
	if err != nil {
		return err
	}
	// The heap a GC marks includes what was allocated while it marked:
	// under the /metrics load that makes the GCs, more the longer the
	// mark, which is longer for the bigger heap. The figure is therefore
	// the next GC of both when idle (the runtime forces one after two
	// minutes without), the loaded GCs' median as information.
	var perPod [2]float64
	var notes [2]string
	var loaded [2]float64
	idleFrom := [2]int{}
	for i, k := range ks {
		live, n, err := syncedHeap(ctx, k)
		if err != nil {
			return err
		}
		loaded[i] = live
		idleFrom[i] = len(k.gcs())
		notes[i] = fmt.Sprintf("%d pods: median of %d GCs under /metrics load %.0f MB", sizes[i], n, live)
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
			notes[i] += fmt.Sprintf(", idle GC %.0f MB (%.0f B per pod under load)", live, (loaded[i]-base)*(1<<20)/float64(sizes[i]))
		}
		perPod[i] = (live - base) * (1 << 20) / float64(sizes[i])
	}
	f := pairFigure(name("live heap per pod"), "B", against, "ratio <= 1.1", [][2]float64{{perPod[0], perPod[1]}}, kOverC, func(x float64) bool { return x <= 1.1 })
	f.Note = fmt.Sprintf("live heap marked by a GC while idle, less an empty kubeindex's %.0f MB (GODEBUG=gctrace=1, 1 MB resolution), five indexes each; %s; %s", base, notes[0], notes[1])
	r.add(f)

	// By-IP lookups of pods both hold, the two servers in turn.
	var refs []podRef
	for i := 0; i < third && len(refs) < 1000; i += max(1, third/1200) {
		if ref := r.p.ref(i); !ref.HostNetwork {
			refs = append(refs, ref)
		}
	}
	url := func(k *kubeindex) func(i int) string {
		return func(i int) string { return k.base + "/api/v1/ip/" + refs[i%len(refs)].IP }
	}
	client := loopbackClient(2) // one keep-alive connection to each
	defer client.CloseIdleConnections()
	buf := make([]byte, 64<<10)
	if _, _, err := pairedLatencies(ctx, client, 200, url(ks[0]), url(ks[1]), buf); err != nil {
		return err
	}
	pairs := make([][][2]float64, len(latencyTargets))
	for round := range r.o.Rounds {
		shift := func(u func(int) string) func(int) string { return func(i int) string { return u(i*7 + round) } }
		full, part, err := pairedLatencies(ctx, client, r.o.LatencyRequests, shift(url(ks[0])), shift(url(ks[1])), buf)
		if err != nil {
			return err
		}
		for t, lt := range latencyTargets {
			pairs[t] = append(pairs[t], [2]float64{ms(percentile(full, lt.q)), ms(percentile(part, lt.q))})
		}
		r.logf("scale by-IP latency round %d: %d pods p50 %v p99 %v, %d pods p50 %v p99 %v (%d each)", round,
			sizes[0], percentile(full, .5), percentile(full, .99), sizes[1], percentile(part, .5), percentile(part, .99), len(full))
	}
	lookups := fmt.Sprintf("sequential over keep-alive loopback HTTP, one client, the two kubeindexes in turn (which goes first alternating), %d requests each per round over %d pods both hold",
		r.o.LatencyRequests, len(refs))
	for t, lt := range latencyTargets {
		target, met := information, func(float64) bool { return true }
		if lt.q == .50 {
			target, met = "ratio <= 1.1", func(x float64) bool { return x <= 1.1 }
		}
		f := pairFigure(name("by-IP latency "+lt.label), "ms", against, target, pairs[t], kOverC, met)
		f.Note = lookups
		r.add(f)
	}

	syncNote := fmt.Sprintf("each round a fresh kubeindex of each, one after the other (which goes first alternating), from process start to /readyz; the N/3 one's list is filtered by the API server (field selector: %d terms)",
		strings.Count(selectors[1], ",")+1)
	f = pairFigure(name("initial sync wall per pod"), "µs", against, information, wall, kOverC, func(float64) bool { return true })
	f.Note = syncNote
	r.add(f)
	f = pairFigure(name("initial sync CPU per pod"), "µs", against, information, cpu, kOverC, func(float64) bool { return true })
	f.Note = "kubeindex's CPU (the kernel's CPU clock of the process) until ready; " + syncNote
	r.add(f)
	r.report.Context = append(r.report.Context, fmt.Sprintf("scale: N = %d pods against N/3 = %d (the plan's first, namespaces bench-000 on)", r.p.n, third))
	return nil
}

// idleGC waits, at most within, for k's first GC after its after-th with
// nothing asked of it, and returns the heap that GC marked live (MB), NaN
// if none came.
func idleGC(ctx context.Context, k *kubeindex, after int, within time.Duration) (float64, error) {
	deadline := time.Now().Add(within)
	for len(k.gcs()) <= after && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	g := k.gcs()
	if len(g) <= after {
		return math.NaN(), nil
	}
	return float64(g[after]), nil
}
