package bench

import (
	"encoding/json"
	"math"
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
// runs' JSON is summarized, then the first shows n/a (null in its JSON),
// and the medians are those of the run that computed them.
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

// A figure survives its JSON: numbers as they were, what could not be
// computed (NaN, an infinity) as null and NaN again, in the rounds too,
// zero comparisons left out as before.
func TestFigureJSONRoundTrip(t *testing.T) {
	nan := math.NaN()
	f := &Figure{Name: "x", Unit: "s", Kubeindex: 1.5, Comparison: nan, Against: "y", Ratio: math.Inf(1), Target: "ratio <= 1",
		Rounds: [][3]float64{{1.5, nan, nan}, {2, 4, 0.5}}, Note: "n"}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"kubeindex":1.5,"comparison":null,"ratio":null,"rounds":[[1.5,null,null],[2,4,0.5]]`; !strings.Contains(string(b), want) {
		t.Errorf("JSON %s, want it to hold %s", b, want)
	}
	var back Figure
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Name != "x" || back.Against != "y" || back.Note != "n" || back.Kubeindex != 1.5 || !math.IsNaN(back.Comparison) ||
		!math.IsNaN(back.Ratio) || !math.IsNaN(back.Rounds[0][2]) || back.Rounds[1] != [3]float64{2, 4, 0.5} {
		t.Errorf("read back as %+v", back)
	}
	abs, err := json.Marshal(&Figure{Name: "idle CPU", Kubeindex: 0.4, Target: "<= 2%"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(abs), "comparison") || strings.Contains(string(abs), "ratio") {
		t.Errorf("an absolute figure's JSON names a comparison: %s", abs)
	}
}
