package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// BenchmarkFleetQuestions answers questions across a fleet of 10
// in-process clusters of FLEET_PODS/10 pods each (100,000 in all by
// default), each the demo's simulated cluster, through the front's
// handler (no network): a sorted page of 100 by a column and by paths,
// and a list of 10,000; the same pages of one cluster of FLEET_PODS pods
// (the sub-benchmarks single/…) for comparison. Each reports its first
// answer apart, then p50 and p99 of K answers. For profiles:
//
//	go test -run XXX -bench 'FleetQuestions/fleet' -benchtime 2x -cpuprofile cpu.out ./server
func BenchmarkFleetQuestions(b *testing.B) {
	n := 100_000
	if v := os.Getenv("FLEET_PODS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil || n < 1000 {
			b.Fatalf("FLEET_PODS=%q: want a number of pods of at least 1000", v)
		}
	}
	const clusters = 10
	questions := []struct{ name, target string }{
		{"sorted-page-100/column", "/api/v1/pods?sort=-restarts,-age&limit=100"},
		{"sorted-page-100/path", "/api/v1/pods?filter=status.phase%3DRunning&sort=-spec.nodeName,metadata.creationTimestamp&limit=100"},
		{"list-10000", "/api/v1/pods?limit=10000"},
	}
	run := func(b *testing.B, h http.Handler) {
		for _, q := range questions {
			b.Run(q.name, func(b *testing.B) {
				timedRequests(b, h, q.target)
			})
		}
	}
	b.Run("fleet", func(b *testing.B) {
		shared := NewShared(LimitOptions{}, StreamOptions{})
		fleet := &fakeFleet{servers: map[string]*Server{}}
		for i := range clusters {
			name := fmt.Sprintf("c%d", i+1)
			fx := cachetest.StartWith(b, cachetest.Config{Pods: n / clusters}, cachetest.PodSpec())
			fleet.names = append(fleet.names, name)
			fleet.servers[name] = New(fx.Cache, Options{ClusterName: name, Shared: shared, Logger: quiet()})
		}
		run(b, New(noCache{}, Options{Clusters: fleet, Shared: shared, Logger: quiet()}).Handler())
	})
	b.Run("single", func(b *testing.B) {
		fx := cachetest.StartWith(b, cachetest.Config{Pods: n}, cachetest.PodSpec())
		run(b, New(fx.Cache, Options{Logger: quiet()}).Handler())
	})
}

// timedRequests answers target once (reported apart as first-ms) and
// then K times per iteration, reporting p50 and p99.
func timedRequests(b *testing.B, h http.Handler, target string) {
	const K = 40
	get := func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, localRequest(http.MethodGet, target, nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: %d %.300s", target, rec.Code, rec.Body)
		}
	}
	start := time.Now()
	get()
	first := time.Since(start)
	var lat []time.Duration
	for b.Loop() {
		for range K {
			start := time.Now()
			get()
			lat = append(lat, time.Since(start))
		}
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(first), "first-ms")
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(0, "ns/op")
}
