package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/ipowner"
)

// BenchmarkIPFigures measures, side by side in one run and in-process
// (no network), the IP lookups and prints their ratios:
// addresses resolved per second by single GETs and by batches of 1,000,
// and a lookup ?at= a moment against one of now. Each sub-benchmark
// reports the process's CPU per address (cpu-ns/IP, GC included), the
// figure that holds on a shared machine, where wall time also counts the
// other processes' turns: IPs/s per core is 1e9 / cpu-ns/IP.
//
//	go test -run XXX -bench IPFigures -benchtime 200x -count 3 ./server
func BenchmarkIPFigures(b *testing.B) {
	f := cachetest.Start(b, cachetest.DefaultSpecs()...)
	s := New(f.Cache, Options{Logger: quiet()})
	h := s.Handler()
	values, err := f.Cache.IndexValues("pods", "ip", 0, "")
	if err != nil {
		b.Fatal(err)
	}
	var ips []string
	for _, v := range values.Values {
		ips = append(ips, v.Value)
	}
	now := time.Now()
	at := strconv.FormatFloat(float64(now.UnixNano())/1e9, 'f', 3, 64)
	// An op is perOp addresses, so that each sub-benchmark runs long enough
	// for the process's CPU clock, whose steps are coarse.
	const gets, lookups = 100, 1000
	get := func(target string) func(b *testing.B) {
		return func(b *testing.B) {
			i := 0
			for b.Loop() {
				for range gets {
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, localRequest(http.MethodGet, fmt.Sprintf(target, ips[i%len(ips)]), nil))
					if rec.Code != 200 {
						b.Fatalf("%d %s", rec.Code, rec.Body)
					}
					i++
				}
			}
		}
	}
	lookup := func(moment time.Time) func(b *testing.B) {
		return func(b *testing.B) {
			i := 0
			for b.Loop() {
				for range lookups {
					if _, err := f.Cache.LookupAddress(ipowner.Query{IP: ips[i%len(ips)], At: moment}); err != nil {
						b.Fatal(err)
					}
					i++
				}
			}
		}
	}
	var body strings.Builder
	body.WriteString(`{"queries":[`)
	for i := range 1000 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"ip":%q}`, ips[i%len(ips)])
	}
	body.WriteString(`]}`)
	batchOf := body.String()
	perOp, cpuPerIP := map[string]float64{}, map[string]float64{} // ns per op, CPU ns per address
	run := func(name string, f func(b *testing.B)) {
		b.Run(name, func(b *testing.B) {
			before := processCPU()
			f(b)
			ips := float64(b.N) * map[string]float64{"single": gets, "at": gets, "batch1000": 1000}[name]
			if ips == 0 {
				ips = float64(b.N) * lookups
			}
			cpuPerIP[name] = float64((processCPU() - before).Nanoseconds()) / ips
			b.ReportMetric(cpuPerIP[name], "cpu-ns/IP")
			perOp[name] = float64(b.Elapsed().Nanoseconds()) / ips
		})
	}
	run("single", get("/api/v1/ip/%s"))
	run("at", get("/api/v1/ip/%s?at="+at))
	run("batch1000", func(b *testing.B) {
		for b.Loop() {
			if rec := batch(b, s, batchOf, ""); rec.Code != 200 {
				b.Fatal(rec.Code)
			}
		}
		b.ReportMetric(1000*float64(b.N)/b.Elapsed().Seconds(), "IPs/s")
	})
	run("cacheNow", lookup(time.Time{}))
	run("cacheAt", lookup(now))
	for _, figures := range []struct {
		name string
		ns   map[string]float64
	}{{"wall", perOp}, {"CPU", cpuPerIP}} {
		ns := figures.ns
		b.Logf("%s: single GET %.0f IPs/s; batch of 1,000 %.0f IPs/s (%.2f µs/IP): batch/single %.1f×; GET ?at= / GET now %.2f×; cache lookup ?at= / now %.2f× (%.0f / %.0f ns)",
			figures.name, 1e9/ns["single"], 1e9/ns["batch1000"], ns["batch1000"]/1000, ns["single"]/ns["batch1000"],
			ns["at"]/ns["single"], ns["cacheAt"]/ns["cacheNow"], ns["cacheAt"], ns["cacheNow"])
	}
}

// BenchmarkIPBatchBody reads the same batch body of 1,000 queries with
// scanBatch and with encoding/json (decodeBatch), side by side.
// ARCHITECTURE.md quotes it:
//
//	go test -run XXX -bench IPBatchBody -benchtime 2000x ./server
func BenchmarkIPBatchBody(b *testing.B) {
	var body strings.Builder
	body.WriteString(`{"queries":[`)
	for i := range 1000 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"ip":"10.%d.%d.%d"`, i>>16, i>>8&255, i&255)
		if i%10 == 0 {
			body.WriteString(`,"at":1767323045.5,"port":"9100","protocol":"TCP"`)
		}
		body.WriteByte('}')
	}
	body.WriteString(`]}`)
	raw := []byte(body.String())
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := scanBatch(raw); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeBatch(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
