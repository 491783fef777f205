package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// maxRequestsPerRound bounds a requests/s round by count as well as time.
const maxRequestsPerRound = 2_000_000

// loopbackClient is a keep-alive HTTP client holding up to conns idle
// connections, so that every request of a round reuses one.
func loopbackClient(conns int) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
		DisableCompression: true, IdleConnTimeout: time.Minute,
	}}
}

// throughput sends GETs for the URLs (in turn) from `workers` goroutines
// for d, and returns completed requests per second and their count. Any
// answer but 200 is an error: a fast 404 must not pass for a fast lookup.
func throughput(ctx context.Context, client *http.Client, urls []string, workers int, d time.Duration) (float64, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var n atomic.Int64
	var next atomic.Uint64
	var firstErr error
	var once sync.Once
	begin := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			for ctx.Err() == nil && n.Load() < maxRequestsPerRound {
				u := urls[next.Add(1)%uint64(len(urls))]
				if err := get(ctx, client, u, buf); err != nil {
					if ctx.Err() == nil {
						once.Do(func() { firstErr = err; cancel() })
					}
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, 0, firstErr
	}
	return float64(n.Load()) / time.Since(begin).Seconds(), n.Load(), nil
}

// get does one GET and reads the body through buf.
func get(ctx context.Context, client *http.Client, u string, buf []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
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

// bodySize returns the mean body size of the URLs (at most 50 of them).
func bodySize(ctx context.Context, client *http.Client, urls []string) (int, error) {
	total, n := 0, 0
	for _, u := range urls[:min(50, len(urls))] {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
		}
		total += len(b)
		n++
	}
	return total / n, nil
}

// latencies times count sequential calls of do (or as many as fit in
// budget) and returns their durations, sorted.
func latencies(count int, budget time.Duration, do func(i int) error) ([]time.Duration, error) {
	out := make([]time.Duration, 0, count)
	deadline := time.Now().Add(budget)
	for i := 0; i < count && (len(out) < 5 || time.Now().Before(deadline)); i++ {
		t := time.Now()
		if err := do(i); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t))
	}
	slices.Sort(out)
	return out, nil
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// median is NaN (shown "n/a") when there is nothing to take it of: no
// round measured, or no run computed the figure.
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
