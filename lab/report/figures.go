package report

import (
	"fmt"
	"image/color"
	"math"
	"regexp"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/mcpguard/mcpguard/lab/eval"
)

// Formats are the figure formats written by default.
var defaultFormats = []string{"png", "svg", "pdf"}

// DefaultFormats returns the figure formats written when none are asked for.
func DefaultFormats() []string { return slices.Clone(defaultFormats) }

// series is one set of bars in a grouped bar chart; Lo and Hi (optional)
// are the ends of each bar's confidence interval.
type series struct {
	name         string
	vals, lo, hi []float64
}

// groupedBars draws one group of bars per group name, one bar per series,
// with interval whiskers where the series has them, and returns the plot
// and its legend (drawn beside the plot by withLegend, never over bars).
func groupedBars(title, ylabel string, groups []string, ss []series) (*plot.Plot, plot.Legend, error) {
	leg := newLegend()
	if len(groups) == 0 || len(ss) == 0 {
		return nil, leg, fmt.Errorf("%s: %w", title, ErrNoResults)
	}
	p := newPlot(title, "", ylabel)
	p.Y.Min = 0
	k := float64(len(ss))
	// Bars fill 80% of each group's slot; widths are in canvas units, so
	// they are derived from the plot's width and the group count.
	w := slotWidth(len(groups)) * 0.8 / vg.Length(k)
	top := 0.0
	for j, s := range ss {
		bars, err := plotter.NewBarChart(plotter.Values(s.vals), w)
		if err != nil {
			return nil, leg, fmt.Errorf("bars %s: %w", s.name, err)
		}
		bars.Color = palette[j%len(palette)]
		bars.LineStyle.Width = 0
		shift := (float64(j) - (k-1)/2) * 0.8 / k
		bars.XMin = shift
		p.Add(bars)
		leg.Add(s.name, bars)
		for i, v := range s.vals {
			top = max(top, v)
			if s.hi != nil {
				top = max(top, s.hi[i])
			}
		}
		if s.lo != nil {
			xs := make([]float64, len(s.vals))
			for i := range xs {
				xs[i] = float64(i) + shift
			}
			yb, err := whiskers(xs, s.vals, s.lo, s.hi, color.Black)
			if err != nil {
				return nil, leg, fmt.Errorf("error bars %s: %w", s.name, err)
			}
			if yb != nil {
				p.Add(yb)
			}
		}
	}
	if err := labelZeros(p, ss); err != nil {
		return nil, leg, fmt.Errorf("%s: %w", title, err)
	}
	p.NominalX(groups...)
	p.X.Min, p.X.Max = -0.5, float64(len(groups))-0.5
	p.Y.Max = top * 1.05
	if long := slices.ContainsFunc(groups, func(g string) bool { return len(g) > 9 }); long && len(groups) > 4 {
		// Long names side by side would run into each other.
		p.X.Tick.Label.Rotation = math.Pi / 2
		p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	}
	return p, leg, nil
}

// labelZeros writes a 0 where a bar of ss has no height: a rate of zero
// is a result, and an empty slot would look like a missing one.
func labelZeros(p *plot.Plot, ss []series) error {
	k := float64(len(ss))
	var ls plotter.XYLabels
	var colours []color.Color
	for j, s := range ss {
		shift := (float64(j) - (k-1)/2) * 0.8 / k
		for i, v := range s.vals {
			if v == 0 {
				ls.XYs = append(ls.XYs, plotter.XY{X: float64(i) + shift, Y: 0})
				ls.Labels = append(ls.Labels, "0")
				colours = append(colours, palette[j%len(palette)])
			}
		}
	}
	if len(ls.XYs) == 0 {
		return nil
	}
	labels, err := plotter.NewLabels(ls)
	if err != nil {
		return err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].Font.Size = 5
		labels.TextStyle[i].Color = colours[i]
		labels.TextStyle[i].XAlign = draw.XCenter
		labels.TextStyle[i].YAlign = draw.YBottom
	}
	labels.Offset = vg.Point{Y: 1}
	p.Add(labels)
	return nil
}

