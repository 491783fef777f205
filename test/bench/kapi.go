package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// The figures of the Kubernetes API that kubeindex serves under /k8s:
// the API server's load under N informers, a full list, and
// watch delivery, each against the API server itself.

// kubeTarget is a server of the Kubernetes API: the API server itself, or
// kubeindex's /k8s.
type kubeTarget struct {
	name   string
	base   string // up to and excluding /api/v1
	client func() *http.Client
}

func (r *runner) kubeTargets() ([2]kubeTarget, error) {
	// No gzip either way: at N = 100 the API server would spend its time
	// compressing 100 lists of the pods, which no figure here is about.
	cfg := r.c.RESTConfig()
	cfg.DisableCompression = true
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return [2]kubeTarget{}, err
	}
	plain := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200, IdleConnTimeout: time.Minute, DisableCompression: true}}
	return [2]kubeTarget{
		{name: "API server", base: cfg.Host, client: func() *http.Client { return hc }},
		{name: "kubeindex /k8s", base: r.main.base + "/k8s", client: func() *http.Client { return plain }},
	}, nil
}

var listRV = regexp.MustCompile(`"resourceVersion":"(\d+)"`)

// rawList GETs url and discards the body, returning the list's
// resourceVersion (its metadata comes first) and the body's size.
func rawList(ctx context.Context, hc *http.Client, url string) (rv string, size int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return "", 0, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	head := make([]byte, 4096)
	n, err := io.ReadFull(resp.Body, head)
	if err != nil && err != io.ErrUnexpectedEOF {
		return "", 0, err
	}
	m := listRV.FindSubmatch(head[:n])
	if m == nil {
		return "", 0, fmt.Errorf("GET %s: no resourceVersion in the list's first %d bytes", url, n)
	}
	rest, err := io.Copy(io.Discard, resp.Body)
	return string(m[1]), int64(n) + rest, err
}

// rawInformer is what a pods informer asks of a server, without decoding:
// a list at resourceVersion=0 (as the reflector's first list), then a
// watch from the list's resourceVersion, whose events it counts and whose
// churn stamps it times. Its memory is a read buffer, whatever N.
type rawInformer struct {
	listed  chan struct{}
	done    chan struct{}
	err     error
	events  atomic.Int64
	mu      sync.Mutex
	seen    []stamped
	started chan struct{} // closed once the watch answered
}

func startRawInformer(ctx context.Context, hc *http.Client, base string, rv string) *rawInformer {
	inf := &rawInformer{listed: make(chan struct{}), done: make(chan struct{}), started: make(chan struct{})}
	go func() {
		defer close(inf.done)
		inf.err = inf.run(ctx, hc, base, rv)
	}()
	return inf
}

func (inf *rawInformer) run(ctx context.Context, hc *http.Client, base, rv string) error {
	if rv == "" {
		var err error
		if rv, _, err = rawList(ctx, hc, base+"/api/v1/pods?resourceVersion=0"); err != nil {
			return err
		}
	}
	close(inf.listed)
	url := base + "/api/v1/pods?watch=true&allowWatchBookmarks=true&resourceVersion=" + rv
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("watch %s: %s: %s", url, resp.Status, b)
	}
	close(inf.started)
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			line = append(line, chunk...)
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		now := time.Now().UnixNano()
		if line != nil {
			chunk = append(line, chunk...)
			line = line[:0:0]
		}
		if !bytes.Contains(chunk[:min(len(chunk), 48)], typeModified) {
			continue
		}
		inf.events.Add(1)
		if i := bytes.Index(chunk, stampNeedle); i >= 0 {
			rest := chunk[i+len(stampNeedle):]
			if j := bytes.IndexByte(rest, '"'); j > 0 {
				var sent int64
				if _, err := fmt.Sscan(string(rest[:j]), &sent); err == nil {
					inf.mu.Lock()
					inf.seen = append(inf.seen, stamped{sent, now})
					inf.mu.Unlock()
				}
			}
		}
	}
}

