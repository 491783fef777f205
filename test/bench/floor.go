package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// floorP99 is the event-to-client delay past which a rate is not sustained.
const floorP99 = 100 * time.Millisecond

// floorServer is one of the servers the fan-out ceiling compares: its
// process, where its clients subscribe, and the event source feeding it.
type floorServer struct {
	name string
	proc *proc
	base string // http://host:port of its WebSocket endpoint
	feed *proc
	src  string // http://host:port of its event source
}

// floorStep is one rate of one server's ladder.
type floorStep struct {
	rate     int // pod updates per second
	out      fanOut
	perFrame time.Duration // the server's CPU per frame delivered
	feedCPU  float64       // the source's cores
	ok       bool          // every frame delivered, no resync, p99 within floorP99
	tries    int
}

// fanFloor is the fan-out ceiling with a source that is not the
// bottleneck: kubeindex and a bare gorilla broadcaster, each fed by its own
// fake API server (same pods, same events), each with the same number of
// clients of the same code, step up the event rate until the p99 from the
// update's stamp to the client's read passes 100 ms or a frame is lost.
func (r *runner) fanFloor(ctx context.Context) error {
	var servers [2]*floorServer
	for i, name := range []string{"kubeindex", "broadcaster"} {
		feed, src, err := r.startReady(ctx, "benchfeed-"+name, r.feedBin, "-stamp", stampKey)
		if err != nil {
			return err
		}
		servers[i] = &floorServer{name: name, feed: feed, src: src}
	}
	kubeconfig := filepath.Join(r.dir, "feed.kubeconfig")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, feedKubeconfig, servers[0].src), 0o600); err != nil {
		return err
	}
	k, err := startKubeindex(r.kubeindex, r.dir, kubeconfig, "kubeindex-fanfloor", "", "", fiveIndexes)
	if err != nil {
		return err
	}
	r.track(k.proc)
	if _, err := k.waitReady(ctx, time.Minute); err != nil {
		return err
	}
	servers[0].proc, servers[0].base = k.proc, k.base
	if servers[1].proc, servers[1].base, err = r.startReady(ctx, "benchbroadcast", r.broadcastBin, "-source", servers[1].src); err != nil {
		return err
	}

	var fps, cpu [][2]float64
	var notes []string
	for round := range r.o.slowRounds() {
		k, b, err := r.ladders(ctx, servers, round)
		if err != nil {
			return err
		}
		fps = append(fps, [2]float64{sustained(k), sustained(b)})
		rate, kc, bc := commonCPU(k, b)
		cpu = append(cpu, [2]float64{us(kc), us(bc)})
		notes = append(notes, fmt.Sprintf("round %d: kubeindex %s; broadcaster %s; CPU compared at %d updates/s",
			round, ladderText(k), ladderText(b), rate))
	}
	note := fmt.Sprintf("%d clients each, %v per step, rates (pod updates/s) %v; a rate is sustained when every client gets every frame, none is told to resync and the p99 from the source's stamp to the client's read is <= %v, in one of two tries (a stall of the shared machine fails a single try); the servers take each rate in turn, the order alternating; each server has its own fake API server (benchfeed) publishing the demo's pods; ",
		r.o.Subscribers, r.o.FloorStep, r.o.FloorRates, floorP99) + strings.Join(notes, "; ")
	f := pairFigure("fan-out ceiling frames/s (fake source)", "frames/s", "bare gorilla broadcaster, same source and clients", "ratio >= 1.0", fps, kOverC, func(x float64) bool { return x >= 1.0 })
	f.Note = note
	r.add(f)
	g := pairFigure("fan-out CPU per frame (fake source)", "µs", "bare gorilla broadcaster, same rate", "ratio <= 1.0", cpu, kOverC, func(x float64) bool { return x <= 1.0 })
	g.Note = "the server process's CPU (the kernel's CPU clock of the process, ns) over the frames its clients received, at the highest rate both sustained in the round (the lowest step if one sustained none)"
	r.add(g)
	return nil
}

