package cache

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/indexers"
)

// upkeepPods are a pod list's items cut where an update changes them:
// the resourceVersion's value and the harness's stamp annotation's
// (kubeindex.bench/sent), which is what make bench's churn patches.
type upkeepPods struct {
	// parts[i] are pod i's bytes before the version, between the
	// version and the stamp, and after the stamp; the object begins with
	// its kind and apiVersion, as a watch event's does.
	parts [][3][]byte
}

const upkeepVersion, upkeepStamp = `"resourceVersion":"`, `"kubeindex.bench/sent":"`

func newUpkeepPods(tb testing.TB, list []byte) *upkeepPods {
	tb.Helper()
	var l struct{ Items []json.RawMessage }
	if err := json.Unmarshal(list, &l); err != nil {
		tb.Fatal(err)
	}
	p := &upkeepPods{parts: make([][3][]byte, len(l.Items))}
	for i, it := range l.Items {
		item := append([]byte(`{"kind":"Pod","apiVersion":"v1",`), it[1:]...)
		v := bytes.Index(item, []byte(upkeepVersion))
		s := bytes.Index(item, []byte(upkeepStamp))
		if v < 0 || s < v {
			tb.Fatalf("pod %d: no resourceVersion before a %s annotation", i, upkeepStamp)
		}
		v, s = v+len(upkeepVersion), s+len(upkeepStamp)
		vEnd := v + bytes.IndexByte(item[v:], '"')
		sEnd := s + bytes.IndexByte(item[s:], '"')
		p.parts[i] = [3][]byte{item[:v], item[vEnd:s], item[sEnd:]}
	}
	return p
}

// event appends the MODIFIED event of pod i at version rv, stamped.
func (p *upkeepPods) event(dst []byte, i int, rv uint64, stamp int64) []byte {
	pp := p.parts[i]
	dst = append(dst, `{"type":"MODIFIED","object":`...)
	dst = append(dst, pp[0]...)
	dst = strconv.AppendUint(dst, rv, 10)
	dst = append(dst, pp[1]...)
	dst = strconv.AppendInt(dst, stamp, 10)
	dst = append(dst, pp[2]...)
	return append(dst, "}\n"...)
}

// upkeepServer serves the pod list and, on a watch, rounds of updates of
// its pods: a round is asked on rounds, and done is told once it has
// been written. One watch at a time.
type upkeepServer struct {
	srv    *httptest.Server
	rounds chan upkeepRound
	done   chan struct{}
}

type upkeepRound struct {
	start, count int
	rv           uint64 // the first event's version
	rate         int    // events a second; 0: as fast as they are read
}

func newUpkeepServer(tb testing.TB, list []byte, pods *upkeepPods) *upkeepServer {
	s := &upkeepServer{rounds: make(chan upkeepRound), done: make(chan struct{}, 1)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") != "true" {
			w.Write(list)
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		var buf []byte
		for {
			select {
			case <-r.Context().Done():
				return
			case rd := <-s.rounds:
				begin := time.Now()
				for k := range rd.count {
					if rd.rate > 0 {
						if d := time.Until(begin.Add(time.Duration(k) * time.Second / time.Duration(rd.rate))); d > 0 {
							time.Sleep(d)
						}
					}
					buf = pods.event(buf[:0], (rd.start+k)%len(pods.parts), rd.rv+uint64(k), time.Now().UnixNano())
					if _, err := w.Write(buf); err != nil {
						return
					}
					w.(http.Flusher).Flush()
				}
				s.done <- struct{}{}
			}
		}
	}))
	tb.Cleanup(s.srv.Close)
	return s
}

// envInt is the environment's integer name, or def.
func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		tb.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

// upkeepCache is one cache of the upkeep benchmark and its figures.
type upkeepCache struct {
	name string
	c    *Cache
	stop func()
	srv  *upkeepServer
	cpu  []float64 // µs per event, by round
	rv   uint64
}

