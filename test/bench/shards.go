package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// The shard figure (shards): shardCount consumers of kubeindex's /k8s,
// each a client-go Reflector listing and watching one shardRange of the
// pods' UID hash space (KEP-5866's shardSelector), while every seeded pod
// is updated once through the API server. Each shard's share of the
// objects and of the events is measured, their union must be every pod
// exactly once, and the API server's own count of open pod watches says
// whether the shards cost it anything.

const shardCount = 10

// shardSelectors splits the UID hash space into n equal shardRange
// selectors, the last one ending at 2^64.
func shardSelectors(n int) []string {
	out := make([]string, n)
	step := ^uint64(0)/uint64(n) + 1
	for i := range n {
		end := fmt.Sprintf("'0x%016x'", uint64(i+1)*step)
		if i == n-1 {
			end = "'0x10000000000000000'"
		}
		out[i] = fmt.Sprintf("shardRange(object.metadata.uid, '0x%016x', %s)", uint64(i)*step, end)
	}
	return out
}

// apiServerPodWatches is the number of pod watches the API server has open
// now, from its apiserver_longrunning_requests gauge.
func (r *runner) apiServerPodWatches(ctx context.Context) (int, error) {
	hc, err := rest.HTTPClientFor(r.c.RESTConfig())
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.c.Host+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, fmt.Errorf("API server /metrics: %s: %s", resp.Status, b)
	}
	return podWatches(resp.Body)
}

// podWatches sums the apiserver_longrunning_requests series of pod
// WATCHes (any scope) in a Prometheus text exposition.
func podWatches(body io.Reader) (int, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	total, series := 0, 0
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "apiserver_longrunning_requests{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok || !strings.Contains(labels, `resource="pods"`) || !strings.Contains(labels, `verb="WATCH"`) ||
			!strings.Contains(labels, `subresource=""`) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, fmt.Errorf("apiserver_longrunning_requests: %q: %w", line, err)
		}
		total += int(v)
		series++
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if series == 0 {
		return 0, fmt.Errorf("the API server's /metrics has no apiserver_longrunning_requests series of pod watches")
	}
	return total, nil
}

// shardFigures measures the shard figures.
func (r *runner) shardFigures(ctx context.Context) error {
	before, err := r.apiServerPodWatches(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &informerSet{}
	defer func() { cancel(); s.done.Wait() }()
	begin := time.Now()
	for i, sel := range shardSelectors(shardCount) {
		hc, err := plainClient()
		if err != nil {
			return err
		}
		lw := &podLW{hc: hc, base: r.main.base + "/k8s", mode: modeWatchList, i: i, fail: &s.fail,
			lists: &s.lists, watchList: &s.watchList, shard: sel}
		st := newKeyStore()
		st.updated = map[string]int{}
		rf := cache.NewReflectorWithOptions(lw, &metav1.PartialObjectMetadata{}, st, cache.ReflectorOptions{
			Name: fmt.Sprintf("bench-shard-%d", i), TypeDescription: "pods"})
		s.stores = append(s.stores, st)
		s.done.Go(func() {
			rf.RunWithContext(ctx)
			hc.CloseIdleConnections()
		})
	}
	if synced, _ := s.waitSynced(ctx.Done(), begin, begin.Add(r.o.InformerSyncTimeout)); synced != shardCount {
		_, _, reasons := s.fail.summary()
		return fmt.Errorf("%d of %d shards synced in %v; failed requests: %s", synced, shardCount, r.o.InformerSyncTimeout, reasons)
	}
	synced := time.Since(begin)
	during, err := r.apiServerPodWatches(ctx)
	if err != nil {
		return err
	}
	owner := map[string]int{} // pod key → its shard
	objects := make([]int, shardCount)
	for i, st := range s.stores {
		st.mu.Lock()
		for key := range st.rvs {
			if j, dup := owner[key]; dup {
				st.mu.Unlock()
				return fmt.Errorf("pod %s is in shards %d and %d", key, j, i)
			}
			owner[key] = i
		}
		objects[i] = len(st.rvs)
		st.mu.Unlock()
	}
	for i := range r.p.n {
		ref := r.p.ref(i)
		if _, ok := owner[ref.Namespace+"/"+ref.Name]; !ok {
			return fmt.Errorf("pod %s/%s is in no shard", ref.Namespace, ref.Name)
		}
	}
	if len(owner) != r.p.n {
		return fmt.Errorf("the shards hold %d pods, want the %d seeded", len(owner), r.p.n)
	}

	// Every pod updated once: each shard's events are its own pods'.
	r.logf("shards: %d shards synced in %v; updating each of the %d pods once", shardCount, synced.Round(time.Millisecond), r.p.n)
	res, err := churn(ctx, r.cs, r.p, 0, r.p.n, 0)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for s.totalUpdates() < int64(r.p.n) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	after, err := r.apiServerPodWatches(ctx)
	if err != nil {
		return err
	}
	events := make([]int, shardCount)
	total := 0
	for i, st := range s.stores {
		st.mu.Lock()
		for key, n := range st.updated {
			if owner[key] != i {
				st.mu.Unlock()
				return fmt.Errorf("shard %d received an event of pod %s, of shard %d", i, key, owner[key])
			}
			events[i] += n
		}
		st.mu.Unlock()
		total += events[i]
	}
	relists := s.lists.Load() + s.watchList.Load() - shardCount
	if total != r.p.n {
		_, _, reasons := s.fail.summary()
		return fmt.Errorf("the shards received %d events of the %d updates (%d lists or watch-lists asked again; failed requests: %s)", total, r.p.n, relists, reasons)
	}
	share := func(counts []int) (largest float64, text string) {
		parts := make([]string, len(counts))
		for i, c := range counts {
			largest = max(largest, 100*float64(c)/float64(r.p.n))
			parts[i] = strconv.Itoa(c)
		}
		return largest, strings.Join(parts, ", ")
	}
	objMax, objText := share(objects)
	evMax, evText := share(events)
	f := absFigure(fmt.Sprintf("largest share of the objects, %d shards", shardCount), "%", "<= 10.5 %", []float64{objMax}, func(v float64) bool { return v <= 10.5 })
	f.Note = fmt.Sprintf("each shard a client-go Reflector on /k8s (watch-list) with shardRange(object.metadata.uid); objects per shard %s: every one of the %d pods in exactly one shard", objText, r.p.n)
	r.add(f)
	f = absFigure(fmt.Sprintf("largest share of the events, %d shards", shardCount), "%", "<= 10.5 %", []float64{evMax}, func(v float64) bool { return v <= 10.5 })
	f.Note = fmt.Sprintf("every pod updated once through the API server (%d updates in %v); events per shard %s, each of one of the shard's own pods; %d lists or watch-lists asked again",
		res.Sent, res.Duration.Round(time.Millisecond), evText, relists)
	r.add(f)
	f = pairFigure(fmt.Sprintf("API server pod watches, %d shards open", shardCount), "watches", "before the shards opened", "ratio <= 1",
		[][2]float64{{float64(max(during, after)), float64(before)}}, kOverC, func(x float64) bool { return x <= 1 })
	f.Note = fmt.Sprintf("apiserver_longrunning_requests (pods, WATCH): %d before, %d with the shards synced, %d after the updates", before, during, after)
	r.add(f)
	return nil
}

func (s *informerSet) totalUpdates() int64 {
	var n int64
	for _, st := range s.stores {
		n += st.updates.Load()
	}
	return n
}
