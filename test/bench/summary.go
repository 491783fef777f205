package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// ReadReport reads a report written by WriteJSON.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(r.Figures) == 0 {
		return nil, fmt.Errorf("%s: no figures", path)
	}
	return &r, nil
}

// Summarize writes the Markdown table of several runs of the same
// benchmark, as BENCHMARKS.md opens with: each figure's kubeindex value
// and comparison (medians over the runs that have it), its ratio in each
// run (its value, for a figure without a comparison), its target, and in how many runs it was met. A figure missing from
// a run shows "—" there and does not count as met.
func Summarize(w io.Writer, reps []*Report) error {
	if len(reps) == 0 {
		return fmt.Errorf("no reports")
	}
	var names []string
	byRun := make([]map[string]*Figure, len(reps))
	for i, r := range reps {
		byRun[i] = make(map[string]*Figure)
		for _, f := range r.Figures {
			byRun[i][f.Name] = f
			if !slices.Contains(names, f.Name) {
				names = append(names, f.Name)
			}
		}
	}
	var runs []string
	for i, r := range reps {
		runs = append(runs, fmt.Sprintf("run %d", i+1))
		fmt.Fprintf(w, "- run %d: %s, %d pods, %d CPUs, %s\n", i+1, r.Date, r.Pods, r.CPUs, r.Elapsed)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| figure | kubeindex | comparison (same run) | ratio (or value) in %s | target | met |\n", strings.Join(runs, ", "))
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, name := range names {
		var first *Figure
		var ks, cs []float64
		var ratios []string
		met, have := 0, 0
		for i := range reps {
			f := byRun[i][name]
			if f == nil {
				ratios = append(ratios, "—")
				continue
			}
			have++
			if first == nil {
				first = f
			}
			if !math.IsNaN(f.Kubeindex) {
				ks = append(ks, f.Kubeindex)
			}
			if f.Against != "" {
				if !math.IsNaN(f.Comparison) {
					cs = append(cs, f.Comparison)
				}
				ratios = append(ratios, ratioText(f.Ratio))
			} else {
				ratios = append(ratios, num(f.Kubeindex))
			}
			if f.Met && f.Target != information {
				met++
			}
		}
		cmp := "—"
		if first.Against != "" {
			cmp = fmt.Sprintf("%s %s (%s)", num(median(cs)), first.Unit, first.Against)
		}
		verdict := "—"
		if first.Target != information {
			verdict = fmt.Sprintf("%d of %d", met, len(reps))
			if 2*met <= len(reps) {
				verdict = "**" + verdict + "**"
			}
		}
		fmt.Fprintf(w, "| %s | %s %s | %s | %s | %s | %s |\n", name, num(median(ks)), first.Unit, cmp,
			strings.Join(ratios, ", "), first.Target, verdict)
	}
	return nil
}