// startInformers starts n raw informers and waits until each is watching.
func startInformers(ctx context.Context, hc *http.Client, base, rv string, n int) ([]*rawInformer, error) {
	infs := make([]*rawInformer, n)
	for i := range infs {
		infs[i] = startRawInformer(ctx, hc, base, rv)
	}
	deadline := time.After(10 * time.Minute)
	for i, inf := range infs {
		select {
		case <-inf.started:
		case <-inf.done:
			return infs, fmt.Errorf("informer %d of %s: %v", i, base, inf.err)
		case <-deadline:
			return infs, fmt.Errorf("informer %d of %s not watching in 10m", i, base)
		}
	}
	return infs, nil
}

// informerRun is one measurement of the kinformers figure: n reflectors
// on one server, synced (or not, within the bound) and following a churn.
type informerRun struct {
	n        int
	synced   int           // reflectors synced within the bound
	syncWall time.Duration // until the last synced, or the bound
	// failedInformers made failedRequests failed lists or watches, for
	// reasons.
	failedInformers, failedRequests int
	reasons                         string
	lists, watchLists               int64 // requests made
	churnSent                       int
	churnErr                        error
	followers, followed             int // synced when the churn began; of them, saw all of it
	cpu, wall                       time.Duration
	rss0, peak                      int64
	// stopped says why the memory budget stopped the round after
	// stoppedAfter; "" if it ran to its end.
	stopped      string
	stoppedAfter time.Duration
	// notRun says why the round was not run at all: the API server had
	// not come back within the memory budget after an earlier round.
	notRun string
}

func (ir informerRun) String() string {
	if ir.notRun != "" {
		return "NOT RUN: " + ir.notRun
	}
	churn := fmt.Sprintf("churn of %d updates seen whole by %d of the %d synced when it began", ir.churnSent, ir.followed, ir.followers)
	if ir.churnErr != nil {
		churn += fmt.Sprintf(" (the churn failed: %v)", ir.churnErr)
	}
	var stopped string
	if ir.stopped != "" {
		stopped = fmt.Sprintf("STOPPED after %v by the memory budget: %s; ", ir.stoppedAfter.Round(100*time.Millisecond), ir.stopped)
		churn = "no churn"
	}
	return stopped + fmt.Sprintf("%d of %d synced in %v; %s; %d list requests and %d watch-lists asked; failed: %d informers, %d requests (%s); API server CPU %.2f s in %v, RSS %.0f MiB at start, peak %+.0f MiB",
		ir.synced, ir.n, ir.syncWall.Round(100*time.Millisecond), churn, ir.lists, ir.watchLists,
		ir.failedInformers, ir.failedRequests, ir.reasons, ir.cpu.Seconds(), ir.wall.Round(100*time.Millisecond),
		float64(ir.rss0)/(1<<20), float64(ir.peak-ir.rss0)/(1<<20))
}

// apiServerClient is a new HTTP client of the API server, with its own
// connection (client-go shares a transport between equal configs; a Proxy
// function opts out), as each of N agents has.
func (r *runner) apiServerClient() (*http.Client, error) {
	cfg := r.c.RESTConfig()
	cfg.DisableCompression = true
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	return rest.HTTPClientFor(cfg)
}

func plainClient() (*http.Client, error) {
	return &http.Client{Transport: &http.Transport{DisableCompression: true, IdleConnTimeout: time.Minute}}, nil
}

// apiServerRate is the API server's CPU (cores) over d.
func (r *runner) apiServerRate(ctx context.Context, d time.Duration) (float64, error) {
	c0, err := cpuOf(r.c.PID())
	if err != nil {
		return 0, err
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(d):
	}
	c1, err := cpuOf(r.c.PID())
	return (c1 - c0).Seconds() / d.Seconds(), err
}

// settle waits, at most 30 s, until the API server's CPU is back near
// idle, so that one run's tail (lists it is still answering to a client
// gone) is not billed to the next.
func (r *runner) settle(ctx context.Context, idle float64) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		rate, err := r.apiServerRate(ctx, 2*time.Second)
		if err != nil {
			return err
		}
		if rate <= 2*idle+0.1 || time.Now().After(deadline) {
			return nil
		}
	}
}

