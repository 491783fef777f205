package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Index configurations of the kubeindex processes.
const (
	// fiveIndexes is the configuration measured everywhere: the defaults
	// (ip, node, owner) plus a label and an image path.
	fiveIndexes = `
  - {name: ip, type: podIP}
  - {name: node, type: nodeName}
  - {name: owner, type: owner}
  - {name: app, label: app}
  - {name: image, path: spec.containers.#.image}`
	// noIndexes is the index upkeep baseline.
	noIndexes = ` []`
)

// kubeindex is a running kubeindex binary.
type kubeindex struct {
	*proc
	base string // http://127.0.0.1:PORT
	// syncedGCs is how many GCs had run when it synced.
	syncedGCs int
	// notified is closed when the process reports itself ready on its
	// NOTIFY_SOCKET (sd_notify's READY=1).
	notified chan struct{}
}

// startKubeindex runs the binary on pods matching the label selector and
// the field selector (none if empty) with the given indexes (YAML list
// items) and flags, tracing its GCs.
func startKubeindex(bin, dir, kubeconfig, name, selector, fieldSelector, indexes string, flags ...string) (*kubeindex, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf("resources:\n- resource: pods\n  labelSelector: %s\n", selector)
	if fieldSelector != "" {
		cfg += fmt.Sprintf("  fieldSelector: %q\n", fieldSelector)
	}
	cfg += fmt.Sprintf("  indexes:%s\n", indexes)
	return startKubeindexConfig(bin, dir, kubeconfig, name, cfg, addr, flags...)
}

// startKubeindexConfig runs the binary with the configuration file cfg
// (YAML) and flags, listening on addr, tracing its GCs.
func startKubeindexConfig(bin, dir, kubeconfig, name, cfg, addr string, flags ...string) (*kubeindex, error) {
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	// Its readiness notification comes on a socket in Linux's abstract
	// namespace: nothing to clean up on disk, no path length to mind.
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: fmt.Sprintf("@kubeindex-bench-%d-%s", os.Getpid(), addr), Net: "unixgram"})
	if err != nil {
		return nil, err
	}
	p, err := startProc(name, bin, append([]string{"--kubeconfig", kubeconfig, "--config", path, "--listen", addr, "--log-level", "warn"}, flags...),
		// The fan-out opens all its sockets from one address: lift the
		// per-client stream limit above it (the environment, unlike a
		// flag, is harmless to a build that does not know it).
		[]string{"GODEBUG=gctrace=1", "KUBEINDEX_MAX_STREAMS_PER_CLIENT=100000", "NOTIFY_SOCKET=" + notify.LocalAddr().String()})
	if err != nil {
		notify.Close()
		return nil, err
	}
	k := &kubeindex{proc: p, base: "http://" + addr, notified: make(chan struct{})}
	go func() {
		<-p.exited
		notify.Close()
	}()
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := notify.Read(buf)
			if err != nil {
				return
			}
			if bytes.Contains(buf[:n], []byte("READY=1")) {
				close(k.notified)
				notify.Close()
				return
			}
		}
	}()
	return k, nil
}

