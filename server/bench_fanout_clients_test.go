package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The client side of BenchmarkStreamFanout: a child process (this test
// binary running TestFanoutClients) holding the WebSockets, so that the
// benchmark's memory figures are the server's alone.

// fanoutClientProc drives the client process: one command line in, one
// JSON line out.
type fanoutClientProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startFanoutClients(b *testing.B, url string, n int) *fanoutClientProc {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestFanoutClients$", "-test.count=1")
	cmd.Env = append(os.Environ(), fanoutEnvURL+"="+url, fanoutEnvN+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &fanoutClientProc{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	b.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	var ready struct{ Ready int }
	p.reply(b, &ready)
	return p
}

// reply reads the client process' next answer.
func (p *fanoutClientProc) reply(b *testing.B, v any) {
	for p.out.Scan() {
		if line, ok := strings.CutPrefix(p.out.Text(), "fanout: "); ok {
			if err := json.Unmarshal([]byte(line), v); err != nil {
				b.Fatal(err)
			}
			return
		}
	}
	b.Fatalf("the client process ended: %v", p.out.Err())
}

func (p *fanoutClientProc) send(b *testing.B, cmd string) {
	if _, err := fmt.Fprintln(p.in, cmd); err != nil {
		b.Fatal(err)
	}
}

// fanoutRound is what the clients received in one round.
type fanoutRound struct {
	Frames, Expected, Resyncs int64
	FrameBytes                int
	LastNanos                 int64 // wall clock of the last frame read
	P50, P99                  time.Duration
	ServerCPU, ClientCPU      time.Duration // the processes' CPU time during the round
	begin                     time.Time
}

func (r fanoutRound) framesPerSec() float64 {
	el := time.Unix(0, r.LastNanos).Sub(r.begin)
	if el <= 0 {
		return 0
	}
	return float64(r.Frames) / el.Seconds()
}

// serverMicros is the server process' CPU time per frame delivered: the
// demo API server's and the cache's work per event included. Unlike the
// rates, it hardly depends on what else the machine runs.
func (r fanoutRound) serverMicros() float64 {
	return float64(r.ServerCPU.Microseconds()) / float64(max(r.Frames, 1))
}

func (r fanoutRound) clientMicros() float64 {
	return float64(r.ClientCPU.Microseconds()) / float64(max(r.Frames, 1))
}

// cpuTime is the process' user and system CPU time, from /proc/self/stat;
// zero where there is none.
func cpuTime() time.Duration {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// Fields 14 and 15 (utime, stime, in clock ticks of 1/100 s on Linux)
	// come after the command name, which is in parentheses.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// round has the clients count events more frames while the feed applies
// that many events at hz per second (0: at once).
func (p *fanoutClientProc) round(b *testing.B, feed *fanoutFeed, events, hz int) fanoutRound {
	p.send(b, "round "+strconv.Itoa(events))
	var armed struct{ Armed bool }
	p.reply(b, &armed)
	cpu := cpuTime()
	begin := feed.run(b, events, hz)
	var r fanoutRound
	p.reply(b, &r)
	r.begin, r.ServerCPU = begin, cpuTime()-cpu
	if r.Frames < r.Expected {
		b.Errorf("%d of %d frames delivered", r.Frames, r.Expected)
	}
	return r
}

func (p *fanoutClientProc) close(b *testing.B) {
	p.in.Close()
	if err := p.cmd.Wait(); err != nil {
		b.Errorf("client process: %v", err)
	}
}

// TestFanoutClients is the client process of BenchmarkStreamFanout; in an
// ordinary test run it does nothing. It opens the sockets, answers "ready",
// then for each "round N" line answers "armed", waits until every socket
// has N more MODIFIED frames (or a minute) and answers with the round's
// figures.
func TestFanoutClients(t *testing.T) {
	url := os.Getenv(fanoutEnvURL)
	if url == "" {
		t.Skip("the client process of BenchmarkStreamFanout")
	}
	n, _ := strconv.Atoi(os.Getenv(fanoutEnvN))
	subs, err := dialFanout(url, n)
	if err != nil {
		t.Fatal(err)
	}
	answer := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Printf("fanout: %s\n", b)
	}
	answer(map[string]int{"Ready": len(subs)})
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		want, err := strconv.ParseInt(strings.TrimPrefix(in.Text(), "round "), 10, 64)
		if err != nil {
			t.Fatalf("command %q", in.Text())
		}
		before := make([]int64, len(subs))
		for i, s := range subs {
			before[i] = s.frames.Load()
		}
		answer(map[string]bool{"Armed": true})
		cpu := cpuTime()
		r := collectFanout(subs, before, want)
		r.ClientCPU = cpuTime() - cpu
		answer(r)
	}
	for _, s := range subs {
		s.conn.Close()
	}
}

type fanoutSub struct {
	conn       *websocket.Conn
	synced     chan struct{}
	done       chan struct{}
	frames     atomic.Int64
	resyncs    atomic.Int64
	lastNanos  atomic.Int64
	frameBytes atomic.Int64
	mu         sync.Mutex
	latency    []time.Duration
}

func dialFanout(url string, n int) ([]*fanoutSub, error) {
	dialer := &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 16 << 10}
	subs := make([]*fanoutSub, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				conn, _, err := dialer.Dial(url, nil)
				if err != nil {
					errs <- fmt.Errorf("socket %d: %w", i, err)
					return
				}
				s := &fanoutSub{conn: conn, synced: make(chan struct{}), done: make(chan struct{})}
				go s.read()
				subs[i] = s
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	deadline := time.After(time.Minute)
	for i, s := range subs {
		select {
		case <-s.synced:
		case <-s.done:
			return nil, fmt.Errorf("socket %d ended before SYNCED", i)
		case <-deadline:
			return nil, fmt.Errorf("socket %d: no SYNCED within a minute", i)
		}
	}
	return subs, nil
}

var (
	fanoutNeedle   = []byte(`"` + fanoutStampKey + `":"`)
	fanoutSynced   = []byte(`"type":"SYNCED"`)
	fanoutResync   = []byte(`"type":"RESYNC_REQUIRED"`)
	fanoutModified = []byte(`"type":"MODIFIED"`)
)

func (s *fanoutSub) read() {
	defer close(s.done)
	buf := bytes.NewBuffer(make([]byte, 0, 16<<10))
	synced := sync.OnceFunc(func() { close(s.synced) })
	for {
		_, r, err := s.conn.NextReader()
		if err != nil {
			return
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			return
		}
		now := time.Now()
		msg := buf.Bytes()
		head := msg[:min(len(msg), 48)]
		switch {
		case bytes.Contains(head, fanoutSynced):
			synced()
		case bytes.Contains(head, fanoutResync):
			s.resyncs.Add(1)
		case bytes.Contains(head, fanoutModified):
			s.frameBytes.Store(int64(len(msg)))
			if i := bytes.Index(msg, fanoutNeedle); i >= 0 {
				rest := msg[i+len(fanoutNeedle):]
				if j := bytes.IndexByte(rest, '"'); j > 0 {
					if sent, err := strconv.ParseInt(string(rest[:j]), 10, 64); err == nil {
						s.mu.Lock()
						s.latency = append(s.latency, now.Sub(time.Unix(0, sent)))
						s.mu.Unlock()
					}
				}
			}
			s.lastNanos.Store(now.UnixNano())
			s.frames.Add(1)
		}
	}
}

func collectFanout(subs []*fanoutSub, before []int64, want int64) fanoutRound {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		all := true
		for i, s := range subs {
			if s.frames.Load()-before[i] < want && s.resyncs.Load() == 0 {
				all = false
				break
			}
		}
		if all {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var r fanoutRound
	var lat []time.Duration
	for i, s := range subs {
		r.Frames += s.frames.Load() - before[i]
		r.Resyncs += s.resyncs.Load()
		r.LastNanos = max(r.LastNanos, s.lastNanos.Load())
		r.FrameBytes = max(r.FrameBytes, int(s.frameBytes.Load()))
		s.mu.Lock()
		lat = append(lat, s.latency...)
		s.latency = s.latency[:0]
		s.mu.Unlock()
	}
	r.Expected = want * int64(len(subs))
	slices.Sort(lat)
	if len(lat) > 0 {
		r.P50, r.P99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return r
}