// profileAPIServer writes a CPU profile of the API server's process (its
// /debug/pprof, which includes etcd's, one process) over d to path.
func (r *runner) profileAPIServer(ctx context.Context, path string, d time.Duration) <-chan error {
	out := make(chan error, 1)
	go func() {
		out <- func() error {
			hc, err := rest.HTTPClientFor(r.c.RESTConfig())
			if err != nil {
				return err
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", r.c.Host, int(d.Seconds())), nil)
			if err != nil {
				return err
			}
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
				return fmt.Errorf("profile: %s: %s", resp.Status, b)
			}
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, resp.Body); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		}()
	}()
	return out
}

// informerRun starts n reflectors in mode on target, waits for them to
// sync within Options.InformerSyncTimeout, churns, waits for the synced
// ones to see the churn, and measures the API server meanwhile. A server
// that fails the reflectors' requests is part of the figure: the run
// records what failed and why, and goes on.
func (r *runner) informerRun(ctx context.Context, t kubeTarget, newClient func() (*http.Client, error), mode informerMode, n int, start *int, profile string) (informerRun, error) {
	ir := informerRun{n: n}
	pid := r.c.PID()
	c0, err := cpuOf(pid)
	if err != nil {
		return ir, err
	}
	if ir.rss0, err = rssOf(pid); err != nil {
		return ir, err
	}
	var prof <-chan error
	if profile != "" {
		prof = r.profileAPIServer(ctx, profile, 30*time.Second)
	}
	stop := make(chan struct{})
	cctx, cancel := context.WithCancel(ctx)
	mem := watchMemory(pid, ir.rss0, r.o.memBudget(), func(why string) {
		r.logf("informers (%s) N=%d via %s: stopping the round: %s", mode, n, t.name, why)
		cancel()
	}, stop)
	begin := time.Now()
	set, err := startInformerSet(cctx, newClient, t.base, mode, n)
	if err == nil {
		ir.synced, ir.syncWall = set.waitSynced(cctx.Done(), begin, begin.Add(r.o.InformerSyncTimeout))
	}
	if err == nil && cctx.Err() == nil {
		followers := set.syncedNow()
		before := set.updateCounts()
		var res churnResult
		res, ir.churnErr = churn(ctx, r.cs, r.p, *start, r.o.LightChurnRate*int(r.o.ChurnTime/time.Second), r.o.LightChurnRate)
		*start += res.Sent
		ir.churnSent, ir.followers = res.Sent, len(followers)
		ir.followed = set.waitUpdates(cctx.Done(), followers, before, int64(res.Sent), time.Now().Add(30*time.Second))
	}
	c1, cerr := cpuOf(pid)
	ir.wall = time.Since(begin)
	close(stop)
	w := <-mem
	ir.peak, ir.stopped, ir.stoppedAfter = w.peak, w.stopped, w.at.Sub(begin)
	cancel()
	set.done.Wait()
	if err := firstErr(ctx.Err(), err, cerr); err != nil {
		return ir, err
	}
	ir.cpu = c1 - c0
	ir.failedInformers, ir.failedRequests, ir.reasons = set.fail.summary()
	ir.lists, ir.watchLists = set.lists.Load(), set.watchList.Load()
	if prof != nil {
		if err := <-prof; err != nil {
			r.logf("API server profile %s: %v", profile, err)
		}
	}
	return ir, nil
}

