package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"text/tabwriter"
	"time"
)

// Figure is one row of the table. Ratio is the median of the per-round
// ratios (each round's kubeindex figure against the comparison measured
// right beside it), not the ratio of the medians.
type Figure struct {
	Name       string  `json:"name"`
	Unit       string  `json:"unit"`
	Kubeindex  float64 `json:"kubeindex"`
	Comparison float64 `json:"comparison,omitempty"`
	// Against names the comparison; empty for absolute targets.
	Against string  `json:"against,omitempty"`
	Ratio   float64 `json:"ratio,omitempty"`
	// Target is the condition, e.g. "ratio >= 0.85" or "<= 100 ms".
	Target string `json:"target"`
	Met    bool   `json:"met"`
	// Rounds holds each round's (kubeindex, comparison, ratio).
	Rounds [][3]float64 `json:"rounds,omitempty"`
	Note   string       `json:"note,omitempty"`
}

// Report is the whole run.
type Report struct {
	Date    string    `json:"date"`
	Pods    int       `json:"pods"`
	Rounds  int       `json:"rounds"`
	CPUs    int       `json:"cpus"`
	Context []string  `json:"context"`
	Figures []*Figure `json:"figures"`
	Elapsed string    `json:"elapsed"`
}

// pairFigure builds a figure from per-round pairs; ratio(k, c) is the
// per-round ratio and met judges the median ratio.
func pairFigure(name, unit, against, target string, pairs [][2]float64, ratio func(k, c float64) float64, met func(r float64) bool) *Figure {
	f := &Figure{Name: name, Unit: unit, Against: against, Target: target}
	var ks, cs, rs []float64
	for _, p := range pairs {
		r := ratio(p[0], p[1])
		ks, cs, rs = append(ks, p[0]), append(cs, p[1]), append(rs, r)
		f.Rounds = append(f.Rounds, [3]float64{p[0], p[1], r})
	}
	f.Kubeindex, f.Comparison, f.Ratio = median(ks), median(cs), median(rs)
	f.Met = len(pairs) > 0 && met(f.Ratio)
	return f
}

// absFigure is a figure with an absolute target on the median.
func absFigure(name, unit, target string, values []float64, met func(v float64) bool) *Figure {
	f := &Figure{Name: name, Unit: unit, Target: target}
	for _, v := range values {
		f.Rounds = append(f.Rounds, [3]float64{v, 0, 0})
	}
	f.Kubeindex = median(values)
	f.Met = len(values) > 0 && met(f.Kubeindex)
	return f
}

func kOverC(k, c float64) float64 { return safeDiv(k, c) }
func cOverK(k, c float64) float64 { return safeDiv(c, k) }

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Print writes the table.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "kubeindex benchmark, %s: %d pods, %d rounds, %d CPUs\n", r.Date, r.Pods, r.Rounds, r.CPUs)
	for _, c := range r.Context {
		fmt.Fprintln(w, "  "+c)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tkubeindex\tcomparison\tratio\ttarget\tmet?")
	for _, f := range r.Figures {
		cmp, ratio := "—", "—"
		if f.Against != "" {
			cmp = fmt.Sprintf("%s %s (%s)", num(f.Comparison), f.Unit, f.Against)
			ratio = ratioText(f.Ratio)
		}
		met := "MISSED"
		switch {
		case f.Target == information:
			met = "—"
		case f.Met:
			met = "met"
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\t%s\t%s\n", f.Name, num(f.Kubeindex), f.Unit, cmp, ratio, f.Target, met)
	}
	tw.Flush()
	for _, f := range r.Figures {
		if f.Note != "" {
			fmt.Fprintf(w, "  %s: %s\n", f.Name, f.Note)
		}
	}
	fmt.Fprintf(w, "elapsed %s\n", r.Elapsed)
}

// ratioText shows a ratio to three decimals below 10, so that one just
// under its target (0.846 against >= 0.85) does not print as the target.
func ratioText(v float64) string {
	if a := math.Abs(v); a < 10 && !math.IsNaN(v) {
		return fmt.Sprintf("%.3f", v)
	}
	return num(v)
}

func num(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "n/a"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 0.1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.4f", v)
	}
}

// WriteJSON writes the report to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// jsonFloat is a figure's number in JSON: null when it could not be
// computed (NaN; infinities too), which encoding/json cannot write as a
// float, and NaN again when read.
type jsonFloat float64

func (v jsonFloat) MarshalJSON() ([]byte, error) {
	if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(v))
}

func (v *jsonFloat) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = jsonFloat(math.NaN())
		return nil
	}
	return json.Unmarshal(b, (*float64)(v))
}

// figureJSON is a Figure as JSON: its numbers as jsonFloat, the rest as
// they are (the embedded fields of the same names are shadowed).
type figureJSON struct {
	*figureFields
	Kubeindex  jsonFloat      `json:"kubeindex"`
	Comparison jsonFloat      `json:"comparison,omitempty"`
	Ratio      jsonFloat      `json:"ratio,omitempty"`
	Rounds     [][3]jsonFloat `json:"rounds,omitempty"`
}

// figureFields is Figure without its methods.
type figureFields Figure

func (f *Figure) MarshalJSON() ([]byte, error) {
	j := figureJSON{figureFields: (*figureFields)(f), Kubeindex: jsonFloat(f.Kubeindex),
		Comparison: jsonFloat(f.Comparison), Ratio: jsonFloat(f.Ratio)}
	for _, rd := range f.Rounds {
		j.Rounds = append(j.Rounds, [3]jsonFloat{jsonFloat(rd[0]), jsonFloat(rd[1]), jsonFloat(rd[2])})
	}
	return json.Marshal(j)
}

func (f *Figure) UnmarshalJSON(b []byte) error {
	j := figureJSON{figureFields: (*figureFields)(f)}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	f.Kubeindex, f.Comparison, f.Ratio = float64(j.Kubeindex), float64(j.Comparison), float64(j.Ratio)
	f.Rounds = nil
	for _, rd := range j.Rounds {
		f.Rounds = append(f.Rounds, [3]float64{float64(rd[0]), float64(rd[1]), float64(rd[2])})
	}
	return nil
}
