package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// BenchmarkIPFigures measures, side by side in one run and in-process
// (no network), the IP lookups of issue 15 and prints their ratios:
// addresses resolved per second by single GETs and by batches of 1,000,
// and a lookup ?at= a moment against one of now.
//
//	go test -run XXX -bench IPFigures -benchtime 1x ./server
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
	at := strconv.FormatFloat(float64(time.Now().UnixNano())/1e9, 'f', 3, 64)
	get := func(target string) func(b *testing.B) {
		return func(b *testing.B) {
			i := 0
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, localRequest(http.MethodGet, fmt.Sprintf(target, ips[i%len(ips)]), nil))
				if rec.Code != 200 {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
				i++
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
	var perOp = map[string]float64{} // ns per op of each sub-benchmark
	run := func(name string, f func(b *testing.B)) {
		b.Run(name, func(b *testing.B) {
			f(b)
			perOp[name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
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
	run("cacheNow", func(b *testing.B) {
		i := 0
		for b.Loop() {
			f.Cache.LookupAddress(cache.IPQuery{IP: ips[i%len(ips)]})
			i++
		}
	})
	b.Logf("single GET %.0f IPs/s; batch of 1,000 %.0f IPs/s (%.2f µs/IP): batch/single %.1f×; GET ?at= / GET now %.2f×; cache lookup of now %.0f ns",
		1e9/perOp["single"], 1000*1e9/perOp["batch1000"], perOp["batch1000"]/1000/1000, 1000*perOp["single"]/perOp["batch1000"],
		perOp["at"]/perOp["single"], perOp["cacheNow"])
}