// kubeInformers measures the API server's CPU and peak RSS while N
// client-go reflectors (see informers.go) sync the pods and then follow a
// churn, through kubeindex and directly, for N = 1, 10, 100, in each of
// the two ways client-go syncs: a list then a watch, and a watch-list.
func (r *runner) kubeInformers(ctx context.Context) error {
	targets, err := r.kubeTargets()
	if err != nil {
		return err
	}
	newClient := [2]func() (*http.Client, error){r.apiServerClient, plainClient}
	idle, err := r.apiServerRate(ctx, 2*r.o.ChurnTime)
	if err != nil {
		return err
	}
	base, err := rssOf(r.c.PID())
	if err != nil {
		return err
	}
	r.logf("informers: the API server idles at %.3f cores, RSS %s", idle, gib(base))
	ns := []int{1, 10, 100}
	for _, m := range r.o.InformerModes {
		if mode := informerMode(m); mode != modeList && mode != modeWatchList {
			return fmt.Errorf("unknown informer mode %q (known: list, watch-list)", m)
		}
	}
	total, _, err := readMeminfo()
	if err != nil {
		return err
	}
	if why := r.o.memBudget().atRest(base, total); why != "" {
		r.logf("informers: not run: %s", why)
		for _, m := range r.o.InformerModes {
			mode := informerMode(m)
			var none []informerRun
			for _, n := range ns {
				ir := informerRun{n: n, notRun: why}
				none = append(none, ir)
				r.add(informerFigure(mode, n, [2]informerRun{ir, ir}, idle, r.o))
			}
			r.add(informerGrowthFigure(mode, none, none, idle))
		}
		return nil
	}
	var profiles string
	if r.o.Dir != "" {
		profiles = filepath.Join(r.o.Dir, "profiles")
		if err := os.MkdirAll(profiles, 0o755); err != nil {
			return err
		}
	}
	start := r.p.n / 3
	// overBudget, once set, says why no further round is run; last is the
	// round before.
	var overBudget string
	var last struct {
		mode informerMode
		n    int
		way  string
	}
	for _, m := range r.o.InformerModes {
		mode := informerMode(m)
		runs := map[string][]informerRun{}
		for _, n := range ns {
			var pair [2]informerRun
			// kubeindex first: the API server's RSS seldom shrinks, so a run
			// after the direct one would hide its own growth.
			for _, ti := range []int{1, 0} {
				t := targets[ti]
				if overBudget == "" {
					if overBudget, err = r.relieveMemory(ctx, base); err != nil {
						return err
					}
					if overBudget != "" {
						overBudget = fmt.Sprintf("after the %s round of %d informers via %s, %s, and did not come down in the %v waited; the rounds left would take the machine's memory (a stopped client does not stop the API server encoding what it asked for)",
							last.mode, last.n, last.way, overBudget, relieveWait)
						r.logf("informers: the rounds left are not run: %s", overBudget)
					}
				}
				if overBudget != "" {
					ir := informerRun{n: n, notRun: overBudget}
					pair[ti] = ir
					runs[t.name] = append(runs[t.name], ir)
					continue
				}
				if err := r.settle(ctx, idle); err != nil {
					return err
				}
				var profile string
				if profiles != "" && n >= 10 {
					profile = filepath.Join(profiles, fmt.Sprintf("kinformers-%s-%s-%d.pprof", mode, [2]string{"direct", "kubeindex"}[ti], n))
				}
				ir, err := r.informerRun(ctx, t, newClient[ti], mode, n, &start, profile)
				if err != nil {
					return err
				}
				pair[ti] = ir
				runs[t.name] = append(runs[t.name], ir)
				r.logf("informers (%s) N=%d via %s: %v", mode, n, t.name, ir)
				last.mode, last.n, last.way = mode, n, t.name
			}
			r.add(informerFigure(mode, n, pair, idle, r.o))
		}
		r.add(informerGrowthFigure(mode, runs[targets[1].name], runs[targets[0].name], idle))
	}
	return nil
}

