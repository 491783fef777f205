package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
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

// The figures of the Kubernetes API that kubeindex serves under /k8s
// (issue 14): the API server's load under N informers, a full list, and
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

// peakRSS samples a process's RSS until stop is closed and returns the
// highest seen.
func peakRSS(pid int, stop <-chan struct{}) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var peak int64
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if v, err := rssOf(pid); err == nil {
				peak = max(peak, v)
			}
			select {
			case <-stop:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// kubeInformers measures the API server's CPU and peak RSS while N raw
// informers list and watch the pods and follow a churn, directly and
// through kubeindex, for N = 1, 10, 100.
func (r *runner) kubeInformers(ctx context.Context) error {
	targets, err := r.kubeTargets()
	if err != nil {
		return err
	}
	pid := r.c.PID()
	ns := []int{1, 10, 100}
	cpu := map[string][]float64{}
	start := r.p.n / 3
	for _, n := range ns {
		var pair [2]float64
		var mem [2]string
		// kubeindex first: the API server's RSS seldom shrinks, so a run
		// after the direct one would hide its own growth.
		for _, ti := range []int{1, 0} {
			t := targets[ti]
			cctx, cancel := context.WithCancel(ctx)
			c0, err := cpuOf(pid)
			if err != nil {
				cancel()
				return err
			}
			rss0, err := rssOf(pid)
			if err != nil {
				cancel()
				return err
			}
			stop := make(chan struct{})
			peak := peakRSS(pid, stop)
			begin := time.Now()
			infs, err := startInformers(cctx, t.client(), t.base, "", n)
			synced := time.Since(begin)
			if err == nil {
				var res churnResult
				res, err = churn(ctx, r.cs, r.p, start, r.o.LightChurnRate*int(r.o.ChurnTime/time.Second), r.o.LightChurnRate)
				start += res.Sent
				if err == nil {
					err = waitEvents(infs, int64(res.Sent), 30*time.Second)
				}
			}
			c1, cerr := cpuOf(pid)
			close(stop)
			p := <-peak
			cancel()
			for _, inf := range infs {
				<-inf.done
			}
			if err := firstErr(err, cerr); err != nil {
				return err
			}
			pair[ti] = (c1 - c0).Seconds()
			mem[ti] = fmt.Sprintf("%s: RSS %.0f MiB at start, peak %+.0f MiB", t.name, float64(rss0)/(1<<20), float64(p-rss0)/(1<<20))
			cpu[t.name] = append(cpu[t.name], pair[ti])
			r.logf("informers N=%d via %s: synced in %v, API server CPU %.2fs, %s", n, t.name,
				synced.Round(time.Millisecond), pair[ti], mem[ti])
		}
		f := pairFigure(fmt.Sprintf("API server CPU, %d informers", n), "s", "directly", "ratio <= 1",
			[][2]float64{{pair[1], pair[0]}}, kOverC, func(x float64) bool { return x <= 1 })
		f.Note = fmt.Sprintf("API server (and etcd, one process) CPU from the informers' start through their sync and a churn of %d updates/s for %v; through kubeindex /k8s (measured first) vs directly; %s; %s",
			r.o.LightChurnRate, r.o.ChurnTime, mem[1], mem[0])
		r.add(f)
	}
	k, d := cpu[targets[1].name], cpu[targets[0].name]
	f := &Figure{Name: "API server CPU growth, 1 to 100 informers", Unit: "x", Kubeindex: safeDiv(k[2], k[0]),
		Comparison: safeDiv(d[2], d[0]), Against: "directly", Target: "<= 1.5 (through kubeindex)"}
	f.Ratio = safeDiv(f.Kubeindex, f.Comparison)
	f.Met = f.Kubeindex <= 1.5
	f.Note = "each informer a raw list (resourceVersion=0) + watch that discards the bytes, in the harness's process, not a typed informer: 100 typed informers of 50,000 pods would not fit beside the cluster; the API server's clients share one HTTP/2 connection; JSON without gzip either way"
	r.add(f)
	return nil
}

// waitEvents waits until each informer has seen want MODIFIED events.
func waitEvents(infs []*rawInformer, want int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, inf := range infs {
		for inf.events.Load() < want {
			select {
			case <-inf.done:
				return fmt.Errorf("informer ended: %v", inf.err)
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("informer saw %d of %d events in %v", inf.events.Load(), want, timeout)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
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
	note := fmt.Sprintf("JSON, no compression, body discarded unread; kubeindex %d bytes, API server %d bytes (with managedFields); CPU from /proc (10 ms ticks), the API server's includes etcd's", sizes[0], sizes[1])
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
	for round := range r.o.slowRounds() {
		var w [2]float64
		for i, kconf := range []string{kcfg, r.c.Kubeconfig} {
			cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", kconf, "get", "pods", "-A")
			cmd.Stdout = io.Discard
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			begin := time.Now()
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("kubectl get pods -A (%s): %w: %s", kconf, err, stderr.Bytes())
			}
			w[i] = time.Since(begin).Seconds()
		}
		r.logf("kubectl round %d: kubeindex %.2fs, API server %.2fs", round, w[0], w[1])
		kc = append(kc, w)
	}
	h := pairFigure("kubectl get pods -A wall", "s", "API server", "speed-up >= 1x", kc, cOverK, func(x float64) bool { return x >= 1 })
	h.Note = "end to end, a fresh kubectl process each (discovery cache in $HOME), its table output discarded"
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
			for j, inf := range s {
				deadline := time.Now().Add(30 * time.Second)
				for inf.events.Load()-before[i][j] < int64(res.Sent) && time.Now().Before(deadline) {
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
