package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// idleCost holds Subscribers streams open on the main kubeindex (half
// WebSocket, half Server-Sent Events, both on the pods watch without a
// snapshot) while nothing changes, for IdleTime, and reports kubeindex's
// CPU (the kernel's CPU clock of the process) and allocation rate (from its
// own Go metrics) over that window: what a cache costs between events.
func (r *runner) idleCost(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the event streams
	ws := r.o.Subscribers / 2
	conns, err := idleWebSockets(ctx, r.main.base, ws)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if err != nil {
		return err
	}
	sse, err := idleEventStreams(ctx, r.main.base, r.o.Subscribers-ws)
	if err != nil {
		return err
	}
	defer sse.CloseIdleConnections()
	// Let the subscriptions' set-up (handshakes, its garbage) settle.
	if err := sleep(ctx, min(5*time.Second, r.o.IdleTime/4)); err != nil {
		return err
	}
	before, err := r.main.goMetrics(ctx)
	if err != nil {
		return err
	}
	gcs := len(r.main.gcs())
	cpu0, err := r.main.cpu()
	if err != nil {
		return err
	}
	begin := time.Now()
	if err := sleep(ctx, r.o.IdleTime); err != nil {
		return err
	}
	cpu1, err := r.main.cpu()
	if err != nil {
		return err
	}
	wall := time.Since(begin)
	gcs = len(r.main.gcs()) - gcs
	after, err := r.main.goMetrics(ctx)
	if err != nil {
		return err
	}
	share := 100 * (cpu1 - cpu0).Seconds() / wall.Seconds()
	allocs := (after[allocBytes] - before[allocBytes]) / 1024 / wall.Seconds()
	setting := fmt.Sprintf("%d pods cached, %d WebSocket and %d event-stream subscribers to the pods watch (snapshot=false), no churn, %v",
		r.p.n, ws, r.o.Subscribers-ws, r.o.IdleTime)
	f := absFigure("idle CPU", "% of a core", "<= 2%", []float64{share}, func(v float64) bool { return v <= 2 })
	f.Note = fmt.Sprintf("%s; CPU from the kernel's CPU clock of the process: %v; %.0f goroutines", setting, cpu1-cpu0, after[goroutines])
	r.add(f)
	f = absFigure("idle allocation rate", "KiB/s", information, []float64{allocs}, func(float64) bool { return true })
	f.Note = fmt.Sprintf("%s; go_memstats_alloc_bytes_total delta over the window (%.0f allocations/s), %d GCs", setting,
		(after[mallocs]-before[mallocs])/wall.Seconds(), gcs)
	r.add(f)
	return nil
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// idleWebSockets opens n sockets on the pods watch without a snapshot,
// waits until each has its SYNCED marker, and then reads (and drops)
// whatever comes, answering pings, until the socket closes.
func idleWebSockets(ctx context.Context, base string, n int) ([]*websocket.Conn, error) {
	u := "ws" + strings.TrimPrefix(base, "http") + "/api/v1/pods?watch=true&snapshot=false"
	dialer := &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 4 << 10, WriteBufferSize: 1 << 10}
	conns := make([]*websocket.Conn, 0, n)
	for i := range n {
		conn, _, err := dialer.DialContext(ctx, u, nil)
		if err != nil {
			return conns, fmt.Errorf("idle WebSocket %d: %w", i, err)
		}
		conns = append(conns, conn)
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		for synced := false; !synced; {
			_, b, err := conn.ReadMessage()
			if err != nil {
				return conns, fmt.Errorf("idle WebSocket %d: before SYNCED: %w", i, err)
			}
			synced = bytes.Contains(b, []byte(`"type":"SYNCED"`))
		}
		conn.SetReadDeadline(time.Time{})
		go func() {
			for {
				if _, _, err := conn.NextReader(); err != nil {
					return
				}
			}
		}()
	}
	return conns, nil
}

// idleEventStreams opens n Server-Sent Event streams on the pods watch
// without a snapshot, each on its own connection of the client returned,
// waits until each has its SYNCED event, and then reads (and drops)
// whatever comes until ctx ends.
func idleEventStreams(ctx context.Context, base string, n int) (*http.Client, error) {
	client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: -1}}
	for i := range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/pods?watch=true&snapshot=false", nil)
		if err != nil {
			return client, err
		}
		req.Header.Set("Accept", "text/event-stream")
		resp, err := client.Do(req)
		if err != nil {
			return client, fmt.Errorf("idle event stream %d: %w", i, err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return client, fmt.Errorf("idle event stream %d: %s: %s", i, resp.Status, b)
		}
		br := bufio.NewReaderSize(resp.Body, 4<<10)
		for synced := false; !synced; {
			line, err := br.ReadString('\n')
			if err != nil {
				resp.Body.Close()
				return client, fmt.Errorf("idle event stream %d: before SYNCED: %w", i, err)
			}
			synced = strings.TrimSpace(line) == "event: SYNCED"
		}
		go func() {
			defer resp.Body.Close()
			io.Copy(io.Discard, br)
		}()
	}
	return client, nil
}

// The Go runtime's series idleCost reads from kubeindex's /metrics.
const (
	allocBytes = "go_memstats_alloc_bytes_total"
	mallocs    = "go_memstats_mallocs_total"
	goroutines = "go_goroutines"
)

// goMetrics scrapes kubeindex's /metrics for the unlabelled series above.
func (k *kubeindex) goMetrics(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	err := k.scrapeMetrics(ctx, func(line string) error {
		name, value, ok := strings.Cut(line, " ")
		if !ok || (name != allocBytes && name != mallocs && name != goroutines) {
			return nil
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("/metrics: %q: %w", line, err)
		}
		out[name] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, name := range []string{allocBytes, mallocs, goroutines} {
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("/metrics has no %s", name)
		}
	}
	return out, nil
}