// informerFigure compares the API server's CPU for n informers through
// kubeindex (pair[1]) and directly (pair[0]). A direct round stopped by the
// memory budget or bounded before every informer synced gives a lower
// bound of the direct cost, so the ratio is an upper bound: below 1 it
// proves the target, above it decides nothing, and the figure is then not
// measured rather than missed (at 150,000 pods the direct round of 100
// informers is stopped after about a second, against kubeindex's three
// minutes).
func informerFigure(mode informerMode, n int, pair [2]informerRun, idle float64, o Options) *Figure {
	name := fmt.Sprintf("API server CPU, %d informers (%s)", n, mode)
	if pair[0].notRun != "" || pair[1].notRun != "" {
		f := pairFigure(name, "s", "directly", "ratio <= 1", nil, kOverC, nil)
		f.Note = fmt.Sprintf("NOT MEASURED: through kubeindex: %v; directly: %v", pair[1], pair[0])
		return f
	}
	f := pairFigure(name, "s", "directly", "ratio <= 1",
		[][2]float64{{pair[1].cpu.Seconds(), pair[0].cpu.Seconds()}}, kOverC, func(x float64) bool { return x <= 1 })
	f.Note = fmt.Sprintf("API server (and etcd, one process) CPU from the informers' start through their sync (bounded at %v) and a churn of %d updates/s for %v; idle it uses %.3f cores; through kubeindex /k8s (measured first): %v; directly: %v",
		o.InformerSyncTimeout, o.LightChurnRate, o.ChurnTime, idle, pair[1], pair[0])
	if pair[0].synced < n {
		f.Note += "; the direct figure is the CPU of the bounded window, a lower bound of what syncing all would cost"
	}
	for ti, way := range [2]string{"direct", "through kubeindex"} {
		if pair[ti].stopped != "" {
			f.Note += fmt.Sprintf("; the %s round was STOPPED after %v by the memory budget (%s): its CPU is that of the window until then, a lower bound",
				way, pair[ti].stoppedAfter.Round(100*time.Millisecond), pair[ti].stopped)
		}
	}
	if (pair[0].stopped != "" || pair[0].synced < n) && !(f.Ratio <= 1) {
		f.Note += fmt.Sprintf("; NOT MEASURED: against the direct lower bound the ratio is at most %.3f, which decides nothing", f.Ratio)
		f.Ratio, f.Rounds[0][2] = math.NaN(), math.NaN()
	}
	f.Met = f.Met && pair[1].stopped == ""
	return f
}

// informerGrowthFigure compares how the API server's CPU grows from 1 to
// 100 informers through kubeindex (k) and directly (d), each for N = 1, 10,
// 100. The target is kubeindex's growth alone. A direct growth taken from a
// round the memory budget stopped compares windows of unrelated length (a
// second against minutes), so it is not given.
func informerGrowthFigure(mode informerMode, k, d []informerRun, idle float64) *Figure {
	f := &Figure{Name: fmt.Sprintf("API server CPU growth, 1 to 100 informers (%s)", mode), Unit: "x",
		Kubeindex: safeDiv(k[2].cpu.Seconds(), k[0].cpu.Seconds()), Comparison: safeDiv(d[2].cpu.Seconds(), d[0].cpu.Seconds()),
		Against: "directly", Target: "<= 1.5 (through kubeindex)"}
	f.Ratio = safeDiv(f.Kubeindex, f.Comparison)
	f.Met = f.Kubeindex <= 1.5 && k[2].synced == 100 && k[2].stopped == ""
	above := func(ir informerRun) float64 { return ir.cpu.Seconds() - idle*ir.wall.Seconds() }
	f.Note = fmt.Sprintf("CPU above the API server's idle %.3f cores: through kubeindex %.2f s at N=1, %.2f s at N=100 (%.2fx); directly %.2f s, %.2f s; synced at N=100: %d through kubeindex, %d directly; each informer a client-go Reflector on its own connection, decoding only metadata and keeping keys and resourceVersions; JSON without gzip either way",
		idle, above(k[0]), above(k[2]), safeDiv(above(k[2]), above(k[0])), above(d[0]), above(d[2]), k[2].synced, d[2].synced)
	if d[2].synced < 100 {
		f.Note += "; the direct N=100 figure is a lower bound (bounded window)"
	}
	for _, irs := range []struct {
		way  string
		runs []informerRun
	}{{"through kubeindex", k}, {"directly", d}} {
		for _, ir := range irs.runs {
			if ir.stopped != "" {
				f.Note += fmt.Sprintf("; the round of %d informers %s was STOPPED by the memory budget (%s)", ir.n, irs.way, ir.stopped)
			}
		}
	}
	if d[0].stopped != "" || d[2].stopped != "" {
		f.Comparison, f.Ratio = math.NaN(), math.NaN()
		f.Note += "; the direct growth is not given: a stopped round's CPU covers only the window until the stop"
	}
	for _, ir := range []informerRun{k[0], k[2], d[0], d[2]} {
		if ir.notRun != "" {
			f.Kubeindex, f.Comparison, f.Ratio, f.Met = math.NaN(), math.NaN(), math.NaN(), false
			f.Note = "NOT MEASURED: a round of 1 or 100 informers was not run: " + ir.notRun
			break
		}
	}
	return f
}

