package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The kinformers figure's direct rounds make the API server encode a full
// list for every informer: at 50,000 pods, 100 informers drove it to 23 GB
// of RSS and the machine (24 GiB) ran out of memory. A round is therefore
// watched, and stopped when it passes a memory budget; the figure says so.

// memBudget is what one kinformers round may take of the machine's memory:
// once the round has grown the API server's RSS by growShare of MemTotal,
// the RSS may not pass rssShare of MemTotal, nor MemAvailable fall below
// availShare of it. The growth condition keeps a round from being blamed
// for what other processes on the shared machine hold. An API server
// already past rssShare at rest gets no round at all (atRest).
type memBudget struct {
	rssShare, availShare, growShare float64
	// who is the process watched, as the reasons name it; "" is the API
	// server.
	who string
}

// atRest says why no kinformers round may run on an API server that holds
// rss before the first, on a machine of total bytes: "" when rounds may.
// At rest above rssShare, the budget's growth condition is all that stands
// between a round and the machine's memory, and it cannot hold: at 150,000
// pods (12.3 GiB at rest, 24 GiB machine) a direct round was stopped when
// it had grown the API server by 1.2 GiB, but the API server went on
// encoding the lists its gone clients had asked for, past 20 GiB, and the
// machine swapped. Twice.
func (b memBudget) atRest(rss, total int64) string {
	if total <= 0 || float64(rss) <= b.rssShare*float64(total) {
		return ""
	}
	return fmt.Sprintf("the API server holds %s at rest, above %.0f%% of the machine's %s: a round of direct lists would take the rest of its memory, and stopping the clients does not stop the API server encoding what they asked for",
		gib(rss), 100*b.rssShare, gib(total))
}

// memSample is one look at the machine during a round.
type memSample struct {
	rss0, rss        int64 // the API server's RSS when the round began, now
	total, available int64 // MemTotal, MemAvailable
}

// exceeded says why s passes the budget, or "" when it does not.
func (b memBudget) exceeded(s memSample) string {
	if s.total <= 0 {
		return ""
	}
	total := float64(s.total)
	if float64(s.rss-s.rss0) < b.growShare*total {
		return ""
	}
	who := b.who
	if who == "" {
		who = "the API server"
	}
	if float64(s.rss) > b.rssShare*total {
		return fmt.Sprintf("%s's RSS reached %s (from %s), above %.0f%% of the machine's %s",
			who, gib(s.rss), gib(s.rss0), 100*b.rssShare, gib(s.total))
	}
	if float64(s.available) < b.availShare*total {
		return fmt.Sprintf("the machine's available memory fell to %s, below %.0f%% of %s, while %s's RSS grew by %s to %s",
			gib(s.available), 100*b.availShare, gib(s.total), who, gib(s.rss-s.rss0), gib(s.rss))
	}
	return ""
}

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// parseMeminfo reads MemTotal and MemAvailable (bytes) from /proc/meminfo.
func parseMeminfo(b []byte) (total, available int64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	found := 0
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "MemTotal" && key != "MemAvailable") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("/proc/meminfo: malformed line %q", sc.Text())
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/meminfo: %q: %w", sc.Text(), err)
		}
		if key == "MemTotal" {
			total = v << 10
		} else {
			available = v << 10
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("/proc/meminfo lacks MemTotal or MemAvailable")
	}
	return total, available, sc.Err()
}

func readMeminfo() (total, available int64, err error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0, err
	}
	return parseMeminfo(b)
}

// memWatch is what watching a round's memory found: the API server's
// highest RSS, and why the round was stopped ("" if it was not).
type memWatch struct {
	peak    int64
	stopped string
	at      time.Time // when it was stopped
}

// watchMemory samples pid's RSS and the machine's available memory every
// 100 ms until stop is closed, calls over once (with the reason) when a
// sample passes b, and then reports.
func watchMemory(pid int, rss0 int64, b memBudget, over func(reason string), stop <-chan struct{}) <-chan memWatch {
	out := make(chan memWatch, 1)
	go func() {
		var w memWatch
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, err := rssOf(pid); err == nil {
				w.peak = max(w.peak, rss)
				if total, avail, err := readMeminfo(); err == nil && w.stopped == "" {
					if why := b.exceeded(memSample{rss0: rss0, rss: rss, total: total, available: avail}); why != "" {
						w.stopped, w.at = why, time.Now()
						over(why)
					}
				}
			}
			select {
			case <-stop:
				out <- w
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// runWithin runs cmd to its end unless it passes b as its RSS grows from
// nothing (b.who names it): then it is killed, and stopped says why.
// kubectl get pods -A at 150,000 pods grew to 10 GB beside a 13 GB API
// server and left the machine (24 GiB) no memory.
func runWithin(cmd *exec.Cmd, b memBudget) (stopped string, err error) {
	if err := cmd.Start(); err != nil {
		return "", err
	}
	stop := make(chan struct{})
	w := watchMemory(cmd.Process.Pid, 0, b, func(string) { cmd.Process.Kill() }, stop)
	err = cmd.Wait()
	close(stop)
	if res := <-w; res.stopped != "" {
		return res.stopped, nil
	}
	return "", err
}

// relieveWait is how long relieveMemory waits for the API server.
const relieveWait = 3 * time.Minute

// relieveMemory runs before each kinformers round. When the API server
// still holds what earlier rounds took, past the budget measured from
// base (its RSS before the figure's first round), it waits, at most
// relieveWait, for the RSS to come back: a round stopped for the budget
// leaves its memory to the API server, whose Go runtime gives it back only
// after a GC (forced every two minutes when nothing allocates) and its
// scavenger, and the next round would start where the last one was
// stopped. It returns "" when the API server is within the budget, and
// otherwise why it still is not after the wait: then no further round may
// run. The round's own
// watch cannot stand in for this: it measures growth from the round's
// start, and at 150,000 pods the API server went on growing, from 14 to
// 19 GiB, for three minutes after the clients of a stopped round of 100
// direct lists had gone, since it finishes encoding what was asked.
func (r *runner) relieveMemory(ctx context.Context, base int64) (string, error) {
	b := r.o.memBudget()
	check := func() (string, error) {
		rss, err := rssOf(r.c.PID())
		if err != nil {
			return "", err
		}
		total, avail, err := readMeminfo()
		if err != nil {
			return "", err
		}
		return b.exceeded(memSample{rss0: base, rss: rss, total: total, available: avail}), nil
	}
	why, err := check()
	if why == "" || err != nil {
		return "", err
	}
	r.logf("informers: before the next round %s; waiting for it to come down", why)
	for deadline := time.Now().Add(relieveWait); time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(5 * time.Second):
		}
		if why, err = check(); why == "" || err != nil {
			return "", err
		}
	}
	return why, nil
}
