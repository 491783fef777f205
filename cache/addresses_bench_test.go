package cache

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/ipowner"
)

// BenchmarkIPHistorySync is the informer path's cost of the address
// history: CPU per pod of an initial sync with the history off and on,
// in alternating rounds of one run, and the ratio.
//
//	go test -run XXX -bench IPHistorySync -benchtime 1x ./cache
func BenchmarkIPHistorySync(b *testing.B) {
	const n, rounds = 4000, 4
	srv := listServer(b, podListFixture(b, n))
	cfg := &rest.Config{Host: srv.URL, DisableCompression: true}
	var cpu [2]time.Duration
	for b.Loop() {
		for range rounds {
			for i, off := range []bool{true, false} {
				before := processCPU()
				syncPods(b, cfg, Spec{Resource: "pods", Indexes: benchIndexes()}, Options{IPHistory: ipowner.HistoryOptions{Off: off}}, n)
				cpu[i] += processCPU() - before
			}
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*rounds*n) }
	b.ReportMetric(per(cpu[0]), "cpu-ns/pod-off")
	b.ReportMetric(per(cpu[1]), "cpu-ns/pod-on")
	b.ReportMetric(per(cpu[1])/per(cpu[0]), "on/off")
}

// BenchmarkOwnerTableFeed is the informer path's cost of the owner table:
// CPU per pod of feeding n pods (add, then an update of each) through the
// address feed without the table and with it, in alternating rounds of
// one run, and the table's heap per address. The whole initial sync
// costs about 50 µs of CPU per pod (IPHistorySync).
//
//	go test -run XXX -bench OwnerTableFeed -benchtime 1x ./cache
func BenchmarkOwnerTableFeed(b *testing.B) {
	const n, rounds = 4000, 4
	raw, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		b.Fatal(err)
	}
	const name, ip, uid = "auth-0-b183731b00-00301", "10.64.1.45", "491617ca-b0ec-431b-96b1-61298f5b0740"
	objs := make([]*Object, 2*n) // n pods, then n updates of them
	for i := range objs {
		item := strings.ReplaceAll(string(raw), name, fmt.Sprintf("pod-%06d", i%n))
		item = strings.ReplaceAll(item, `"`+ip+`"`, fmt.Sprintf(`"10.%d.%d.%d"`, 64+i%n>>16, i%n>>8&255, i%n&255))
		item = strings.ReplaceAll(item, uid, fmt.Sprintf("491617ca-b0ec-431b-96b1-%012d", i%n))
		if objs[i], err = NewObject([]byte(item), "v1", "Pod"); err != nil {
			b.Fatal(err)
		}
	}
	feed := func(table *ipowner.Table[*Object]) {
		f := &ipFeed{kind: ipowner.Pod, mirror: ipowner.NewMirror(time.Now, ipowner.MirrorOptions{HistorySize: 4096, HistoryAge: time.Minute, BookmarkInterval: time.Minute}), owners: table}
		for i, o := range objs {
			if i < n {
				f.add(o, true, preparedObject{})
			} else {
				f.update(objs[i-n], o)
			}
		}
	}
	var cpu [2]time.Duration
	var perAddress float64
	for b.Loop() {
		for range rounds {
			for i, on := range []bool{false, true} {
				var table *ipowner.Table[*Object]
				if on {
					table = ipowner.NewTable[*Object](ipowner.Pod)
				}
				before := processCPU()
				feed(table)
				cpu[i] += processCPU() - before
			}
		}
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		table := ipowner.NewTable[*Object](ipowner.Pod) // the objects are kept by objs: only the table counts
		for _, o := range objs[:n] {
			table.Set(holdingOf(ipowner.Pod, o, o, true), o)
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		perAddress = float64(m1.HeapAlloc-m0.HeapAlloc) / float64(len(table.Addresses()))
		runtime.KeepAlive(table)
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*rounds*2*n) }
	b.ReportMetric(per(cpu[0]), "cpu-ns/event-without")
	b.ReportMetric(per(cpu[1]), "cpu-ns/event-with")
	b.ReportMetric(per(cpu[1])-per(cpu[0]), "cpu-ns/event-table")
	b.ReportMetric(perAddress, "bytes/address")
}