// kubeList times a full list of the pods, the body discarded, from
// kubeindex's /k8s and from the API server's watch cache, and kubectl get
// pods -A against each.
func (r *runner) kubeList(ctx context.Context) error {
	targets, err := r.kubeTargets()
	if err != nil {
		return err
	}
	urls := [2]string{targets[1].base + "/api/v1/pods", targets[0].base + "/api/v1/pods?resourceVersion=0"}
	clients := [2]*http.Client{targets[1].client(), targets[0].client()}
	cpuFns := [2]func() (time.Duration, error){r.main.cpu, func() (time.Duration, error) { return cpuOf(r.c.PID()) }}
	var wall, cpu [][2]float64
	var sizes [2]int64
	for i := range 2 { // warm up
		if _, sizes[i], err = rawList(ctx, clients[i], urls[i]); err != nil {
			return err
		}
	}
	for round := range r.o.slowRounds() {
		var w, c [2]float64
		for i := range 2 {
			c0, err := cpuFns[i]()
			if err != nil {
				return err
			}
			begin := time.Now()
			if _, _, err := rawList(ctx, clients[i], urls[i]); err != nil {
				return err
			}
			w[i] = time.Since(begin).Seconds()
			c1, err := cpuFns[i]()
			if err != nil {
				return err
			}
			c[i] = (c1 - c0).Seconds()
		}
		r.logf("list round %d: kubeindex %.3fs wall %.2fs CPU, API server %.3fs wall %.2fs CPU", round, w[0], c[0], w[1], c[1])
		wall, cpu = append(wall, w), append(cpu, c)
	}
	note := fmt.Sprintf("JSON, no compression, body discarded unread; kubeindex %d bytes, API server %d bytes (with managedFields); CPU from the kernel's CPU clock of each process, the API server's includes etcd's", sizes[0], sizes[1])
	f := pairFigure("full pod list wall", "s", "API server, resourceVersion=0", "speed-up >= 10x", wall, cOverK, func(x float64) bool { return x >= 10 })
	f.Note = note
	r.add(f)
	g := pairFigure("full pod list CPU", "s", "API server, resourceVersion=0", "ratio <= 0.2", cpu, kOverC, func(x float64) bool { return x <= 0.2 })
	r.add(g)

	kubectl, err := cluster.BuildKubectl(ctx)
	if err != nil {
		return err
	}
	kcfg := filepath.Join(r.dir, "kubeindex.kubeconfig")
	if err := os.WriteFile(kcfg, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: kubeindex, cluster: {server: %q}}]
