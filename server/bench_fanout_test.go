package server

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// The stream fan-out benchmark: the product benchmark's stream round
// (test/bench/stream.go) in process, over loopback, against the demo API
// server, so that kubeindex's own capacity shows without a real API server
// in the way.
//
//	go test -run '^$' -bench StreamFanout -benchtime 1x ./server
//
// The clients run in a child process (this test binary again, running
// TestFanoutClients), so that the memory figures are the server's alone.
const (
	fanoutClients   = 1000
	fanoutPods      = 20  // modified round-robin: every event is a MODIFIED
	fanoutSteadyHz  = 100 // the product target's event rate (100k frames/s)
	fanoutSteadyFor = 5 * time.Second
	fanoutBurst     = 300 // events applied at once: fits every queue, so no resync
	fanoutStampKey  = "kubeindex.bench/sent"

	fanoutEnvURL = "KUBEINDEX_FANOUT_URL"
	fanoutEnvN   = "KUBEINDEX_FANOUT_N"
)

// BenchmarkStreamFanout serves fanoutClients WebSockets watching pods
// (snapshot=false) and reports:
//
//   - idle-KiB/conn: live heap plus goroutine stacks per idle connection
//     (idle-stack-KiB/conn of it stacks, idle-after-stack-KiB/conn the
//     same once the rounds below are over), the product's 32 KiB target;
//   - steady-frames/s, steady-p50-ms and steady-p99-ms: fanoutSteadyHz
//     MODIFIED events of ~6.4 KB pods per second for fanoutSteadyFor (the
//     product's 100k frames/s, p99 <= 100 ms), latency from just before the
//     demo API server's write to the client's read;
//   - burst-frames/s and burst-p99-ms: fanoutBurst events at once, the
//     fan-out capacity: frames over the time from the first write to the
//     last frame read;
//   - *-server-µs/frame and burst-client-µs/frame: CPU time per frame of
//     the server process (demo API server and cache included) and of the
//     clients'. On a shared machine the rates and latencies vary from run
//     to run with the neighbours' load; these vary much less.
//
// It runs one measurement whatever b.N is; repeat with -count. With
// -fanout.heapprofile it also writes the idle connections' heap profile.
func BenchmarkStreamFanout(b *testing.B) {
	f := cachetest.Start(b, cachetest.PodSpec())
	feed := newFanoutFeed(b, f)
	s := New(f.Cache, Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Limits: LimitOptions{MaxStreamsPerClient: 2 * fanoutClients, MaxConnections: 2 * fanoutClients,
			MaxConnectionsPerAddress: 2 * fanoutClients}, // the clients share one address
		Streams: StreamOptions{MaxSubscribers: 2 * fanoutClients, Coalesce: DefaultCoalesce}, // as the command runs
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	b.Cleanup(func() {
		cancel()
		<-served
	})
	url := "ws://" + ln.Addr().String() + "/api/v1/pods?watch=true&snapshot=false"

	for b.Loop() {
		before := liveMemory()
		clients := startFanoutClients(b, url, fanoutClients)
		after := liveMemory()
		writeIdleHeapProfile(b)
		perConn := func(x, y uint64) float64 { return (float64(x) - float64(y)) / fanoutClients }
		b.ReportMetric(perConn(sum(after), sum(before))/1024, "idle-KiB/conn")
		b.ReportMetric(perConn(after.stacks, before.stacks)/1024, "idle-stack-KiB/conn")
		b.ReportMetric(perConn(after.goroutines, before.goroutines), "goroutines/conn")

		steady := clients.round(b, feed, int(fanoutSteadyHz*fanoutSteadyFor/time.Second), fanoutSteadyHz)
		b.ReportMetric(steady.framesPerSec(), "steady-frames/s")
		b.ReportMetric(ms(steady.P50), "steady-p50-ms")
		b.ReportMetric(ms(steady.P99), "steady-p99-ms")
		b.ReportMetric(steady.serverMicros(), "steady-server-µs/frame")
		burst := clients.round(b, feed, fanoutBurst, 0)
		b.ReportMetric(burst.framesPerSec(), "burst-frames/s")
		b.ReportMetric(ms(burst.P99), "burst-p99-ms")
		b.ReportMetric(burst.serverMicros(), "burst-server-µs/frame")
		b.ReportMetric(burst.clientMicros(), "burst-client-µs/frame")
		b.ReportMetric(float64(burst.FrameBytes), "B/frame")
		// Once the traffic is over, the writers' stacks are back to their
		// idle size. (The heap is not: the demo API server's and the
		// broker's event histories now hold the rounds' events.)
		b.ReportMetric(perConn(liveMemory().stacks, before.stacks)/1024, "idle-after-stack-KiB/conn")
		if r := steady.Resyncs + burst.Resyncs; r > 0 {
			b.Errorf("%d subscribers were told to resync", r)
		}
		clients.close(b)
	}
}

var fanoutHeapProfile = flag.String("fanout.heapprofile", "",
	"BenchmarkStreamFanout writes the heap profile of the idle connections to this file "+
		"(with -test.memprofilerate 512 or so, to see the small allocations)")

func writeIdleHeapProfile(b *testing.B) {
	if *fanoutHeapProfile == "" {
		return
	}
	f, err := os.Create(*fanoutHeapProfile)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type memory struct{ heap, stacks, goroutines uint64 }

func sum(m memory) uint64 { return m.heap + m.stacks }

// liveMemory is the live heap and the goroutine stacks, after collecting.
func liveMemory() memory {
	var m runtime.MemStats
	for range 3 { // the later cycles free what pools let go, and shrink stacks (by half each)
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return memory{m.HeapAlloc, m.StackInuse, uint64(runtime.NumGoroutine())}
}

// fanoutFeed makes MODIFIED events of pod-sized objects through the demo
// API server, each stamped with its send time.
type fanoutFeed struct {
	f    *cachetest.Fixture
	pod  []byte
	next int
}

func newFanoutFeed(b *testing.B, f *cachetest.Fixture) *fanoutFeed {
	feed := &fanoutFeed{f: f, pod: fanoutPod()}
	for range fanoutPods {
		feed.apply(b)
	}
	cachetest.Eventually(b, "the cache holds the fan-out pods", func() bool {
		res, err := f.Cache.List("pods", cache.ListQuery{Namespace: "fanout"})
		return err == nil && len(res.Items) == fanoutPods
	})
	return feed
}

func (fd *fanoutFeed) apply(b *testing.B) {
	name := fmt.Sprintf("checkout-7d9f8c6b5-%05d", fd.next%fanoutPods)
	fd.next++
	pod := bytes.Replace(fd.pod, []byte(`"NAME"`), strconv.AppendQuote(nil, name), 1)
	pod = bytes.Replace(pod, []byte(`"stamp"`), strconv.AppendQuote(nil, strconv.FormatInt(time.Now().UnixNano(), 10)), 1)
	if err := fd.f.Sim.Apply("pods", pod); err != nil {
		b.Fatal(err)
	}
}

// run applies n events at hz per second (0: all at once) and returns when
// it began.
func (fd *fanoutFeed) run(b *testing.B, n, hz int) time.Time {
	begin := time.Now()
	for i := range n {
		if hz > 0 {
			time.Sleep(time.Until(begin.Add(time.Duration(i) * time.Second / time.Duration(hz))))
		}
		fd.apply(b)
	}
	return begin
}

// fanoutPod is a Deployment's pod as an API server sends it (some 6.4 KB
// once the demo adds uid, creationTimestamp and resourceVersion), with NAME
// and "stamp" to fill in.
func fanoutPod() []byte {
	env := make([]map[string]any, 0, 40)
	for i := range 40 {
		env = append(env, map[string]any{"name": fmt.Sprintf("CHECKOUT_SETTING_%02d", i), "value": fmt.Sprintf("value-%02d-of-the-configuration", i)})
	}
	container := func(name, image string) map[string]any {
		return map[string]any{"name": name, "image": image, "env": env[:20],
			"ports":          []any{map[string]any{"name": "http", "containerPort": 8080, "protocol": "TCP"}},
			"resources":      map[string]any{"requests": map[string]any{"cpu": "250m", "memory": "256Mi"}, "limits": map[string]any{"memory": "512Mi"}},
			"readinessProbe": map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": 8080}, "periodSeconds": 10},
			"volumeMounts": []any{map[string]any{"name": "config", "mountPath": "/etc/checkout"},
				map[string]any{"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}},
			"terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"}
	}
	status := func(name string) map[string]any {
		return map[string]any{"name": name, "ready": true, "restartCount": 0, "started": true,
			"image": "registry.example.com/shop/" + name + ":1.42.0", "imageID": "registry.example.com/shop/" + name + "@sha256:" + strings.Repeat("4f", 32),
			"containerID": "containerd://" + strings.Repeat("9c", 32),
			"state":       map[string]any{"running": map[string]any{"startedAt": "2026-01-02T03:04:05Z"}}}
	}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "NAME", "namespace": "fanout", "generateName": "checkout-7d9f8c6b5-",
			"labels": map[string]any{"app": "checkout", "pod-template-hash": "7d9f8c6b5", "tier": "web", "version": "1.42.0"},
			"annotations": map[string]any{fanoutStampKey: "stamp", "kubectl.kubernetes.io/restartedAt": "2026-01-02T03:04:05Z",
				"checkout.example.com/build": strings.Repeat("commit=9f2c1e7;pipeline=release-1.42;", 9)},
			"ownerReferences": []any{map[string]any{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "checkout-7d9f8c6b5",
				"uid": "0f8e6a52-7d4c-4d6e-9a1b-3c2d1e0f9a8b", "controller": true, "blockOwnerDeletion": true}}},
		"spec": map[string]any{"nodeName": "node-3", "serviceAccountName": "checkout", "restartPolicy": "Always",
			"containers": []any{container("checkout", "registry.example.com/shop/checkout:1.42.0"), container("envoy", "registry.example.com/mesh/envoy:1.31.2")},
			"volumes": []any{map[string]any{"name": "config", "configMap": map[string]any{"name": "checkout-config"}},
				map[string]any{"name": "kube-api-access-x7k2p", "projected": map[string]any{"defaultMode": 420}}},
			"tolerations": []any{map[string]any{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}}},
		"status": map[string]any{"phase": "Running", "podIP": "10.64.3.17", "hostIP": "10.0.0.13", "qosClass": "Burstable",
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"},
				map[string]any{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"}},
			"containerStatuses": []any{status("checkout"), status("envoy")}},
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		panic(err)
	}
	return raw
}
