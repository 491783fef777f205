package server

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	clientcache "k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// BenchmarkKubeProtobufInformers: what protobuf saves a typed pod
// informer syncing from /k8s, and what it costs kubeindex. N real 11 KB
// pods (cache/testdata/pod.json, renamed) are cached; a child process (this
// test binary running TestKubeInformerClients) syncs typed client-go pod
// informers, each over its own connection, in JSON or in protobuf
// (configured as kube-controller-manager configures its clients), and
// reports its own CPU time; this process's CPU time over the same span is
// kubeindex's. Rounds alternate JSON and protobuf; the first protobuf
// informer is the first to ask (kubeindex encodes every pod for it); all
// later ones share those encodings. It reports the median ratios,
// protobuf over JSON:
//
//	client-pb/json: one informer's CPU to sync (target ≤ 0.5)
//	server-pb/json: kubeindex's CPU serving 10 informers' syncs (target ≤ 1.2)
//	server-first-pb/json: kubeindex's CPU serving the first protobuf informer
//
//	go test -run XXX -bench KubeProtobufInformers -benchtime 1x ./server
//	PROTO_PODS=50000 go test -run XXX -bench KubeProtobufInformers -benchtime 1x ./server
func BenchmarkKubeProtobufInformers(b *testing.B) {
	n := 10000
	if v := os.Getenv("PROTO_PODS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil || n < 1 {
			b.Fatalf("PROTO_PODS=%q: want a number of pods", v)
		}
	}
	f := cachetest.Start(b, cachetest.PodSpec())
	loadPods(b, f, n)
	srv := httptest.NewServer(New(f.Cache, Options{Logger: quiet()}).Handler())
	b.Cleanup(srv.Close)

	for b.Loop() {
		var client, server, server1 [2][]float64 // [json, protobuf] seconds per round
		var cold float64
		for round := range 4 {
			for _, proto := range []bool{true, false} {
				one, oneServer := measureServer(func() informerClientsResult { return runInformerClients(b, srv.URL, proto, 1) })
				ten, tenServer := measureServer(func() informerClientsResult { return runInformerClients(b, srv.URL, proto, 10) })
				i := 0
				if proto {
					i = 1
				}
				if proto && round == 0 {
					cold = oneServer
					b.Logf("cold protobuf round (kubeindex encodes each pod for the first informer): 1 informer %.2fs client CPU, kubeindex %.2fs; then 10 informers: kubeindex %.2fs", one.CPU, oneServer, tenServer)
					continue
				}
				client[i] = append(client[i], one.CPU)
				server[i] = append(server[i], tenServer)
				server1[i] = append(server1[i], oneServer)
				b.Logf("round %d %-8s: 1 informer %.2fs client CPU, kubeindex %.2fs; 10 informers %.2fs client CPU, kubeindex %.2fs (%d pods each, watch list %v)",
					round, map[bool]string{false: "json", true: "protobuf"}[proto], one.CPU, oneServer, ten.CPU, tenServer, ten.Pods/10, ten.WatchList)
			}
		}
		cr := median(client[1]) / median(client[0])
		sr := median(server[1]) / median(server[0])
		cold /= median(server1[0])
		b.Logf("%d pods: client CPU protobuf/json %.2f×; kubeindex CPU serving 10 informers protobuf/json %.2f×; serving the first protobuf informer (encoding every pod) over a JSON one %.2f×",
			n, cr, sr, cold)
		b.ReportMetric(cr, "client-pb/json")
		b.ReportMetric(sr, "server-pb/json")
		b.ReportMetric(cold, "server-first-pb/json")
	}
}

// benchPods makes copies of the real pod (cache/testdata/pod.json), each
// its own name, namespace and UID.
type benchPods struct{ pod, md map[string]any }

func newBenchPods(b *testing.B) benchPods {
	tmpl, err := os.ReadFile("../cache/testdata/pod.json")
	if err != nil {
		b.Fatal(err)
	}
	var pod map[string]any
	if err := json.Unmarshal(tmpl, &pod); err != nil {
		b.Fatal(err)
	}
	md := pod["metadata"].(map[string]any)
	delete(md, "managedFields")
	return benchPods{pod: pod, md: md}
}