users: [{name: anonymous, user: {}}]
contexts: [{name: kubeindex, context: {cluster: kubeindex, user: anonymous}}]
current-context: kubeindex
`, targets[1].base), 0o600); err != nil {
		return err
	}
	var kc [][2]float64
	budget := r.o.memBudget()
	budget.who = "kubectl"
	stopped := ""
rounds:
	for round := range r.o.slowRounds() {
		var w [2]float64
		for i, kconf := range []string{kcfg, r.c.Kubeconfig} {
			cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", kconf, "get", "pods", "-A")
			cmd.Stdout = io.Discard
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			begin := time.Now()
			why, err := runWithin(cmd, budget)
			if err != nil {
				return fmt.Errorf("kubectl get pods -A (%s): %w: %s", kconf, err, stderr.Bytes())
			}
			if why != "" {
				stopped = fmt.Sprintf("round %d, against %s: STOPPED after %.0fs, %s", round, []string{"kubeindex", "the API server"}[i],
					time.Since(begin).Seconds(), why)
				r.logf("kubectl %s", stopped)
				break rounds
			}
			w[i] = time.Since(begin).Seconds()
		}
		r.logf("kubectl round %d: kubeindex %.2fs, API server %.2fs", round, w[0], w[1])
		kc = append(kc, w)
	}
	h := pairFigure("kubectl get pods -A wall", "s", "API server", "speed-up >= 1x", kc, cOverK, func(x float64) bool { return x >= 1 })
	h.Note = "end to end, a fresh kubectl process each (discovery cache in $HOME), its table output discarded"
	if stopped != "" { // the rounds before it stand; with none, the figure is n/a
		h.Note = "kubectl itself outgrew the machine's memory (" + stopped + "); " + h.Note
	}
	r.add(h)
	return nil
}

// kubeWatch opens 100 watches (Options.Subscribers, at most 100) on each of
// the API server and kubeindex /k8s at once, churns pods lightly, and times
// each event from the API server's answer to the update to the client.
func (r *runner) kubeWatch(ctx context.Context) error {
	targets, err := r.kubeTargets()
	if err != nil {
		return err
	}
	n := min(100, r.o.Subscribers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sets [2][]*rawInformer
	defer func() {
		cancel()
		for _, s := range sets {
			for _, inf := range s {
				<-inf.done
			}
		}
	}()
	for i, t := range targets {
		rv, _, err := rawList(ctx, t.client(), t.base+"/api/v1/pods?limit=1")
		if err != nil {
			return err
		}
		if sets[i], err = startInformers(ctx, t.client(), t.base, rv, n); err != nil {
			return err
		}
	}
	var p99, p50 [][2]float64
	start := r.p.n * 2 / 3
	for round := range r.o.slowRounds() {
		before := [2][]int64{}
		for i, s := range sets {
			for _, inf := range s {
				before[i] = append(before[i], inf.events.Load())
			}
		}
		res, err := churn(ctx, r.cs, r.p, start, r.o.LightChurnRate*int(r.o.ChurnTime/time.Second), r.o.LightChurnRate)
		if err != nil {
			return err
		}
		start += res.Sent
		var q99, q50 [2]float64
		for i, s := range sets {
			// One deadline for all of a target's watchers: one each made a
			// target whose watchers missed an event wait 30 s per watcher.
			deadline := time.Now().Add(30 * time.Second)
			for j, inf := range s {
				for inf.events.Load()-before[i][j] < int64(res.Sent) && time.Now().Before(deadline) && ctx.Err() == nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
			var lat []time.Duration
			var got int
			for _, inf := range s {
				inf.mu.Lock()
				for _, e := range inf.seen {
					if at, ok := res.Acked[e.sent]; ok {
						lat = append(lat, time.Duration(e.at-at))
					}
				}
				inf.seen = inf.seen[:0]
				inf.mu.Unlock()
			}
			got = len(lat)
			if want := res.Sent * n; got < want {
				return fmt.Errorf("watch round %d: %s's watchers got %d of %d events", round, targets[i].name, got, want)
			}
			slices.Sort(lat)
			q99[i], q50[i] = ms(percentile(lat, .99)), ms(percentile(lat, .5))
		}
		r.logf("watch round %d: %d updates; kubeindex p50 %.1f ms p99 %.1f ms; API server p50 %.1f ms p99 %.1f ms", round, res.Sent,
			q50[1], q99[1], q50[0], q99[0])
		p99 = append(p99, [2]float64{q99[1], q99[0]})
		p50 = append(p50, [2]float64{q50[1], q50[0]})
	}
	f := pairFigure(fmt.Sprintf("watch event to %d watchers p99", n), "ms", "API server watch", "ratio <= 1", p99, kOverC, func(x float64) bool { return x <= 1 })
	f.Note = fmt.Sprintf("from the API server's answer to the update to the client's read; %d watchers on each at once, the same %d updates/s for %v per round; p50s by round (kubeindex, API server): %v",
		n, r.o.LightChurnRate, r.o.ChurnTime, p50)
	r.add(f)
	return nil
}
