package cache

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// podListFixture is a list of n copies of testdata/pod.json (a pod as a
// real API server stores it: 11 KB with managedFields), each with its own
// name and IPs, as an API server sends it: compact, kind and apiVersion on
// the list only.
func podListFixture(tb testing.TB, n int) []byte {
	tb.Helper()
	pod, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := string(pod)
	const name, ip = "auth-0-b183731b00-00301", "10.64.1.45"
	if !strings.Contains(tmpl, name) || !strings.Contains(tmpl, `"`+ip+`"`) {
		tb.Fatalf("testdata/pod.json no longer has name %s and IP %s", name, ip)
	}
	var b bytes.Buffer
	b.WriteString(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"900000"},"items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		item := strings.ReplaceAll(tmpl, name, fmt.Sprintf("pod-%06d", i))
		item = strings.ReplaceAll(item, `"`+ip+`"`, fmt.Sprintf(`"10.%d.%d.%d"`, 64+i>>16, i>>8&255, i&255))
		b.WriteString(item)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// listServer serves body as the pods list (gzipped when the client accepts
// it, as kube-apiserver does for large responses) and holds watches open
// without events.
func listServer(tb testing.TB, body []byte) *httptest.Server {
	tb.Helper()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(body)
	zw.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gz.Bytes())
			return
		}
		w.Write(body)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// benchIndexes are the five indexes make bench measures.
func benchIndexes() []indexers.Spec {
	return []indexers.Spec{
		{Name: "ip", Type: indexers.PodIP},
		{Name: "node", Type: indexers.NodeName},
		{Name: "owner", Type: indexers.Owner},
		{Name: "app", Label: "app"},
		{Name: "image", Path: "spec.containers.#.image"},
	}
}

// BenchmarkInitialSync is the CPU cost of syncing pods: the list read and
// decoded (decode), and a whole cache with five indexes synced from it
// (cache). Figures are per pod.
//
//	go test -run XXX -bench InitialSync -benchtime 5x ./cache
func BenchmarkInitialSync(b *testing.B) {
	const n = 4000
	body := podListFixture(b, n)
	srv := listServer(b, body)
	pods := podsResource
	for _, compress := range []bool{true, false} {
		cfg := &rest.Config{Host: srv.URL, DisableCompression: !compress}
		b.Run(fmt.Sprintf("decode/gzip=%t", compress), func(b *testing.B) {
			client, err := newAPIClient(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			lw := &listWatch{client: client, res: &pods, shape: Shape{APIVersion: "v1", Kind: "Pod"},
				conn: newConnState(time.Now), listTimeout: time.Minute}
			b.SetBytes(int64(len(body)))
			cpu := processCPU()
			for b.Loop() {
				l, err := lw.ListWithContext(b.Context(), metav1.ListOptions{ResourceVersion: "0"})
				if err != nil || len(l.(*objectList).Items) != n {
					b.Fatalf("list: %v", err)
				}
			}
			reportPerPod(b, n, cpu)
		})
		b.Run(fmt.Sprintf("cache/gzip=%t", compress), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			cpu := processCPU()
			for b.Loop() {
				syncPods(b, cfg, Spec{Resource: "pods", Indexes: benchIndexes()}, Options{Compression: compress}, n)
			}
			reportPerPod(b, n, cpu)
		})
		// The same with ordered indexes over three pod columns standing
		// from the start, so that the handler keeps every pod in them as
		// it arrives (rendering each pod's Table row): what a standing
		// index would cost the initial sync. kubeindex builds none before
		// a question asks (order.go).
		b.Run(fmt.Sprintf("cache+3-standing-orders/gzip=%t", compress), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			sc := podSchema()
			cpu := processCPU()
			for b.Loop() {
				_, stop := startSyncedPodsWith(b, cfg, Spec{Resource: "pods", Indexes: benchIndexes()}, Options{Compression: compress}, n, func(c *Cache) {
					for _, text := range []string{"restarts", "node", "status"} {
						keys, _ := sc.ParseSort(text)
						ix, _ := c.byName["pods"].orders.join(keys, text, nil, sc)
						ix.build(nil)
					}
				})
				stop()
			}
			reportPerPod(b, n, cpu)
		})
	}
}

// processCPU is the CPU time this process has used: on a shared machine
// it varies far less than the wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportPerPod(b *testing.B, n int, cpuBefore time.Duration) {
	pods := float64(b.N * n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/pods, "ns/pod")
	b.ReportMetric(float64((processCPU()-cpuBefore).Nanoseconds())/pods, "cpu-ns/pod")
}

// BenchmarkScan is the one pass over a pod's bytes that finds where it ends.
func BenchmarkScan(b *testing.B) {
	pod, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(pod)))
	for b.Loop() {
		if n, err := jsonscan.Value(pod); err != nil || n != len(pod) {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkBuild is Shape.Build of one pod with managedFields.
func BenchmarkBuild(b *testing.B) {
	pod, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		b.Fatal(err)
	}
	shape := Shape{APIVersion: "v1", Kind: "Pod"}
	b.SetBytes(int64(len(pod)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := shape.Build(pod); err != nil {
			b.Fatal(err)
		}
	}
}

// podsResource is the pods resource as discovery resolves it.
var podsResource = Resource{Name: "pods", Version: "v1", Plural: "pods", Kind: "Pod", Namespaced: true}

// syncPods builds a cache of pods from the API server at cfg, runs it
// until it has synced, checks it holds want pods, and stops it.
func syncPods(tb testing.TB, cfg *rest.Config, spec Spec, opts Options, want int) {
	tb.Helper()
	_, stop := startSyncedPods(tb, cfg, spec, opts, want)
	stop()
}

// startSyncedPods is syncPods leaving the cache running until stop.
func startSyncedPods(tb testing.TB, cfg *rest.Config, spec Spec, opts Options, want int) (c *Cache, stop func()) {
	return startSyncedPodsWith(tb, cfg, spec, opts, want, nil)
}

// startSyncedPodsWith is startSyncedPods calling prepare, when not nil,
// before the cache starts.
func startSyncedPodsWith(tb testing.TB, cfg *rest.Config, spec Spec, opts Options, want int, prepare func(*Cache)) (c *Cache, stop func()) {
	tb.Helper()
	c, err := New(cfg, []Configured{{Resource: podsResource, Spec: spec}}, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if prepare != nil {
		prepare(c)
	}
	ctx, cancel := context.WithCancel(tb.Context())
	done := make(chan struct{})
	go func() { c.Start(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	if !c.WaitForSync(ctx) {
		stop()
		tb.Fatal("not synced")
	}
	if st, _ := c.ResourceStatus("pods"); st.Count != int64(want) {
		stop()
		tb.Fatalf("synced %d pods, want %d", st.Count, want)
	}
	return c, stop
}
