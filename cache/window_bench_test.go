package cache

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/query"
)

// BenchmarkWindows keeps WINDOWS (1,000) live windows of 100 rows sorted
// by restarts (-restarts; ten pages, offsets 0 to 900) over WINDOW_PODS
// (100,000) pods in make bench's layout, while WINDOW_UPDATES (100) pods
// a second get a new restart count, for WINDOW_SECONDS (10). Each window
// has a consumer that takes its messages as a socket's writer does (the
// message bytes are made; they are not written to a socket). It reports
// the time from an event reaching the broker to the message that carries
// it being taken (p50, p99, max: a message's time is its oldest event's),
// the messages a second, and the CPU the process spent during the
// updates, in cores (the updates' own making included). The view's build
// (every pod's Table row rendered for the restarts column, the first
// time) is reported apart, and so is a window of another sort opened
// after it (resort-ms, and the process's CPU meanwhile: the rows' values
// kept, a click on a header). With WINDOW_COUNTS=0 the windows ask for
// no counts: their view follows the ordered index of their sort
// (window_follow.go) instead of holding its rows. A window of the
// dashboard's counts (no sort, one row, counts by status and node) is
// opened after the resort (counts-ms, counts-cpu-ms).
//
//	go test -run XXX -bench Windows -benchtime 1x ./cache
func BenchmarkWindows(b *testing.B) {
	env := func(name string, def int) int {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				b.Fatalf("%s=%q: want a positive number", name, v)
			}
			return n
		}
		return def
	}
	n, windows, rate, seconds := env("WINDOW_PODS", 100_000), env("WINDOWS", 1000), env("WINDOW_UPDATES", 100), env("WINDOW_SECONDS", 10)
	c := layoutPods(b, n, Options{})
	r := c.byName["pods"]
	sc := query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
	sort, _ := sc.ParseSort("-restarts")
	asc, _ := sc.ParseSort("restarts")
	groupBy, _ := sc.ParseKeys("groupBy", "status,node", 2, false)
	counted := groupBy
	if os.Getenv("WINDOW_COUNTS") == "0" {
		counted = nil
	}
	ask := &Ask{Schema: sc, Sort: sort, SortText: "-restarts", Now: time.Now()}
	pods := r.broker.snapshotLocked("")
	slices.SortFunc(pods, func(a, b *Object) int { return compareStrings(a.Key(), b.Key()) })

	for b.Loop() {
		start := time.Now()
		first, err := c.Window("pods", WindowQuery{Ask: ask, Limit: 100, GroupBy: groupBy}, make(chan struct{}, 1))
		if err != nil {
			b.Fatal(err)
		}
		for {
			if m, ok := first.Next(); ok && m.Type == WindowFull {
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "view-build-ms")
		// Another sort, as a click on a header asks once the rows' values
		// are kept: an ordered index built and a view loaded from it.
		start, cpu := time.Now(), cpuTime()
		resort, err := c.Window("pods", WindowQuery{Ask: &Ask{Schema: sc, Sort: asc, SortText: "restarts", Now: ask.Now}, Limit: 100}, make(chan struct{}, 1))
		if err != nil {
			b.Fatal(err)
		}
		for {
			if m, ok := resort.Next(); ok && m.Type == WindowFull {
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "resort-ms")
		b.ReportMetric(float64((cpuTime() - cpu).Milliseconds()), "resort-cpu-ms") // the whole process's, GC included
		resort.Close()
		// The dashboard's counts: a window of one row in no order, counting
		// by status and node, as its pods view opens beside the rows'.
		start, cpu = time.Now(), cpuTime()
		counts, err := c.Window("pods", WindowQuery{Ask: &Ask{Schema: sc, Now: ask.Now}, Limit: 1, GroupBy: groupBy}, make(chan struct{}, 1))
		if err != nil {
			b.Fatal(err)
		}
		for {
			if m, ok := counts.Next(); ok && m.Type == WindowFull {
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "counts-ms")
		b.ReportMetric(float64((cpuTime() - cpu).Milliseconds()), "counts-cpu-ms")
		counts.Close()

		var mu sync.Mutex
		var lat []time.Duration
		var msgs atomic.Int64
		done := make(chan struct{})
		var wg sync.WaitGroup
		for i := range windows {
			notify := make(chan struct{}, 1)
			w, err := c.Window("pods", WindowQuery{Ask: ask, Offset: (i % 10) * 100, Limit: 100, GroupBy: counted}, notify)
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() {
				defer w.Close()
				var mine []time.Duration
				for {
					select {
					case <-done:
						mu.Lock()
						lat = append(lat, mine...)
						mu.Unlock()
						return
					case <-notify:
					}
					for {
						m, ok := w.Next()
						if !ok {
							break
						}
						msgs.Add(1)
						if at, ok := m.Published(); ok {
							mine = append(mine, time.Since(at))
						}
					}
				}
			})
		}
		time.Sleep(time.Second) // every window has its first message
		msgs.Store(0)
		cpu0, wall0 := cpuTime(), time.Now()
		restarts := regexp.MustCompile(`"restartCount":[0-9]+`)
		version := regexp.MustCompile(`"resourceVersion":"[0-9]+"`)
		rng := rand.New(rand.NewPCG(1, 2))
		rv := uint64(900_000)
		tick := time.NewTicker(time.Second / time.Duration(rate))
		for range rate * seconds {
			<-tick.C
			i := rng.IntN(len(pods))
			rv++
			raw := restarts.ReplaceAll(pods[i].Raw(), fmt.Appendf(nil, `"restartCount":%d`, rng.IntN(200)))
			raw = version.ReplaceAll(raw, fmt.Appendf(nil, `"resourceVersion":"%d"`, rv))
			o, err := NewObject(raw, "v1", "Pod")
			if err != nil {
				b.Fatal(err)
			}
			r.orders.change(pods[i], o) // as the handler does, before the broker
			pods[i] = o
			r.broker.put(o)
		}
		tick.Stop()
		time.Sleep(time.Second) // the last events delivered
		wall, cpu := time.Since(wall0), cpuTime()-cpu0
		close(done)
		wg.Wait()
		first.Close()
		slices.Sort(lat)
		q := func(p float64) float64 {
			if len(lat) == 0 {
				return 0
			}
			return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
		}
		b.ReportMetric(q(0.5), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
		b.ReportMetric(q(1), "max-ms")
		b.ReportMetric(float64(msgs.Load())/wall.Seconds(), "msgs/s")
		b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cores")
		b.ReportMetric(0, "ns/op")
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
