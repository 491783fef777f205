//go:build unix

package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// Settings of BenchmarkVersusEcho: those of make bench (test/bench), in
// process and over loopback.
const (
	versusConcurrency = 16
	versusRounds      = 10               // round pairs; the ratio is their median
	versusRoundTime   = 3 * time.Second  // a round also ends after this
	versusWarmUp      = 2000             // requests per server before the rounds
	versusTimeout     = 10 * time.Second // one request
)

// BenchmarkVersusEcho compares the real server over keep-alive loopback HTTP
// with a trivial echo v4 handler answering a body of the same size, as make
// bench does between processes: the ceiling of what net/http and echo allow.
// Rounds alternate between the two servers, and each ratio is the median of
// the per-round-pair ratios (kubeindex/echo), so that a noisy machine
// cancels out: ratio compares requests per second, as make bench does;
// cpu-ratio compares the CPU time this process spent per request (client
// included), which other processes on the machine disturb far less. b.N is
// the request count to each server, spread over the rounds:
//
//	go test -run XXX -bench VersusEcho -benchtime 100000x -count 3 ./server
func BenchmarkVersusEcho(b *testing.B) {
	f := cachetest.Start(b, cachetest.DefaultSpecs()...)
	pod := podOnThePodNetwork(b, f.Cache)
	_, addr := serveReal(b, f.Cache, Options{})
	client := &http.Client{Timeout: versusTimeout, Transport: &http.Transport{
		MaxIdleConns: 2 * versusConcurrency, MaxIdleConnsPerHost: versusConcurrency,
		MaxConnsPerHost: versusConcurrency, DisableCompression: true, IdleConnTimeout: time.Minute,
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
			for _, u := range []string{kURL, eURL} {
				if _, err := throughput(client, u, versusWarmUp); err != nil {
					b.Fatal(err)
				}
			}
			perRound := max(b.N/versusRounds, 1)
			var k, e []round
			b.ResetTimer()
			for i := range versusRounds {
				first, second := kURL, eURL
				if i%2 == 1 {
					first, second = eURL, kURL
				}
				r1, err := throughput(client, first, perRound)
				if err != nil {
					b.Fatal(err)
				}
				r2, err := throughput(client, second, perRound)
				if err != nil {
					b.Fatal(err)
				}
				if i%2 == 1 {
					r1, r2 = r2, r1
				}
				k, e = append(k, r1), append(e, r2)
			}
			b.StopTimer()
			b.ReportMetric(medianOf(k, func(r round) float64 { return r.rate }), "kubeindex-req/s")
			b.ReportMetric(medianOf(e, func(r round) float64 { return r.rate }), "echo-req/s")
			b.ReportMetric(pairedRatio(k, e, func(k, e round) float64 { return k.rate / e.rate }), "ratio")
			b.ReportMetric(pairedRatio(k, e, func(k, e round) float64 { return e.cpu / k.cpu }), "cpu-ratio")
			b.ReportMetric(float64(len(body)), "body-bytes")
		})
	}
}

// round is what one round measured: requests per second, and CPU seconds
// of this process per request.
type round struct{ rate, cpu float64 }

func medianOf(rounds []round, f func(round) float64) float64 {
	v := make([]float64, len(rounds))
	for i, r := range rounds {
		v[i] = f(r)
	}
	return median(v)
}

func pairedRatio(k, e []round, f func(k, e round) float64) float64 {
	v := make([]float64, len(k))
	for i := range k {
		v[i] = f(k[i], e[i])
	}
	return median(v)
}

// serveEcho runs benchecho's handler (test/cmd/benchecho) with a body of
// size bytes, on a plain http.Server on a random loopback port.
func serveEcho(b *testing.B, size int) string {
	body := append(append([]byte{'"'}, slices.Repeat([]byte{'x'}, size-2)...), '"')
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/bytes/:n", func(c echo.Context) error {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, body)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// throughput sends n GETs of u from versusConcurrency goroutines, or as many
// as fit in versusRoundTime. Anything but a 200 is an error: a fast 404 must
// not pass for a fast answer.
func throughput(client *http.Client, u string, n int) (round, error) {
	var sent, done atomic.Int64
	var firstErr error
	var once sync.Once
	deadline := time.Now().Add(versusRoundTime)
	begin, cpu := time.Now(), processCPU()
	var wg sync.WaitGroup
	for range versusConcurrency {
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			for sent.Add(1) <= int64(n) && time.Now().Before(deadline) {
				if err := get(client, u, buf); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return round{}, firstErr
	}
	count := float64(done.Load())
	return round{rate: count / time.Since(begin).Seconds(), cpu: (processCPU() - cpu).Seconds() / count}, nil
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func get(client *http.Client, u string, buf []byte) error {
	resp, err := client.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return nil
}

func fetch(client *http.Client, u string) ([]byte, error) {
	resp, err := client.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %s", u, resp.Status, body)
	}
	if err == nil && len(body) < 2 {
		err = errors.New("GET " + u + ": empty body")
	}
	return body, err
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