// feedKubeconfig points kubeindex at a fake source (%s: its base URL).
const feedKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: feed, cluster: {server: %q}}]
users: [{name: feed, user: {}}]
contexts: [{name: feed, context: {cluster: feed, user: feed}}]
current-context: feed
`

// startReady runs a helper that prints "READY <addr>" within a minute and
// returns its base URL.
func (r *runner) startReady(ctx context.Context, name, bin string, args ...string) (*proc, string, error) {
	return r.startReadyWithin(ctx, time.Minute, name, bin, args...)
}

// startReadyWithin is startReady for a helper that may take longer.
func (r *runner) startReadyWithin(ctx context.Context, timeout time.Duration, name, bin string, args ...string) (*proc, string, error) {
	p, err := startProc(name, bin, args, nil)
	if err != nil {
		return nil, "", err
	}
	r.track(p)
	select {
	case line := <-p.stdoutC:
		addr, ok := strings.CutPrefix(line, "READY ")
		if !ok {
			return nil, "", fmt.Errorf("%s: unexpected %q", name, line)
		}
		return p, "http://" + addr, nil
	case <-p.exited:
		return nil, "", fmt.Errorf("%s exited: %v: %s", name, p.err, p.logTail())
	case <-time.After(timeout):
		return nil, "", fmt.Errorf("%s not ready in %v: %s", name, timeout, p.logTail())
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
}

// ladders subscribes the clients to both servers (kubeindex first) and
// steps the rate up, each rate offered to one server and then the other
// (the order alternating), until neither sustains it. A server's ladder
// ends at its first rate not sustained in two tries.
func (r *runner) ladders(ctx context.Context, servers [2]*floorServer, round int) (k, b []floorStep, err error) {
	var subs [2][]*subscriber
	for i, s := range servers {
		if subs[i], err = subscribe(ctx, s.base, r.o.Subscribers); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.name, err)
		}
		defer closeAll(subs[i])
	}
	var steps [2][]floorStep
	done := [2]bool{}
	for n, rate := range r.o.FloorRates {
		for j := range 2 {
			i := (j + n + round) % 2 // neither always goes first
			if done[i] {
				continue
			}
			var st floorStep
			for try := range 2 {
				if st, err = r.floorStep(ctx, servers[i], subs[i], rate); err != nil {
					return nil, nil, fmt.Errorf("%s at %d updates/s: %w", servers[i].name, rate, err)
				}
				st.tries = try + 1
				r.logf("fan-out ceiling round %d, %s at %d updates/s, try %d: %d/%d frames, %.0f frames/s, p50 %v p99 %v, %d resyncs, %.1f µs CPU per frame, source %.2f cores",
					round, servers[i].name, rate, st.tries, st.out.Frames, st.out.Expected, st.out.FramesPerSec, st.out.P50, st.out.P99, st.out.Resyncs, us(st.perFrame), st.feedCPU)
				if st.ok || st.out.Resyncs > 0 || st.out.Frames < st.out.Expected {
					break // a lost frame is no stall: its subscriptions may be gone
				}
			}
			steps[i] = append(steps[i], st)
			done[i] = !st.ok
		}
		if done[0] && done[1] {
			break
		}
	}
	return steps[0], steps[1], nil
}

func (r *runner) floorStep(ctx context.Context, s *floorServer, subs []*subscriber, rate int) (floorStep, error) {
	count := max(1, int(float64(rate)*r.o.FloorStep.Seconds()))
	before := frameCounts(subs)
	cpu0, err1 := s.proc.cpu()
	feed0, err2 := s.feed.cpu()
	if err := firstErr(err1, err2); err != nil {
		return floorStep{}, err
	}
	begin := time.Now()
	sent, err := publish(ctx, s.src, rate, count)
	if err != nil {
		return floorStep{}, err
	}
	out := collect(subs, before, int64(sent), begin, 5*time.Second, nil)
	wall := time.Since(begin)
	cpu1, err1 := s.proc.cpu()
	feed1, err2 := s.feed.cpu()
	if err := firstErr(err1, err2); err != nil {
		return floorStep{}, err
	}
	st := floorStep{rate: rate, out: out, feedCPU: (feed1 - feed0).Seconds() / wall.Seconds()}
	if out.Frames > 0 {
		st.perFrame = (cpu1 - cpu0) / time.Duration(out.Frames)
	}
	st.ok = out.Frames == out.Expected && out.Resyncs == 0 && out.P99 <= floorP99
	return st, nil
}

// publish asks a fake source for count updates at rate per second.
func publish(ctx context.Context, src string, rate, count int) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/bench/publish?rate=%d&count=%d", src, rate, count), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("publish: %s", resp.Status)
	}
	var res struct{ Sent int }
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return 0, err
	}
	return res.Sent, nil
}

// sustained is the highest frames/s of a step that was sustained (0 if none).
func sustained(steps []floorStep) float64 {
	var best float64
	for _, s := range steps {
		if s.ok {
			best = max(best, s.out.FramesPerSec)
		}
	}
	return best
}

// commonCPU returns the highest rate both ladders sustained (their first
// if there is none) and each server's CPU per frame at it.
func commonCPU(a, b []floorStep) (rate int, ca, cb time.Duration) {
	for i := 0; i < min(len(a), len(b)); i++ {
		if i == 0 || (a[i].ok && b[i].ok) {
			rate, ca, cb = a[i].rate, a[i].perFrame, b[i].perFrame
		}
	}
	return rate, ca, cb
}

func ladderText(steps []floorStep) string {
	var parts []string
	for _, s := range steps {
		mark := ""
		if s.tries > 1 {
			mark = " (second try)"
		}
		if !s.ok {
			mark = fmt.Sprintf(" (not sustained, %d tries)", s.tries)
		}
		parts = append(parts, fmt.Sprintf("%d/s: %.0f frames/s, p99 %.0f ms, %d/%d frames, %.1f µs/frame%s",
			s.rate, s.out.FramesPerSec, ms(s.out.P99), s.out.Frames, s.out.Expected, us(s.perFrame), mark))
	}
	return strings.Join(parts, ", ")
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