// AgentPhases are the BenchmarkAgent metrics of the CVM dashboard, in
// pipeline order.
var agentPhases = []string{"planning-ns", "tool-ns", "ttft-ns", "decode-ns", "tpot-ns"}

// AgentPhases returns the phase metrics compared between environments.
func AgentPhases() []string { return slices.Clone(agentPhases) }

// PhaseRow is one phase of one benchmark in two environments.
type PhaseRow struct {
	Bench, Phase string
	Std, CVM     Summary
	OverheadPct  float64
	P            float64
	Significant  bool
}

// CVMRows compares the agent phases of two environments, for the
// benchmarks whose names match filter (all when nil).
func CVMRows(std, cvm *Bench, filter *regexp.Regexp) []PhaseRow {
	rows := Compare(std, cvm, func(k Key) bool {
		return slices.Contains(agentPhases, k.Unit) && (filter == nil || filter.MatchString(k.Name))
	})
	// Pipeline order within each benchmark, benchmarks in file order.
	first := map[string]int{}
	for i, r := range rows {
		if _, ok := first[r.Name]; !ok {
			first[r.Name] = i
		}
	}
	slices.SortStableFunc(rows, func(a, b Row) int {
		if d := first[a.Name] - first[b.Name]; d != 0 {
			return d
		}
		return slices.Index(agentPhases, a.Unit) - slices.Index(agentPhases, b.Unit)
	})
	out := make([]PhaseRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, PhaseRow{Bench: r.Name, Phase: r.Unit, Std: r.Base, CVM: r.New, OverheadPct: r.DeltaPct, P: r.P, Significant: r.Significant})
	}
	return out
}

// SecurityFigures draws APR, V-APR and FPR per config (table 1 as a
// chart) and the blocked share per attack category.
func SecurityFigures(reps []*eval.Report, sample, dir string, formats []string) ([]string, error) {
	reps = SortReports(reps)
	if len(reps) == 0 {
		return nil, fmt.Errorf("security figures: %w (every config was skipped)", ErrNoReports)
	}
	var names []string
	apr, vapr, fpr := series{name: "APR"}, series{name: "V-APR"}, series{name: "FPR"}
	for _, r := range reps {
		names = append(names, Label(r, reps))
		apr.vals = append(apr.vals, 100*r.Summary.APR())
		vapr.vals = append(vapr.vals, 100*r.Summary.VAPR())
		fpr.vals = append(fpr.vals, 100*r.Summary.FPR())
	}
	p, leg, err := groupedBars(sampleTitle("Attack prevention and false positives", sample), "% of cases", names, []series{apr, vapr, fpr})
	if err != nil {
		return nil, err
	}
	p.Y.Max = 100
	p.X.Tick.Label.Font.Size = 5.5
	files, err := withLegend(p, leg, dir, "security", formats, 2.4*vg.Inch, 0.18)
	if err != nil {
		return nil, err
	}
	cats := categories(reps)
	var ss []series
	for _, r := range reps {
		s := series{name: Label(r, reps)}
		for _, c := range cats {
			s.vals = append(s.vals, 100*r.Summary.PerCategory[c].Rate())
		}
		ss = append(ss, s)
	}
	p, leg, err = groupedBars(sampleTitle("Attacks blocked per category", sample), "% blocked", cats, ss)
	if err != nil {
		return nil, err
	}
	p.Y.Max = 100
	p.X.Tick.Label.Font.Size = 5.5
	for i := range cats {
		cats[i] = strings.ReplaceAll(cats[i], "_", "\n")
	}
	p.NominalX(cats...)
	more, err := withLegend(p, leg, dir, "security-categories", formats, 2.6*vg.Inch, 0.25)
	return append(files, more...), err
}

func categories(reps []*eval.Report) []string {
	var cats []string
	for _, r := range reps {
		for c := range r.Summary.PerCategory {
			if c != "benign" && !slices.Contains(cats, c) {
				cats = append(cats, c)
			}
		}
	}
	slices.Sort(cats)
	return cats
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func slug(s string) string {
	return strings.Trim(unsafeChars.ReplaceAllString(s, "_"), "_")
}
