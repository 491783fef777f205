package bench

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A kinformers round that grew the API server is stopped when its RSS
// passes its share of the machine, or when the machine runs short; not for
// memory it did not take.
func TestMemBudget(t *testing.T) {
	const gi = int64(1) << 30
	b := memBudget{rssShare: 0.4, availShare: 0.2, growShare: 0.05}
	for _, tt := range []struct {
		name string
		s    memSample
		want string // a part of the reason; "" when within the budget
	}{
		{"a quiet round", memSample{rss0: 7 * gi, rss: 7*gi + gi/2, total: 24 * gi, available: 14 * gi}, ""},
		{"the API server past 40%", memSample{rss0: 7 * gi, rss: 10 * gi, total: 24 * gi, available: 12 * gi}, "RSS reached 10.0 GiB (from 7.0 GiB), above 40% of the machine's 24.0 GiB"},
		{"just at 40%", memSample{rss0: 7 * gi, rss: 24 * gi * 4 / 10, total: 24 * gi, available: 12 * gi}, ""},
		{"past 40% at rest, the round not growing", memSample{rss0: 15 * gi, rss: 15*gi + gi/2, total: 24 * gi, available: 6 * gi}, ""},
		{"past 40% at rest, the round growing", memSample{rss0: 15 * gi, rss: 17 * gi, total: 24 * gi, available: 6 * gi}, "RSS reached 17.0 GiB"},
		{"short, the round growing", memSample{rss0: 5 * gi, rss: 8 * gi, total: 24 * gi, available: 4 * gi}, "available memory fell to 4.0 GiB, below 20% of 24.0 GiB, while the API server's RSS grew by 3.0 GiB"},
		{"short, the round not growing", memSample{rss0: 5 * gi, rss: 5*gi + gi/2, total: 24 * gi, available: 2 * gi}, ""},
		{"unknown total", memSample{rss0: 5 * gi, rss: 50 * gi}, ""},
	} {
		got := b.exceeded(tt.s)
		if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q; expect %q", tt.name, got, tt.want)
		}
	}
}

func TestParseMeminfo(t *testing.T) {
	total, avail, err := parseMeminfo([]byte("MemTotal:       24608660 kB\nMemFree:         3000000 kB\nMemAvailable:   14680064 kB\nBuffers:            1 kB\n"))
	if err != nil || total != 24608660<<10 || avail != 14680064<<10 {
		t.Errorf("got %d, %d, %v", total, avail, err)
	}
	for _, bad := range []string{"MemTotal: 1 kB\n", "MemTotal: x kB\nMemAvailable: 1 kB\n", "MemTotal: 1 MB\nMemAvailable: 1 kB\n"} {
		if _, _, err := parseMeminfo([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The watcher samples a real process and calls over once, when the budget
// is passed, with the reason it then reports.
func TestWatchMemory(t *testing.T) {
	for _, tt := range []struct {
		share float64
		stop  bool
	}{{1e-9, true}, {1, false}} {
		calls := make(chan string, 10)
		stop := make(chan struct{})
		out := watchMemory(os.Getpid(), 0, memBudget{rssShare: tt.share, availShare: 0, growShare: 0}, func(why string) { calls <- why }, stop)
		if tt.stop {
			<-calls
		}
		time.Sleep(300 * time.Millisecond) // a few more samples
		close(stop)
		w := <-out
		if w.peak <= 0 {
			t.Errorf("share %v: no RSS sampled", tt.share)
		}
		if got := len(calls); got != 0 {
			t.Errorf("share %v: over called %d times more than expected", tt.share, got)
		}
		if (w.stopped != "") != tt.stop || tt.stop && !strings.Contains(w.stopped, "the API server's RSS reached") {
			t.Errorf("share %v: stopped %q", tt.share, w.stopped)
		}
	}
}

// TestRunWithin: a command that passes its budget is killed and the run
// says why, with no error; one within it runs to its end; one that fails
// on its own fails.
func TestRunWithin(t *testing.T) {
	why, err := runWithin(exec.Command("sleep", "30"), memBudget{rssShare: 1e-9, growShare: 0, who: "kubectl"})
	if err != nil || !strings.Contains(why, "kubectl's RSS reached") {
		t.Errorf("over its budget: %q, %v; want it stopped, kubectl named", why, err)
	}
	if why, err := runWithin(exec.Command("true"), memBudget{rssShare: 1, growShare: 1}); why != "" || err != nil {
		t.Errorf("within its budget: %q, %v; want it run to its end", why, err)
	}
	if why, err := runWithin(exec.Command("false"), memBudget{rssShare: 1, growShare: 1}); why != "" || err == nil {
		t.Errorf("a failing command: %q, %v; want its error", why, err)
	}
}

// An API server already above the budget's RSS share at rest gets no
// kinformers round: at 150,000 pods on this 24 GiB machine it holds 12.3
// GiB, and a stopped round left it growing past 20 GiB.
func TestBudgetAtRest(t *testing.T) {
	b := memBudget{rssShare: 0.4, availShare: 0.2, growShare: 0.05}
	total := gibs(23.5)
	if why := b.atRest(gibs(12.3), total); !strings.Contains(why, "12.3 GiB at rest, above 40%") {
		t.Errorf("an API server at 12.3 GiB of 23.5 may run rounds: %q", why)
	}
	if why := b.atRest(gibs(4.5), total); why != "" {
		t.Errorf("an API server at 4.5 GiB of 23.5 (50,000 pods) may not: %q", why)
	}
	if why := b.atRest(1<<30, 0); why != "" {
		t.Errorf("without /proc/meminfo's total: %q", why)
	}
}

func gibs(g float64) int64 { return int64(g * (1 << 30)) }
