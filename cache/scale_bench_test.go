package cache

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// BenchmarkHeapScale is the in-process side of make bench's scale figure:
// the heap per pod of a cache of N pods (five indexes, the address
// history on) against one of N/3, the pods laid out as make bench seeds
// them (a node per 100 pods, a ReplicaSet per 50, 20 apps per namespace
// of 1,000). It reports both and their ratio; costs that do not grow with
// the cluster give 1. About 5 GB of memory at the default N.
//
//	go test -run XXX -bench HeapScale -benchtime 1x ./cache
//	SCALE_PODS=30000 go test -run XXX -bench HeapScale -benchtime 1x ./cache
func BenchmarkHeapScale(b *testing.B) {
	n := 150000
	if v := os.Getenv("SCALE_PODS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil || n < 3 {
			b.Fatalf("SCALE_PODS=%q: want a number of pods >= 3", v)
		}
	}
	for b.Loop() {
		full, third := syncedHeapPerPod(b, n), syncedHeapPerPod(b, n/3)
		b.ReportMetric(full, "B/pod-at-N")
		b.ReportMetric(third, "B/pod-at-N/3")
		b.ReportMetric(full/third, "ratio")
	}
}

// syncedHeapPerPod syncs a cache of n pods and returns its heap per pod,
// after GCs, above the heap before it started.
func syncedHeapPerPod(b *testing.B, n int) float64 {
	srv := listServer(b, benchLayoutFixture(b, n))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, DisableCompression: true}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c, stop := startSyncedPods(b, cfg, Spec{Resource: "pods", Indexes: benchIndexes()}, Options{}, n)
	defer stop()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(c)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// benchLayoutFixture is podListFixture with make bench's layout: pod i in
// namespace bench-(i/1000), on node i/100, owned by ReplicaSet i/50, of
// app (i%1000)/50, with a UID of its own; one in 20 uses its node's
// network (and address).
func benchLayoutFixture(tb testing.TB, n int) []byte {
	tb.Helper()
	pod, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := string(pod)
	const name, ip, node, hash, uid, app, ns = "auth-0-b183731b00-00301", "10.64.1.45", "ip-10-0-0-3.ec2.internal",
		"b183731b00", "000000000006", "auth-0", `"namespace":"bench-000"`
	const podUID, hostIP = "491617ca-b0ec-431b-96b1-61298f5b0740", `"172.20.0.3"`
	for _, s := range []string{name, `"` + ip + `"`, node, hash, uid, app, ns, podUID, hostIP} {
		if !strings.Contains(tmpl, s) {
			tb.Fatalf("testdata/pod.json no longer has %s", s)
		}
	}
	// BENCH_POD_TOKENS=1 names each pod's service account token volume as
	// a real API server's admission does, a name of its own (mounted in
	// every container); by default every pod has the template's.
	const token = "kube-api-access-447rs"
	perPodTokens := os.Getenv("BENCH_POD_TOKENS") == "1"
	if !strings.Contains(tmpl, token) {
		tb.Fatalf("testdata/pod.json no longer has %s", token)
	}
	apps := []string{"checkout", "payments", "catalog", "search", "frontend", "cart", "auth", "ledger", "mailer", "reviews"}
	var bb bytes.Buffer
	bb.WriteString(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"900000"},"items":[`)
	for i := range n {
		if i > 0 {
			bb.WriteByte(',')
		}
		dep := (i % 1000) / 50
		a := fmt.Sprintf("%s-%d", apps[dep%len(apps)], dep/len(apps))
		h := fmt.Sprintf("%010x", i/50)
		item := strings.ReplaceAll(tmpl, name, fmt.Sprintf("%s-%s-%05d", a, h, i))
		nodeIP := fmt.Sprintf(`"172.20.%d.%d"`, (i/100)>>8, (i/100)&255)
		if i%20 == 19 {
			item = strings.ReplaceAll(item, `"`+ip+`"`, nodeIP)
			item = strings.ReplaceAll(item, `"nodeName":"`+node+`"`, `"nodeName":"`+node+`","hostNetwork":true`)
		} else {
			item = strings.ReplaceAll(item, `"`+ip+`"`, fmt.Sprintf(`"10.%d.%d.%d"`, 64+i>>16, i>>8&255, i&255))
		}
		item = strings.ReplaceAll(item, hostIP, nodeIP)
		item = strings.ReplaceAll(item, podUID, fmt.Sprintf("491617ca-b0ec-431b-96b1-%012x", i))
		item = strings.ReplaceAll(item, node, fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", (i/100)>>8, (i/100)&255))
		item = strings.ReplaceAll(item, hash, h)
		item = strings.ReplaceAll(item, uid, fmt.Sprintf("%012x", i/50))
		item = strings.ReplaceAll(item, app, a)
		item = strings.ReplaceAll(item, ns, fmt.Sprintf(`"namespace":"bench-%03d"`, i/1000))
		if perPodTokens {
			item = strings.ReplaceAll(item, token, fmt.Sprintf("kube-api-access-%05x", i&0xfffff))
		}
		bb.WriteString(item)
	}
	bb.WriteString(`]}`)
	return bb.Bytes()
}
