package bench

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestSummarizeCountsRunsMet(t *testing.T) {
	var runs []*Report
	for i, ratio := range []float64{0.95, 0.85, 0.92} {
		r := &Report{Date: "2026-11-25", Pods: 50000, CPUs: 2, Figures: []*Figure{
			pairFigure("GET by key requests/s", "req/s", "echo", "ratio >= 0.90",
				[][2]float64{{ratio * 1000, 1000}}, kOverC, func(x float64) bool { return x >= 0.90 }),
			absFigure("idle CPU", "%", "<= 2 %", []float64{0.3 + float64(i)}, func(v float64) bool { return v <= 2 }),
		}}
		if i == 1 {
			r.Figures = r.Figures[:1] // a run without the idle figure
		} // the third's, 2.3 %, misses
		runs = append(runs, r)
	}
	out := summarizeThroughJSON(t, runs)
	for _, want := range []string{
		"| GET by key requests/s | 920.0 req/s | 1000 req/s (echo) | 0.950, 0.850, 0.920 | ratio >= 0.90 | 2 of 3 |",
		"| idle CPU | 1.30 % | — | 0.30, —, 2.30 | <= 2 % | **1 of 3** |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing row\n%s\nin\n%s", want, out)
		}
	}
	if _, err := ReadReport(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("a missing file read without error")
	}
}

// TestSummarizeShowsWhatNoRunComputed: given a figure one run measured no
// round of (kubectl stopped for memory) and another run that did, when the
// runs' JSON is summarized, then the first shows n/a, not the -1 the JSON
// holds for it, and the medians are those of the run that computed them.
func TestSummarizeShowsWhatNoRunComputed(t *testing.T) {
	var runs []*Report
	for _, pairs := range [][][2]float64{nil, {{20, 30}}} { // the first run: no round measured
		f := pairFigure("kubectl get pods -A wall", "s", "API server", "speed-up >= 1x", pairs, cOverK, func(x float64) bool { return x >= 1 })
		runs = append(runs, &Report{Date: "2026-11-26", Pods: 150000, CPUs: 2, Figures: []*Figure{f}})
	}
	out := summarizeThroughJSON(t, runs)
	if want := "| kubectl get pods -A wall | 20.0 s | 30.0 s (API server) | n/a, 1.500 | speed-up >= 1x | **1 of 2** |"; !strings.Contains(out, want) {
		t.Fatalf("got\n%s\nwant the row %s", out, want)
	}
}

// summarizeThroughJSON writes each run as WriteJSON does, reads them back
// as -summarize does, and returns the table.
func summarizeThroughJSON(t *testing.T, runs []*Report) string {
	t.Helper()
	dir := t.TempDir()
	var reps []*Report
	for i, r := range runs {
		path := filepath.Join(dir, strings.Repeat("r", i+1)+".json")
		if err := r.WriteJSON(path); err != nil {
			t.Fatal(err)
		}
		back, err := ReadReport(path)
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, back)
	}
	var b strings.Builder
	if err := Summarize(&b, reps); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
