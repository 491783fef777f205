//go:build unix

package server

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// BenchmarkLatencyVersusEcho times sequential requests to the real server
// and to a trivial echo v4 handler answering a body of the same size, one
// of each in turn over one keep-alive connection to each (which goes first
// alternating), as make bench's latency figures do between processes. It
// reports both servers' p50 and p99 and their ratios (kubeindex/echo); b.N
// is the request count to each server:
//
//	go test -run XXX -bench LatencyVersusEcho -benchtime 20000x ./server
func BenchmarkLatencyVersusEcho(b *testing.B) {
	f := cachetest.Start(b, cachetest.DefaultSpecs()...)
	pod := podOnThePodNetwork(b, f.Cache)
	_, addr := serveReal(b, f.Cache, Options{})
	client := &http.Client{Timeout: versusTimeout, Transport: &http.Transport{
		MaxIdleConns: 2, MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true, IdleConnTimeout: time.Minute,
	}}
	b.Cleanup(client.CloseIdleConnections)
	for _, bc := range []struct{ name, target string }{
		{"get_pod", "/api/v1/pods/" + pod.Key()},
		{"ip_pod", "/api/v1/ip/" + gjson.GetBytes(pod.Raw(), "status.podIP").Str},
	} {
		kURL := "http://" + addr + bc.target
		body, err := fetch(client, kURL)
		if err != nil {
			b.Fatal(err)
		}
		eURL := serveEcho(b, len(body)) + fmt.Sprintf("/bytes/%d", len(body))
		b.Run(bc.name, func(b *testing.B) {
			buf := make([]byte, 64<<10)
			for i := range versusWarmUp {
				if err := firstOf(client, i, kURL, eURL, buf, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
			k := make([]time.Duration, 0, b.N)
			e := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				if err := firstOf(client, i, kURL, eURL, buf, &k, &e); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			slices.Sort(k)
			slices.Sort(e)
			for _, q := range []struct {
				name string
				p    float64
			}{{"p50", .50}, {"p99", .99}} {
				kq, eq := quantile(k, q.p), quantile(e, q.p)
				b.ReportMetric(float64(kq)/1e3, "kubeindex-"+q.name+"-µs")
				b.ReportMetric(float64(eq)/1e3, "echo-"+q.name+"-µs")
				b.ReportMetric(float64(kq)/float64(eq), q.name+"-ratio")
			}
		})
	}
}

// firstOf GETs kURL and eURL, in an order alternating with i, appending
// their durations to k and e when not nil.
func firstOf(client *http.Client, i int, kURL, eURL string, buf []byte, k, e *[]time.Duration) error {
	order := []string{kURL, eURL}
	if i%2 == 1 {
		order[0], order[1] = eURL, kURL
	}
	for _, u := range order {
		t := time.Now()
		if err := get(client, u, buf); err != nil {
			return err
		}
		d := time.Since(t)
		switch {
		case k == nil:
		case u == kURL:
			*k = append(*k, d)
		default:
			*e = append(*e, d)
		}
	}
	return nil
}

// quantile of sorted durations, nearest rank.
func quantile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