// waitNotified waits, without asking the process anything, until it
// reports itself ready (sd_notify's READY=1, sent once its cache has
// synced) and returns the time from process start to then. The sync
// figures read the process's CPU at that moment, as they read the typed
// informer's when it prints that it has synced: polling /readyz instead
// would put the polls' answers inside what is measured on one side only.
func (k *kubeindex) waitNotified(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	select {
	case <-k.notified:
		return time.Since(k.started), nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s did not report ready in %v (a build without NOTIFY_SOCKET support never does); log:\n%s", k.name, timeout, k.logTail())
	case <-k.exited:
		return 0, fmt.Errorf("%s exited: %v; log:\n%s", k.name, k.err, k.logTail())
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// waitReady polls /readyz until it answers 200 and returns the time from
// process start to then. The poll is every 5ms: it costs the process
// little and bounds the error on the sync's wall time.
func (k *kubeindex) waitReady(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, k.base+"/readyz", nil)
		if resp, err := client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(k.started), nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s not ready: %w; log:\n%s", k.name, ctx.Err(), k.logTail())
		case <-k.exited:
			return 0, fmt.Errorf("%s exited: %v; log:\n%s", k.name, k.err, k.logTail())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// podsStatus is the part of /api/v1/resources/pods the harness reads.
type podsStatus struct {
	Count           int    `json:"count"`
	ResourceVersion string `json:"resourceVersion"`
}

func (k *kubeindex) status(ctx context.Context) (podsStatus, error) {
	var st podsStatus
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, k.base+"/api/v1/resources/pods", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return st, fmt.Errorf("%s: %s", resp.Status, b)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// waitRV waits until the cache has seen resourceVersion rv (or later).
func (k *kubeindex) waitRV(ctx context.Context, rv string, timeout time.Duration) error {
	want, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return fmt.Errorf("resourceVersion %q: %w", rv, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		st, err := k.status(ctx)
		if err == nil {
			if got, _ := strconv.ParseUint(st.ResourceVersion, 10, 64); got >= want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not reach resourceVersion %s in %v (at %s, %v)", k.name, rv, timeout, st.ResourceVersion, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// liveHeap returns the median live heap (MB) of the GCs after the first
// `after`, or -1 if there were none.
func (k *kubeindex) liveHeap(after int) (float64, int) {
	g := k.gcs()
	if len(g) <= after {
		return -1, 0
	}
	v := make([]float64, 0, len(g)-after)
	for _, mb := range g[after:] {
		v = append(v, float64(mb))
	}
	return median(v), len(v)
}

// deliverySeries is the WebSocket delivery histogram's bucket series.
const deliverySeries = `kubeindex_stream_delivery_seconds_bucket{transport="websocket",le="`

// buckets is a cumulative Prometheus histogram: counts by upper bound.
// scrapeMetrics reads kubeindex's /metrics, line by line, into each.
func (k *kubeindex) scrapeMetrics(ctx context.Context, each func(line string) error) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, k.base+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if err := each(sc.Text()); err != nil {
			return err
		}
	}
	return sc.Err()
}

type buckets map[float64]float64

// delivery scrapes kubeindex's own WebSocket delivery histogram (from an
// event's publication to the end of the write that carried it).
func (k *kubeindex) delivery(ctx context.Context) (buckets, error) {
	out := buckets{}
	err := k.scrapeMetrics(ctx, func(line string) error {
		rest, ok := strings.CutPrefix(line, deliverySeries)
		if !ok {
			return nil
		}
		le, count, ok := strings.Cut(rest, `"} `)
		if !ok {
			return fmt.Errorf("/metrics: malformed bucket line %q", line)
		}
		bound, err1 := strconv.ParseFloat(le, 64) // "+Inf" parses too
		n, err2 := strconv.ParseFloat(count, 64)
		if err := firstErr(err1, err2); err != nil {
			return fmt.Errorf("/metrics: bucket line %q: %w", line, err)
		}
		out[bound] = n
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("/metrics has no %s series", strings.TrimSuffix(deliverySeries, `,le="`))
	}
	return out, nil
}

// quantileBound returns the upper bound of the bucket holding quantile q of
// the observations made between before and after (cumulative histograms of
// one series), and how many there were: "at most this long" at the
// histogram's resolution. +Inf when q falls past the last finite bound.
func quantileBound(before, after buckets, q float64) (bound, total float64) {
	bounds := make([]float64, 0, len(after))
	for b := range after {
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	if len(bounds) == 0 {
		return math.NaN(), 0
	}
	total = after[bounds[len(bounds)-1]] - before[bounds[len(bounds)-1]]
	for _, b := range bounds {
		if after[b]-before[b] >= q*total {
			return b, total
		}
	}
	return math.Inf(1), total
}
