package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// runner holds one run's processes and clients.
type runner struct {
	o            Options
	c            *cluster.Cluster
	cs           *kubernetes.Clientset
	p            plan
	dir          string
	kubeindex    string // binaries
	echoBin      string
	informer     string
	feedBin      string // the fan-out ceiling's fake source and comparison
	broadcastBin string
	sqliteBin    string     // SQLite beside kubeindex, for the questions
	main         *kubeindex // 5 indexes, synced; serves figures 1, 2, 3, 5, 6
	procs        []*proc    // everything started, stopped at the end
	report       *Report
	sampleRefs   []podRef // pod-network pods the lookups use
	// informerHeap is the typed informer's heap per sync round (bytes);
	// podJSON the mean size of a stored pod (bytes).
	informerHeap []float64
	podJSON      float64
	echoBase     string // the echo server, for the latency floor
	// builds are the other kubeindex codes asked beside main (Options.Builds).
	builds []*otherBuild
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.o.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// Run seeds c and measures every figure. c must be a cluster this run may
// fill with pods (the seed is skipped if a previous Run on the same cluster
// seeded the same number). The report is returned even when a later step
// fails, with the figures measured so far.
func Run(ctx context.Context, c *cluster.Cluster, o Options) (*Report, error) {
	o = o.withDefaults()
	begin := time.Now()
	r := &runner{o: o, c: c, p: plan{n: o.Pods}, report: &Report{
		Date: time.Now().Format("2006-01-02"), Pods: o.Pods, Rounds: o.Rounds, CPUs: runtime.NumCPU()}}
	defer func() {
		for _, p := range r.procs {
			p.stop()
		}
		r.report.Elapsed = time.Since(begin).Round(time.Second).String()
	}()
	err := r.run(ctx)
	r.report.Elapsed = time.Since(begin).Round(time.Second).String()
	if o.Out != "" {
		if werr := r.report.WriteJSON(o.Out); werr != nil && err == nil {
			err = werr
		}
	}
	return r.report, err
}

func (r *runner) run(ctx context.Context) error {
	if err := raiseFileLimit(); err != nil {
		return fmt.Errorf("raising the open-file limit: %w", err)
	}
	var err error
	if r.dir, err = os.MkdirTemp("", "kubeindex-bench-"); err != nil {
		return err
	}
	defer os.RemoveAll(r.dir)
	if r.builds, err = parseBuilds(r.o.Builds); err != nil {
		return err
	}
	if err := r.buildAll(ctx); err != nil {
		return err
	}
	if err := r.buildOthers(ctx); err != nil {
		return err
	}
	steps := []step{
		{"sync", r.initialSync}, {"rate", r.requestRate}, {"latency", r.lookupLatency},
		{"heap", r.heap}, {"fanout", r.fanOut}, {"upkeep", r.upkeep},
		{"kinformers", r.kubeInformers}, {"klist", r.kubeList}, {"kwatch", r.kubeWatch},
		{"idle", r.idleCost}, {"fanfloor", r.fanFloor}, {"questions", r.askQuestions},
		{"proto", r.protobufInformers}, {"shards", r.shardFigures},
		{"fleet", r.fleetFigures},
		{"scale", r.scale}, // last: it stops the main kubeindex
	}
	for _, f := range r.o.Figures {
		if !slices.ContainsFunc(steps, func(s step) bool { return s.name == f }) {
			names := make([]string, len(steps))
			for i, s := range steps {
				names[i] = s.name
			}
			return fmt.Errorf("unknown figure %q (known: %s)", f, strings.Join(names, ", "))
		}
	}
	// Figures of simulated clusters only need no seeded cluster: asked
	// alone, they skip the seed and the sync figure.
	seeded := !SimulatedOnly(r.o.Figures)
	if seeded {
		if r.cs, err = writeClient(r.c.RESTConfig()); err != nil {
			return err
		}
		if err := seed(ctx, r.cs, r.p, r.logf); err != nil {
			return err
		}
		for i := 0; i < r.p.n && len(r.sampleRefs) < 1000; i += max(1, r.p.n/1200) {
			if ref := r.p.ref(i); !ref.HostNetwork {
				r.sampleRefs = append(r.sampleRefs, ref)
			}
		}
	}
	want := slices.Clone(r.o.Figures)
	if slices.Contains(want, "latency") || slices.Contains(want, "heap") {
		want = append(want, "rate") // it starts the echo server and measures the body sizes they use
	}
	for i, step := range steps {
		// The sync figure runs whenever pods are seeded: its last
		// kubeindex serves the others.
		if (i > 0 || !seeded) && len(want) > 0 && !slices.Contains(want, step.name) {
			continue
		}
		if err := step.run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// simulatedFigures are the figures whose clusters are all simulated
// (the demo's fake API server): asked alone, the run seeds nothing.
var simulatedFigures = []string{"fleet"}

// SimulatedOnly tells whether every figure asked is one of simulated
// clusters: Run then needs no test cluster (it may be nil).
func SimulatedOnly(figures []string) bool {
	return len(figures) > 0 && !slices.ContainsFunc(figures, func(f string) bool { return !slices.Contains(simulatedFigures, f) })
}

// step is one figure's measurement.
type step struct {
	name string
	run  func(context.Context) error
}

func (r *runner) buildAll(ctx context.Context) error {
	testDir, rootDir, err := moduleDirs()
	if err != nil {
		return err
	}
	r.kubeindex = filepath.Join(r.dir, "kubeindex")
	r.echoBin = filepath.Join(r.dir, "benchecho")
	r.informer = filepath.Join(r.dir, "benchinformer")
	r.feedBin = filepath.Join(r.dir, "benchfeed")
	r.broadcastBin = filepath.Join(r.dir, "benchbroadcast")
	r.sqliteBin = filepath.Join(r.dir, "benchsqlite")
	r.logf("building kubeindex, benchecho, benchinformer, benchfeed, benchbroadcast, benchsqlite")
	for _, b := range []struct{ dir, pkg, out string }{
		{rootDir, "./cmd/kubeindex", r.kubeindex},
		{testDir, "./cmd/benchecho", r.echoBin},
		{testDir, "./cmd/benchinformer", r.informer},
		{rootDir, "./demo/cmd/benchfeed", r.feedBin},
		{testDir, "./cmd/benchbroadcast", r.broadcastBin},
		{filepath.Join(testDir, "sqlite"), "./cmd/benchsqlite", r.sqliteBin},
	} {
		if err := build(ctx, b.dir, b.pkg, b.out); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) track(p *proc) *proc {
	r.procs = append(r.procs, p)
	return p
}

func (r *runner) add(f *Figure) {
	r.report.Figures = append(r.report.Figures, f)
	if f.Against == "" {
		r.logf("figure %q: kubeindex %s %s (%s)", f.Name, num(f.Kubeindex), f.Unit, f.Target)
		return
	}
	r.logf("figure %q: kubeindex %s %s, %s %s, ratio %s (%s)", f.Name, num(f.Kubeindex), f.Unit, f.Against, num(f.Comparison), ratioText(f.Ratio), f.Target)
}

// initialSync starts kubeindex and a typed informer, one after the other,
// for each round, and compares their CPU and wall time from process start
// to synced. The last kubeindex stays up as the main instance.
//
// Each build (Options.Builds) syncs in the same rounds, alone (stopped
// once synced; the main kubeindex settled when it went first), before
// the main kubeindex in even rounds and after it in odd ones: its
// figures are against the same round's informer, and the main
// kubeindex's against it, round by round.
func (r *runner) initialSync(ctx context.Context) error {
	var cpu, wall [][2]float64
	others := make([]struct{ cpu, wall, mainCPU, mainWall [][2]float64 }, len(r.builds))
	r.informerHeap = nil
	for round := range r.o.slowRounds() {
		// The last round's kubeindex goes first: at 150,000 pods two of
		// them beside the typed informer and the API server would not fit
		// in 24 GiB.
		if r.main != nil {
			r.main.stop()
		}
		type synced struct{ wall, cpu time.Duration }
		var builds []synced
		syncBuilds := func() error {
			for i, b := range r.builds {
				k, bWall, bCPU, err := r.syncKubeindexOf(ctx, b.bin, fmt.Sprintf("kubeindex-build-%d-sync-%d", i, round), "", r.p.n)
				if err != nil {
					return fmt.Errorf("build %s: %w", b.label, err)
				}
				k.stop()
				builds = append(builds, synced{bWall, bCPU})
			}
			return nil
		}
		// The builds go first in even rounds and after the main
		// kubeindex (once it has settled) in odd ones: whichever
		// starts right after another process stopped may pay for it.
		if round%2 == 0 {
			if err := syncBuilds(); err != nil {
				return err
			}
		}
		k, kWall, kCPU, err := r.syncKubeindex(ctx, fmt.Sprintf("kubeindex-sync-%d", round), "", r.p.n)
		if err != nil {
			return err
		}
		r.main = k
		if round%2 == 1 && len(r.builds) > 0 {
			settle(ctx, []*otherBuild{{k: k}}, 30*time.Second)
			if err := syncBuilds(); err != nil {
				return err
			}
		}
		iWall, iCPU, heap, err := r.runInformer(ctx, podSelector)
		if err != nil {
			return err
		}
		r.informerHeap = append(r.informerHeap, heap)
		r.logf("sync round %d: kubeindex %v wall %v CPU; informer %v wall %v CPU", round,
			kWall.Round(time.Millisecond), kCPU, iWall.Round(time.Millisecond), iCPU)
		cpu = append(cpu, [2]float64{kCPU.Seconds(), iCPU.Seconds()})
		wall = append(wall, [2]float64{kWall.Seconds(), iWall.Seconds()})
		for i, s := range builds {
			r.logf("sync round %d: build %s %v wall %v CPU", round, r.builds[i].label, s.wall.Round(time.Millisecond), s.cpu)
			o := &others[i]
			o.cpu = append(o.cpu, [2]float64{s.cpu.Seconds(), iCPU.Seconds()})
			o.wall = append(o.wall, [2]float64{s.wall.Seconds(), iWall.Seconds()})
			o.mainCPU = append(o.mainCPU, [2]float64{kCPU.Seconds(), s.cpu.Seconds()})
			o.mainWall = append(o.mainWall, [2]float64{kWall.Seconds(), s.wall.Seconds()})
		}
	}
	r.main.syncedGCs = len(r.main.gcs())
	r.add(pairFigure("initial sync CPU", "s", "typed informer", "ratio <= 0.5", cpu, kOverC, func(x float64) bool { return x <= 0.5 }))
	r.add(pairFigure("initial sync wall", "s", "typed informer", "ratio <= 1.0", wall, kOverC, func(x float64) bool { return x <= 1.0 }))
	for i, b := range r.builds {
		o := others[i]
		r.add(pairFigure(b.figureName("initial sync CPU"), "s", "typed informer", "ratio <= 0.5", o.cpu, kOverC, func(x float64) bool { return x <= 0.5 }))
		r.add(pairFigure(b.figureName("initial sync wall"), "s", "typed informer", "ratio <= 1.0", o.wall, kOverC, func(x float64) bool { return x <= 1.0 }))
		always := func(float64) bool { return true }
		r.add(pairFigure("initial sync CPU vs "+b.label, "s", "build "+b.label+", same rounds", information, o.mainCPU, kOverC, always))
		r.add(pairFigure("initial sync wall vs "+b.label, "s", "build "+b.label+", same rounds", information, o.mainWall, kOverC, always))
	}
	return nil
}

// syncKubeindex starts a kubeindex (five indexes) on the seeded pods that
// also match fieldSelector (all if empty), waits until it is ready, checks
// that it holds want pods, and returns it with its wall time from process
// start to ready and the CPU it used meanwhile.
func (r *runner) syncKubeindex(ctx context.Context, name, fieldSelector string, want int) (k *kubeindex, wall, cpu time.Duration, err error) {
	return r.syncKubeindexOf(ctx, r.kubeindex, name, fieldSelector, want)
}

// syncKubeindexOf is syncKubeindex of the kubeindex binary bin.
func (r *runner) syncKubeindexOf(ctx context.Context, bin, name, fieldSelector string, want int) (k *kubeindex, wall, cpu time.Duration, err error) {
	k, err = startKubeindex(bin, r.dir, r.c.Kubeconfig, name, podSelector, fieldSelector, fiveIndexes)
	if err != nil {
		return nil, 0, 0, err
	}
	r.track(k.proc)
	if wall, err = k.waitNotified(ctx, 10*time.Minute); err != nil {
		return nil, 0, 0, err
	}
	if cpu, err = k.cpu(); err != nil {
		return nil, 0, 0, err
	}
	k.syncedGCs = len(k.gcs())
	st, err := k.status(ctx)
	if err != nil {
		return nil, 0, 0, err
	}
	if st.Count != want {
		return nil, 0, 0, fmt.Errorf("%s synced %d pods, want %d", name, st.Count, want)
	}
	return k, wall, cpu, nil
}

// runInformer runs the typed informer process to sync and its heap line.
func (r *runner) runInformer(ctx context.Context, selector string) (wall, cpu time.Duration, heap float64, err error) {
	p, err := startProc("informer", r.informer, []string{"--kubeconfig", r.c.Kubeconfig, "--selector", selector, "--hold"}, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	defer p.stop()
	timeout := time.After(10 * time.Minute)
	for {
		select {
		case line := <-p.stdoutC:
			switch {
			case line == "SYNCED":
				wall = time.Since(p.started)
				if cpu, err = p.cpu(); err != nil {
					return 0, 0, 0, err
				}
				if _, err := io.WriteString(p.stdin, "\n"); err != nil { // measure the heap now
					return 0, 0, 0, fmt.Errorf("informer: %w", err)
				}
			case strings.HasPrefix(line, "HEAP "):
				_, err := fmt.Sscan(strings.TrimPrefix(line, "HEAP "), &heap)
				return wall, cpu, heap, err
			}
		case <-p.exited:
			return 0, 0, 0, fmt.Errorf("informer exited: %v: %s", p.err, p.logTail())
		case <-timeout:
			return 0, 0, 0, fmt.Errorf("informer not synced in 10m")
		case <-ctx.Done():
			return 0, 0, 0, ctx.Err()
		}
	}
}

// requestRate compares requests/s of GET by key and by IP with the echo
// server answering bodies of the same size, rounds interleaved. Each build
// (Options.Builds) is asked in the same rounds, each against echo.
//
// Echo answers as many distinct bodies as kubeindex answers objects, in
// the same turn (echoSet): one body asked again and again stays in the
// CPU's caches, which a thousand stored objects do not. Echo answering
// one body is asked in the same rounds too, as information.
func (r *runner) requestRate(ctx context.Context) error {
	echo, err := startProc("benchecho", r.echoBin, nil, nil)
	if err != nil {
		return err
	}
	r.track(echo)
	select {
	case line := <-echo.stdoutC:
		r.echoBase = "http://" + strings.TrimPrefix(line, "READY ")
	case <-time.After(30 * time.Second):
		return fmt.Errorf("benchecho not ready: %s", echo.logTail())
	}
	if err := r.startOthers(ctx); err != nil {
		return err
	}
	servers := r.servers()
	settle(ctx, servers, time.Minute)
	client := loopbackClient(r.o.Concurrency)
	urls := func(base, kind string) []string {
		var out []string
		for _, ref := range r.sampleRefs {
			if kind == "by-IP lookup" {
				out = append(out, base+"/api/v1/ip/"+ref.IP)
			} else {
				out = append(out, base+"/api/v1/pods/"+ref.Namespace+"/"+ref.Name)
			}
		}
		return out
	}
	// Asked in turn: the servers, echo's set, echo's one body.
	set, one := len(servers), len(servers)+1
	perms := orders(len(servers) + 2)
	pids := make([]int, 0, len(servers)+2)
	for _, s := range servers {
		pids = append(pids, s.k.cmd.Process.Pid)
	}
	pids = append(pids, echo.cmd.Process.Pid, echo.cmd.Process.Pid)
	for _, kind := range []string{"GET by key", "by-IP lookup"} {
		size, err := bodySize(ctx, client, urls(r.main.base, kind))
		if err != nil {
			return err
		}
		if kind == "GET by key" {
			r.podJSON = float64(size - 1) // the stored bytes and a newline
		}
		asked := make([][]string, 0, len(servers)+2)
		for _, s := range servers {
			asked = append(asked, urls(s.k.base, kind))
		}
		var setURLs []string
		for k := range r.sampleRefs {
			setURLs = append(setURLs, r.echoSetURL(size, k))
		}
		asked = append(asked, setURLs, []string{fmt.Sprintf("%s/bytes/%d", r.echoBase, size)})
		// Warm each up: connections, first-use allocations.
		for _, u := range asked {
			if _, _, err := throughput(ctx, client, u, r.o.Concurrency, r.o.RoundTime/4); err != nil {
				return err
			}
		}
		pairs := make([][][2]float64, len(servers))
		onePairs := make([][][2]float64, len(servers))
		cpuPairs := make([][][2]float64, len(servers)) // server CPU per request, µs
		for round := range r.o.Rounds {
			rates := make([]float64, len(asked))
			cpus := make([]roundCPU, len(asked))
			gcs := make([]int, len(servers))
			for _, i := range perms[round%len(perms)] { // no server always follows another
				if i < len(servers) {
					gcs[i] = len(servers[i].k.gcs())
				}
				before := takeCPU(pids[i])
				var n int64
				if rates[i], n, err = throughput(ctx, client, asked[i], r.o.Concurrency, r.o.RoundTime); err != nil {
					return err
				}
				cpus[i] = before.perRequest(takeCPU(pids[i]), n)
				if i < len(servers) {
					gcs[i] = len(servers[i].k.gcs()) - gcs[i]
				}
			}
			e, ec := rates[set], cpus[set]
			for i, s := range servers {
				c := cpus[i]
				r.logf("%s round %d: kubeindex %.0f/s (%d GCs), echo %.0f/s (%d bodies of %d bytes), echo of one body %.0f/s; CPU per request µs, server / client / machine: kubeindex %.1f / %.1f / %.1f, echo %.1f / %.1f / %.1f, echo of one body %.1f / %.1f / %.1f",
					s.figureName(kind), round, rates[i], gcs[i], e, len(setURLs), size, rates[one],
					usOrNaN(c.server), usOrNaN(c.client), usOrNaN(c.machine), usOrNaN(ec.server), usOrNaN(ec.client), usOrNaN(ec.machine),
					usOrNaN(cpus[one].server), usOrNaN(cpus[one].client), usOrNaN(cpus[one].machine))
				pairs[i] = append(pairs[i], [2]float64{rates[i], e})
				onePairs[i] = append(onePairs[i], [2]float64{rates[i], rates[one]})
				cpuPairs[i] = append(cpuPairs[i], [2]float64{usOrNaN(c.server), usOrNaN(ec.server)})
			}
		}
		for i, s := range servers {
			f := pairFigure(s.figureName(kind+" requests/s"), "req/s", echoSame, "ratio >= 0.90", pairs[i], kOverC, func(x float64) bool { return x >= 0.90 })
			f.Note = fmt.Sprintf("concurrency %d, %v rounds, the servers' order permuted round by round, keep-alive loopback, %d-byte bodies, echo's %d distinct as kubeindex's %d objects",
				r.o.Concurrency, r.o.RoundTime, size, len(setURLs), len(r.sampleRefs))
			r.add(f)
			g := pairFigure(s.figureName(kind+" CPU per request"), "µs", echoSame, information, cpuPairs[i], kOverC, func(float64) bool { return true })
			g.Note = "the server process's CPU clock over each requests/s round above, per request answered: what load moves less than the rate"
			r.add(g)
			h := pairFigure(s.figureName(kind+" requests/s vs echo of one body"), "req/s", echoOne, information, onePairs[i], kOverC, func(float64) bool { return true })
			h.Note = "the same rounds; echo answering one body, which stays in the CPU's caches (the comparison before echo answered a set)"
			r.add(h)
		}
	}
	client.CloseIdleConnections()
	return nil
}

// What the request figures compare kubeindex with.
const (
	echoSame = "echo, same body size and count"
	echoOne  = "echo, one body of the same size"
)

// echoSetURL is echo's k-th distinct body of size bytes (see requestRate).
func (r *runner) echoSetURL(size, k int) string {
	return fmt.Sprintf("%s/bytes/%d/%d", r.echoBase, size, k)
}

// heap compares kubeindex's live heap per pod with the pods' JSON and with
// the typed informer. kubeindex's live heap is what its GC trace reports as
// marked live by its next GC while idle (the runtime forces one after two
// minutes without), less that of a kubeindex caching no pod. A GC under
// load also marks what is allocated while it marks, more the busier the
// machine (as the scale figure says): the median of the GCs since it
// synced, which the load of the previous figures and /metrics caused, is
// in the note, and stands in when no idle GC comes.
func (r *runner) heap(ctx context.Context) error {
	base, err := r.emptyHeap(ctx)
	if err != nil {
		return err
	}
	loaded, n, err := syncedHeap(ctx, r.main)
	if err != nil {
		return err
	}
	live, err := idleGC(ctx, r.main, len(r.main.gcs()), r.o.IdleGCWait)
	if err != nil {
		return err
	}
	idle := fmt.Sprintf("idle GC %.0f MB", live)
	if math.IsNaN(live) {
		live, idle = loaded, fmt.Sprintf("no idle GC within %v: the loaded median is used", r.o.IdleGCWait)
	}
	perPod := (live - base) * (1 << 20) / float64(r.p.n)
	if n == 0 {
		perPod = math.NaN()
	}
	note := fmt.Sprintf("kubeindex live heap: %s, median of %d GCs under load %.0f MB; empty kubeindex %.0f MB (GODEBUG=gctrace=1, 1 MB resolution)", idle, n, loaded, base)
	var inf []float64
	for _, h := range r.informerHeap {
		inf = append(inf, h/float64(r.p.n))
	}
	f := &Figure{Name: "live heap per pod", Unit: "B", Kubeindex: perPod, Comparison: r.podJSON,
		Against: "pod's compact JSON, no managedFields", Ratio: perPod / r.podJSON, Target: "ratio <= 1.5", Note: note}
	f.Met = f.Ratio <= 1.5
	r.add(f)
	g := &Figure{Name: "live heap per pod vs informer", Unit: "B", Kubeindex: perPod, Comparison: median(inf),
		Against: "typed client-go informer", Ratio: perPod / median(inf), Target: "ratio <= 0.5",
		Note: "informer heap: its own runtime.GC+HeapAlloc after sync less before start, median of the sync rounds"}
	g.Met = g.Ratio <= 0.5
	r.add(g)
	r.report.Context = append(r.report.Context, fmt.Sprintf("pod JSON without managedFields: %.0f bytes (mean of GET by key bodies)", r.podJSON))
	return nil
}

// emptyHeap is the live heap (MB) of a kubeindex caching no pod, the
// median over five GCs: what a kubeindex's heap per pod is taken above.
func (r *runner) emptyHeap(ctx context.Context) (float64, error) {
	empty, err := startKubeindex(r.kubeindex, r.dir, r.c.Kubeconfig, "kubeindex-empty", noneSelector, "", fiveIndexes)
	if err != nil {
		return 0, err
	}
	r.track(empty.proc)
	defer empty.stop()
	if _, err := empty.waitReady(ctx, time.Minute); err != nil {
		return 0, err
	}
	startGCs := len(empty.gcs())
	if err := collectGarbage(ctx, empty, startGCs+5); err != nil {
		return 0, err
	}
	base, _ := empty.liveHeap(startGCs)
	return base, nil
}

// syncedHeap is k's live heap (MB), the median over the GCs since it
// synced, after making it collect at least three, and how many GCs that
// median is of (0: none, and the heap is -1).
func syncedHeap(ctx context.Context, k *kubeindex) (float64, int, error) {
	if err := collectGarbage(ctx, k, k.syncedGCs+3); err != nil {
		return 0, 0, err
	}
	live, n := k.liveHeap(k.syncedGCs)
	return live, n, nil
}

// collectGarbage makes k allocate (by serving /metrics, which allocates
// and leaves nothing behind) until its GC count reaches n, within three
// minutes: a GC waits for the heap to double, and at 150,000 pods that is
// over a gigabyte of /metrics answers (the runtime also forces one every
// two minutes). kubeindex has no endpoint that forces a GC, on purpose.
func collectGarbage(ctx context.Context, k *kubeindex, n int) error {
	client := loopbackClient(4)
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(3 * time.Minute)
	for len(k.gcs()) < n && time.Now().Before(deadline) {
		if _, _, err := throughput(ctx, client, []string{k.base + "/metrics"}, 4, 500*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// fanOut subscribes many WebSocket clients to the pods watch, measures
// memory per idle connection, then churns pods at a fixed rate and
// measures delivery.
func (r *runner) fanOut(ctx context.Context) error {
	// Memory per idle socket: live heap plus goroutine stacks after GCs,
	// before and after subscribing (RSS would also count the garbage the
	// handshakes left, which no GC has reclaimed yet).
	//
	// The delta is a few tens of MB out of a heap of hundreds: when the
	// heap fell meanwhile (something an earlier figure left was freed, as
	// at 150,000 pods), the delta would be negative, so it is measured
	// again, and a figure that stays negative is reported as not measured,
	// never as met.
	var subs []*subscriber
	defer func() { closeAll(subs) }()
	var perConn, rssPerConn float64
	for attempt := 1; ; attempt++ {
		gcs := len(r.main.gcs())
		if err := collectGarbage(ctx, r.main, gcs+3); err != nil {
			return err
		}
		heapBefore, _ := r.main.liveHeap(gcs + 1)
		stacksBefore := r.main.stacks()
		rssBefore, err := r.main.rss()
		if err != nil {
			return err
		}
		if subs, err = subscribe(ctx, r.main.base, r.o.Subscribers); err != nil {
			return err
		}
		time.Sleep(time.Second) // let the sockets settle
		rssAfter, err := r.main.rss()
		if err != nil {
			return err
		}
		gcs = len(r.main.gcs())
		if err := collectGarbage(ctx, r.main, gcs+3); err != nil {
			return err
		}
		heapAfter, _ := r.main.liveHeap(gcs + 1)
		stacksAfter := r.main.stacks()
		perConn = (heapAfter - heapBefore + float64(stacksAfter-stacksBefore)) * 1024 / float64(len(subs))
		rssPerConn = float64(rssAfter-rssBefore) / 1024 / float64(len(subs))
		if perConn >= 0 || attempt == 3 {
			break
		}
		r.logf("memory per idle WebSocket, try %d: the live heap fell by %.0f MB while %d sockets opened; measuring again",
			attempt, heapBefore-heapAfter, len(subs))
		closeAll(subs)
		subs = nil
	}
	note := fmt.Sprintf("live heap + goroutine stacks after GC, delta over %d subscribers (snapshot=false), 1 MB resolution; RSS delta: %.1f KiB per socket",
		len(subs), rssPerConn)
	if perConn < 0 {
		note = fmt.Sprintf("not measured: the live heap fell by %.1f KiB per socket in three tries while the sockets opened; ", -perConn) + note
		perConn = math.NaN()
	}
	f := absFigure("memory per idle WebSocket", "KiB", "<= 32 KiB", []float64{perConn}, func(v float64) bool { return v <= 32 })
	f.Note = note
	r.add(f)

	var fps, p99, ackP99 []float64
	var notes, own, shares []string
	rounds, resynced, next := r.o.slowRounds(), false, 0
	for round := range rounds {
		c, err := r.churnRound(ctx, subs, round, next, r.o.ChurnRate)
		if err != nil {
			return err
		}
		fps = append(fps, c.out.FramesPerSec)
		p99 = append(p99, ms(c.out.P99))
		ackP99 = append(ackP99, ms(c.out.AckP99))
		notes = append(notes, fmt.Sprintf("%d/%d frames, %d resyncs, the API server took %.0f updates/s, p99 from send %.0f ms",
			c.out.Frames, c.out.Expected, c.out.Resyncs, float64(c.res.Sent)/c.res.Duration.Seconds(), ms(c.out.P99)))
		own = append(own, c.split.own())
		shares = append(shares, c.split.cores())
		next += c.res.Sent
		if resynced = c.out.Resyncs > 0; resynced {
			break // those subscriptions have ended
		}
	}
	// The same subscribers under a light churn, that leaves the machine
	// idle most of the time: the delay a dashboard sees in ordinary
	// operation, where the rounds above see a saturated machine.
	var light []string
	if resynced {
		light = append(light, "not measured: subscriptions were told to resync above")
	}
	for round := 0; round < rounds && !resynced; round++ {
		c, err := r.churnRound(ctx, subs, rounds+round, next, r.o.LightChurnRate)
		if err != nil {
			return err
		}
		next += c.res.Sent
		resynced = c.out.Resyncs > 0
		light = append(light, fmt.Sprintf("%d/%d frames, %d resyncs, p50 %.0f ms p99 %.0f ms, kubeindex's own %s, kubeindex %.2f cores (%.1f µs per frame)",
			c.out.Frames, c.out.Expected, c.out.Resyncs, ms(c.out.AckP50), ms(c.out.AckP99), c.split.own(), c.split.kubeindex, float64(c.split.perFrame)/float64(time.Microsecond)))
	}
	offered := fmt.Sprintf("%d subscribers, %d pod updates/s for %v offered (%d frames/s); ", len(subs), r.o.ChurnRate, r.o.ChurnTime, r.o.ChurnRate*len(subs))
	// Information, not a target: with the test API server as the source,
	// the rate follows its writes on the shared cores; the fan-out targets
	// are the fanfloor figures, against a bare broadcaster.
	f = absFigure("stream fan-out frames/s", "frames/s", information, fps, func(float64) bool { return true })
	f.Note = offered + strings.Join(notes, "; ") + fmt.Sprintf("; CPU of the %d cores by round: %s", runtime.NumCPU(), strings.Join(shares, "; "))
	r.add(f)
	f = absFigure("stream event-to-client p99", "ms", information, ackP99, func(float64) bool { return true })
	f.Note = fmt.Sprintf("at the fan-out above, from the API server's answer to the update (the write committed: the event exists) to the client's read; "+
		"from the update's send, the API server's queueing and write included, the rounds' p99 were %v ms; "+
		"kubeindex's own share, from the event's arrival to the end of its write (kubeindex_stream_delivery_seconds), by round: %s; "+
		"under a light churn of %d updates/s (%d frames/s), by round: %s",
		p99, strings.Join(own, "; "), r.o.LightChurnRate, r.o.LightChurnRate*len(subs), strings.Join(light, "; "))
	r.add(f)
	return nil
}

// fanOutRound is one fan-out round: what the churn sent, what the
// subscribers received and where the machine's time went.
type fanOutRound struct {
	res   churnResult
	out   fanOut
	split fanOutSplit
}

// churnRound updates pods at rate per second for ChurnTime, from the
// start-th pod of the plan on, and waits until every subscriber has every
// event.
func (r *runner) churnRound(ctx context.Context, subs []*subscriber, round, start, rate int) (fanOutRound, error) {
	count := rate * int(r.o.ChurnTime/time.Second)
	beforeFrames := frameCounts(subs)
	before, err := r.fanOutMeter(ctx)
	if err != nil {
		return fanOutRound{}, err
	}
	begin := time.Now()
	res, err := churn(ctx, r.cs, r.p, start, count, rate)
	if err != nil {
		return fanOutRound{}, err
	}
	out := collect(subs, beforeFrames, int64(res.Sent), begin, 30*time.Second, res.Acked)
	after, err := r.fanOutMeter(ctx)
	if err != nil {
		return fanOutRound{}, err
	}
	split := after.since(before, out.Frames)
	r.logf("fan-out round %d at %d updates/s: %d updates in %v, %d/%d frames, %.0f frames/s, from send p50 %v p99 %v, from the API server's answer p50 %v p99 %v, %d resyncs",
		round, rate, res.Sent, res.Duration.Round(time.Millisecond), out.Frames, out.Expected, out.FramesPerSec, out.P50, out.P99,
		out.AckP50, out.AckP99, out.Resyncs)
	r.logf("fan-out round %d: %s", round, split)
	return fanOutRound{res: res, out: out, split: split}, nil
}

// fanOutMeter is what a fan-out round is measured against: kubeindex's
// delivery histogram and the CPU time of each process on the machine.
type fanOutMeter struct {
	at                          time.Time
	delivery                    buckets
	kubeindex, cluster, clients time.Duration
}

func (r *runner) fanOutMeter(ctx context.Context) (fanOutMeter, error) {
	m := fanOutMeter{at: time.Now()}
	var errs [4]error
	m.delivery, errs[0] = r.main.delivery(ctx)
	m.kubeindex, errs[1] = r.main.cpu()
	m.cluster, errs[2] = cpuOf(r.c.PID())
	m.clients, errs[3] = cpuOf(os.Getpid())
	return m, firstErr(errs[:]...)
}

// fanOutSplit is where a round's time went: the CPU each process used
// (cores), kubeindex's CPU per frame delivered, and kubeindex's own
// publication-to-write delay.
type fanOutSplit struct {
	kubeindex, cluster, clients float64 // cores
	perFrame                    time.Duration
	p50, p99, observed          float64 // seconds (bucket bounds), count
}

func (m fanOutMeter) since(before fanOutMeter, frames int64) fanOutSplit {
	wall := m.at.Sub(before.at).Seconds()
	s := fanOutSplit{
		kubeindex: (m.kubeindex - before.kubeindex).Seconds() / wall,
		cluster:   (m.cluster - before.cluster).Seconds() / wall,
		clients:   (m.clients - before.clients).Seconds() / wall,
	}
	if frames > 0 {
		s.perFrame = (m.kubeindex - before.kubeindex) / time.Duration(frames)
	}
	s.p50, s.observed = quantileBound(before.delivery, m.delivery, .50)
	s.p99, _ = quantileBound(before.delivery, m.delivery, .99)
	return s
}

func (s fanOutSplit) cores() string {
	return fmt.Sprintf("API server and etcd %.2f, kubeindex %.2f (%.1f µs per frame), the harness's clients and churn %.2f",
		s.cluster, s.kubeindex, float64(s.perFrame)/float64(time.Microsecond), s.clients)
}

// own is kubeindex's own delivery delay, as histogram bucket bounds.
func (s fanOutSplit) own() string {
	if s.observed == 0 {
		return "no deliveries observed"
	}
	return fmt.Sprintf("p50 <= %g ms, p99 <= %g ms (%.0f deliveries)", s.p50*1000, s.p99*1000, s.observed)
}

func (s fanOutSplit) String() string {
	return fmt.Sprintf("CPU: %s; kubeindex's own delivery %s", s.cores(), s.own())
}

// upkeep runs a kubeindex without custom indexes beside the main one (five
// indexes) and compares their CPU per event over the same churn. Each
// build (Options.Builds) watches the same churn with the five indexes:
// its CPU per event against the bare one's, and the main one's against
// it, round by round.
func (r *runner) upkeep(ctx context.Context) error {
	if err := r.startOthers(ctx); err != nil {
		return err
	}
	bare, err := startKubeindex(r.kubeindex, r.dir, r.c.Kubeconfig, "kubeindex-noindex", podSelector, "", noIndexes)
	if err != nil {
		return err
	}
	r.track(bare.proc)
	if _, err := bare.waitReady(ctx, 10*time.Minute); err != nil {
		return err
	}
	// The processes just started build their standing indexes after
	// the sync: let them finish first.
	settle(ctx, append([]*otherBuild{{k: bare}}, r.builds...), 30*time.Second)
	// procs are the processes measured: the main one, the bare one, then
	// the builds'.
	procs := []*kubeindex{r.main, bare}
	for _, b := range r.builds {
		procs = append(procs, b.k)
	}
	var pairs [][2]float64
	others := make([]struct{ bare, main [][2]float64 }, len(r.builds))
	offset := r.p.n / 2
	for round := range r.o.upkeepRounds() {
		cpu0 := make([]time.Duration, len(procs))
		gcs := make([]int, len(procs))
		for i, k := range procs {
			c, err := k.cpu()
			if err != nil {
				return err
			}
			cpu0[i], gcs[i] = c, len(k.gcs())
		}
		res, err := churn(ctx, r.cs, r.p, offset+round*r.o.UpkeepEvents, r.o.UpkeepEvents, 0)
		if err != nil {
			return err
		}
		rv := fmt.Sprint(res.LastRV)
		for _, k := range procs {
			if err := k.waitRV(ctx, rv, time.Minute); err != nil {
				return err
			}
		}
		per := make([]float64, len(procs))
		for i, k := range procs {
			c, err := k.cpu()
			if err != nil {
				return err
			}
			per[i] = float64(c-cpu0[i]) / float64(time.Microsecond) / float64(res.Sent)
		}
		line := fmt.Sprintf("upkeep round %d: %d events in %v; 5 indexes %.1f µs/event (%s), none %.1f µs/event (%s)", round, res.Sent,
			res.Duration.Round(time.Millisecond), per[0], gcsSince(procs[0], gcs[0]), per[1], gcsSince(procs[1], gcs[1]))
		for i, b := range r.builds {
			line += fmt.Sprintf("; build %s %.1f µs/event (%s)", b.label, per[2+i], gcsSince(procs[2+i], gcs[2+i]))
			others[i].bare = append(others[i].bare, [2]float64{per[2+i], per[1]})
			others[i].main = append(others[i].main, [2]float64{per[0], per[2+i]})
		}
		r.logf("%s", line)
		pairs = append(pairs, [2]float64{per[0], per[1]})
	}
	note := fmt.Sprintf("%d updates per round, both processes watching the same pods at once; indexes ip, node, owner, label app, path spec.containers.#.image; CPU from the kernel's CPU clock of each process", r.o.UpkeepEvents)
	f := pairFigure("index upkeep CPU per event", "µs", "same churn, no custom index", "ratio <= 1.3", pairs, kOverC, func(x float64) bool { return x <= 1.3 })
	f.Note = note
	r.add(f)
	for i, b := range r.builds {
		f := pairFigure(b.figureName("index upkeep CPU per event"), "µs", "same churn, no custom index", "ratio <= 1.3", others[i].bare, kOverC, func(x float64) bool { return x <= 1.3 })
		f.Note = note
		r.add(f)
		always := func(float64) bool { return true }
		r.add(pairFigure("index upkeep CPU per event vs "+b.label, "µs", "build "+b.label+", same rounds", information, others[i].main, kOverC, always))
	}
	return nil
}

// gcsSince says how many GCs k ran since it had run before, and the
// live heap the last one marked.
func gcsSince(k *kubeindex, before int) string {
	g := k.gcs()
	if len(g) <= before {
		return "no GC"
	}
	return fmt.Sprintf("%d GCs, last live %d MB", len(g)-before, g[len(g)-1])
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