// BenchmarkUpkeep is make bench's index upkeep figure in one process,
// over many rounds: pods synced from a list (BenchmarkHeapScale's
// layout), then rounds of updates through the watch, each a pod's
// annotation stamp changed (what the harness's churn patches), to a
// cache with the five indexes the harness measures and one without, in
// turn; as kubeindex runs, with the standing pod sorts and the address
// history. Each round prints both caches' CPU per event and the
// process's live heap after a collection (forced after the CPU is read),
// so that a cost or a heap that grows with events shows as a trend
// over rounds.
//
//	UPKEEP_ROUNDS=16 go test -run XXX -bench Upkeep -benchtime 1x -v ./cache
//
// UPKEEP_PODS (1,000), UPKEEP_EVENTS per round (3,000), UPKEEP_RATE
// events a second (1,000; 0: as fast as read), UPKEEP_CONFIGS
// (five,none: either alone leaves one cache in the process),
// UPKEEP_PROFILE=DIR writes a heap profile after each round
// (heap-CONFIG-ROUND.pb.gz) for `go tool pprof -base`.
func BenchmarkUpkeep(b *testing.B) {
	n := envInt(b, "UPKEEP_PODS", 1000)
	events := envInt(b, "UPKEEP_EVENTS", 3000)
	rounds := envInt(b, "UPKEEP_ROUNDS", 12)
	rate := envInt(b, "UPKEEP_RATE", 1000)
	profiles := os.Getenv("UPKEEP_PROFILE")
	if profiles != "" {
		// A profile's diff between rounds is of samples: finer ones
		// than the default's one per 512 KiB.
		defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
		runtime.MemProfileRate = 4096
	}
	configs := strings.Split(cmp.Or(os.Getenv("UPKEEP_CONFIGS"), "five,none"), ",")
	list := benchLayoutFixture(b, n)
	pods := newUpkeepPods(b, list)
	var caches []*upkeepCache
	for _, name := range configs {
		var idx []indexers.Spec
		switch name {
		case "five":
			idx = benchIndexes()
		case "none":
		default:
			b.Fatalf("UPKEEP_CONFIGS: unknown %q (five, none)", name)
		}
		srv := newUpkeepServer(b, list, pods)
		c, stop := startSyncedPods(b, &rest.Config{Host: srv.srv.URL, DisableCompression: true},
			Spec{Resource: "pods", Indexes: idx}, Options{PodSortIndexes: DefaultPodSortIndexes}, n)
		b.Cleanup(stop)
		caches = append(caches, &upkeepCache{name: name, c: c, stop: stop, srv: srv, rv: 900001})
	}
	// The standing indexes are built after the sync: wait for them.
	for _, uc := range caches {
		r := uc.c.byName["pods"]
		for _, ix := range r.orders.live() {
			<-ix.ready
		}
	}
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/allocs:bytes"}}
	for b.Loop() {
		for round := range rounds {
			line := fmt.Sprintf("round %2d:", round)
			// The caches take turns going first: the process's
			// collections fall in whichever round allocates past the
			// goal, and the first after the forced one would pay more.
			for i := range caches {
				uc := caches[(i+round)%len(caches)]
				r := uc.c.byName["pods"]
				before := r.versionsHandled()
				metrics.Read(live)
				gcs, allocs := live[1].Value.Uint64(), live[2].Value.Uint64()
				cpu := processCPU()
				uc.srv.rounds <- upkeepRound{start: (n / 2) + round*events, count: events, rv: uc.rv, rate: rate}
				<-uc.srv.done
				for deadline := time.Now().Add(time.Minute); r.versionsHandled() < before+int64(events); time.Sleep(2 * time.Millisecond) {
					if time.Now().After(deadline) {
						b.Fatalf("%s: %d of %d events handled in a minute", uc.name, r.versionsHandled()-before, events)
					}
				}
				per := float64((processCPU() - cpu).Microseconds()) / float64(events)
				uc.cpu = append(uc.cpu, per)
				uc.rv += uint64(events)
				metrics.Read(live)
				line += fmt.Sprintf(" %s %.1f µs/event, %.1f KB/event (%d GCs)", uc.name, per,
					float64(live[2].Value.Uint64()-allocs)/float64(events)/1e3, live[1].Value.Uint64()-gcs)
			}
			runtime.GC()
			metrics.Read(live)
			line += fmt.Sprintf("; live heap %.2f MB", float64(live[0].Value.Uint64())/1e6)
			for _, uc := range caches {
				line += "; " + uc.name + " " + upkeepSizes(uc.c)
			}
			if profiles != "" {
				f, err := os.Create(filepath.Join(profiles, fmt.Sprintf("heap-%s-%02d.pb.gz", strings.Join(configs, "+"), round)))
				if err != nil {
					b.Fatal(err)
				}
				if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
			b.Log(line)
		}
	}
	for _, uc := range caches {
		third := max(1, rounds/3)
		first, last := median(uc.cpu[:third]), median(uc.cpu[len(uc.cpu)-third:])
		b.ReportMetric(median(uc.cpu), "cpu-µs/event-"+uc.name)
		b.ReportMetric(last/first, "last/first-third-"+uc.name)
	}
	if len(caches) == 2 {
		ratios := make([]float64, rounds)
		for i := range ratios {
			ratios[i] = caches[0].cpu[i] / caches[1].cpu[i]
		}
		b.ReportMetric(median(ratios), caches[0].name+"/"+caches[1].name)
	}
}

// median is the middle of vs (the mean of the two middle ones).
func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	if len(s) == 0 {
		return 0
	}
	return (s[(len(s)-1)/2] + s[len(s)/2]) / 2
}

// upkeepSizes counts what the pods' resource holds that an event may add
// to: the store, the postings of its value indexes, the broker's history
// and the ordered indexes' entries and pending changes.
func upkeepSizes(c *Cache) string {
	r := c.byName["pods"]
	var stored, values, posted int
	for _, sh := range r.shards {
		stored += len(sh.informer.ListKeys())
		sh.index.mu.RLock()
		for _, vs := range sh.index.byIndex {
			values += len(vs)
			for _, p := range vs {
				posted += p.len()
			}
		}
		sh.index.mu.RUnlock()
	}
	r.broker.mu.Lock()
	history := r.broker.log.Len()
	r.broker.mu.Unlock()
	var entries, pending, passes int
	for _, ix := range r.orders.live() {
		ix.mu.Lock()
		if ix.tree != nil {
			entries += ix.tree.Len()
		}
		pending += len(ix.pending)
		passes += len(ix.passes.kept)
		ix.mu.Unlock()
	}
	return fmt.Sprintf("store %d, values %d, postings %d, history %d, ordered entries %d pending %d passes %d, addresses %d",
		stored, values, posted, history, entries, pending, passes, len(c.owners.Addresses()))
}