// json is pod i, its label "round" set to round.
func (p benchPods) json(i, round int) []byte {
	p.md["name"] = fmt.Sprintf("bench-%06d", i)
	p.md["namespace"] = fmt.Sprintf("bench-%03d", i/1000)
	// Random-looking, as the API server's UUIDv4s are (shards hash them).
	h := sha256.Sum256([]byte(p.md["name"].(string)))
	p.md["uid"] = fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
	p.md["labels"] = map[string]any{"app": "bench", "round": strconv.Itoa(round)}
	raw, _ := json.Marshal(p.pod)
	return raw
}

// loadPods applies n pods and waits for the cache to hold them.
func loadPods(b *testing.B, f *cachetest.Fixture, n int) {
	pods := newBenchPods(b)
	before, _ := f.Cache.List("pods", cache.ListQuery{Limit: 1})
	for i := range n {
		if err := f.Sim.Apply("pods", pods.json(i, 0)); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		res, err := f.Cache.List("pods", cache.ListQuery{Limit: 1})
		if err == nil && res.Total >= before.Total+n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the cache holds %d pods, want %d", res.Total, before.Total+n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// selfCPU is this process's user and system CPU time, in seconds (its
// children's not included).
func selfCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func measureServer(run func() informerClientsResult) (informerClientsResult, float64) {
	before := selfCPU()
	r := run()
	return r, selfCPU() - before
}

const (
	informerEnvURL   = "KUBEINDEX_BENCH_INFORMER_URL"
	informerEnvProto = "KUBEINDEX_BENCH_INFORMER_PROTO"
	informerEnvN     = "KUBEINDEX_BENCH_INFORMER_N"
)

type informerClientsResult struct {
	CPU       float64 // seconds of the client's CPU from start to every informer synced
	Pods      int     // pods in the informers' stores, summed
	WatchList bool    // the informers synced by streaming lists
}

// runInformerClients runs n informers in a child process until they have
// synced, and returns what it reports.
func runInformerClients(b *testing.B, url string, proto bool, n int) informerClientsResult {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	args := []string{"-test.run=^TestKubeInformerClients$", "-test.count=1", "-test.v"}
	if dir := os.Getenv("PROTO_CLIENT_PROFILES"); dir != "" { // a CPU profile of each client process
		args = append(args, fmt.Sprintf("-test.cpuprofile=%s/client-proto-%v-%d-%d.pprof", dir, proto, n, time.Now().UnixNano()))
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), informerEnvURL+"="+url, informerEnvProto+"="+strconv.FormatBool(proto), informerEnvN+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("informer clients: %v\n%s", err, out)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "informers: "); ok {
			var r informerClientsResult
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				b.Fatal(err)
			}
			return r
		}
	}
	b.Fatalf("informer clients said nothing:\n%s", out)
	return informerClientsResult{}
}

// TestKubeInformerClients is the client side of
// BenchmarkKubeProtobufInformers; without its environment it does nothing.
func TestKubeInformerClients(t *testing.T) {
	url := os.Getenv(informerEnvURL)
	if url == "" {
		t.Skip("the client process of BenchmarkKubeProtobufInformers")
	}
	proto, _ := strconv.ParseBool(os.Getenv(informerEnvProto))
	n, _ := strconv.Atoi(os.Getenv(informerEnvN))
	stop := make(chan struct{})
	defer close(stop)
	begin := selfCPU()
	var infs []clientcache.SharedIndexInformer
	for range n {
		cfg := &restclient.Config{Host: url + "/k8s", QPS: -1,
			// Each its own connection, as informers of separate processes.
			Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 1}}
		// Said either way: recent client-go prefers protobuf by default.
		cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
		if proto {
			cfg.ContentType = runtime.ContentTypeProtobuf
			cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		inf := informers.NewSharedInformerFactory(cs, 0).Core().V1().Pods().Informer()
		go inf.Run(stop)
		infs = append(infs, inf)
	}
	for _, inf := range infs {
		if !clientcache.WaitForCacheSync(stop, inf.HasSynced) {
			t.Fatal("not synced")
		}
	}
	r := informerClientsResult{CPU: selfCPU() - begin}
	for _, inf := range infs {
		r.Pods += len(inf.GetStore().ListKeys())
	}
	r.WatchList = clientWatchList()
	line, _ := json.Marshal(r)
	fmt.Printf("informers: %s\n", line)
}

// clientWatchList reports whether client-go's reflectors sync by
// streaming lists (its WatchListClient feature) rather than by a list.
func clientWatchList() bool {
	return clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient)
}
