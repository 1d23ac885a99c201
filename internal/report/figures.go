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

	"github.com/mcpguard/mcpguard/internal/eval"
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

// FirewallRow is what one firewall variant adds per agent iteration.
type FirewallRow struct {
	Size, Firewall string
	Added          Summary // fw-ns: time spent in the firewall per iteration
	Pct            Summary // fw-pct: its share of the iteration
	Scanners       map[string]Summary
	// Phases holds the iteration's parts (sharePhases) by unit.
	Phases map[string]Summary
}

// agentUnits are BenchmarkAgent's time metrics: every other …-ns unit of
// a BenchmarkFirewall row is a scanner's.
var agentUnits = []string{"planning-ns", "tool-ns", "ttft-ns", "decode-ns", "tpot-ns", "e2e-ns", "other-ns",
	"itl-p50-ns", "itl-p90-ns", "itl-p99-ns", "server-prefill-ns", "server-decode-ns", "fw-ns"}

var subPart = regexp.MustCompile(`([a-z]+)=([^/]+)`)

func parts(name string) map[string]string {
	m := map[string]string{}
	for _, p := range subPart.FindAllStringSubmatch(name, -1) {
		m[p[1]] = p[2]
	}
	return m
}

// FirewallRows reads BenchmarkFirewall's per-variant results.
func FirewallRows(b *Bench) []FirewallRow {
	var rows []FirewallRow
	idx := map[string]int{}
	for _, k := range b.Keys {
		if !strings.HasPrefix(k.Name, "Firewall/") {
			continue
		}
		pp := parts(k.Name)
		if pp["fw"] == "" {
			continue
		}
		i, ok := idx[k.Name]
		if !ok {
			i = len(rows)
			idx[k.Name] = i
			rows = append(rows, FirewallRow{Size: pp["size"], Firewall: pp["fw"], Scanners: map[string]Summary{}, Phases: map[string]Summary{}})
		}
		s := Summarize(b.Samples[k])
		switch {
		case k.Unit == "fw-ns":
			rows[i].Added = s
		case k.Unit == "fw-pct":
			rows[i].Pct = s
		case slices.Contains(sharePhases, k.Unit):
			rows[i].Phases[k.Unit] = s
		case strings.HasSuffix(k.Unit, "-ns") && !slices.Contains(agentUnits, k.Unit):
			rows[i].Scanners[strings.TrimSuffix(k.Unit, "-ns")] = s
		}
	}
	return rows
}

// FirewallFigures draws figure 3, the drill-down of an agent iteration
// with each firewall variant: its phases and the guardrail's time stacked,
// one panel per tool-output size; and figure 4, each scanner's time per
// iteration (all scanners on) on a log axis, by size.
func FirewallFigures(rows []FirewallRow, sample, dir string, formats []string) ([]string, error) {
	var sizes, fws []string
	for _, r := range rows {
		if !slices.Contains(sizes, r.Size) {
			sizes = append(sizes, r.Size)
		}
		if !slices.Contains(fws, r.Firewall) {
			fws = append(fws, r.Firewall)
		}
	}
	if len(sizes) == 0 {
		return nil, fmt.Errorf("firewall figures: %w", ErrNoResults)
	}
	find := func(size, fw string) (FirewallRow, bool) {
		for _, r := range rows {
			if r.Size == size && r.Firewall == fw {
				return r, true
			}
		}
		return FirewallRow{}, false
	}
	parts := append(slices.Clone(sharePhases), "firewall")
	leg := newLegend()
	var panels []*plot.Plot
	for si, size := range sizes {
		title := fmt.Sprintf("(%c) Iteration, output %s", 'a'+si, size)
		if si == 0 {
			title = sampleTitle(title, sample)
		}
		p := newPlot(title, "", "median ms, stacked")
		var below *plotter.BarChart
		w := slotWidth(len(fws)) * 0.7
		for _, part := range parts {
			vals := make(plotter.Values, len(fws))
			any := false
			for i, fw := range fws {
				r, ok := find(size, fw)
				if !ok {
					continue
				}
				if part == "firewall" {
					vals[i] = r.Added.Center / 1e6
				} else if sm, ok := r.Phases[part]; ok {
					vals[i] = sm.Center / 1e6
				}
				any = any || vals[i] > 0
			}
			if !any {
				continue
			}
			bars, err := stackBar(p, below, vals, w, phaseColors[part])
			if err != nil {
				return nil, fmt.Errorf("firewall bars: %w", err)
			}
			below = bars
			if si == 0 {
				name := phaseLabel(part)
				if part == "firewall" {
					name = "guardrails"
				}
				leg.Add(name, bars)
			}
		}
		labels := make([]string, len(fws))
		for i, fw := range fws {
			labels[i] = strings.NewReplacer("_", "\n", "promptguard", "prompt\nguard").Replace(fw)
		}
		p.NominalX(labels...)
		p.X.Tick.Label.Font.Size = 5.5
		p.Y.Min = 0
		panels = append(panels, p)
	}
	legFrac := 0.3
	h := vg.Length(len(panels)) * 2.3 * vg.Inch
	files, err := saveDrawing(dir, "firewall-added", formats, colW, h, func(c draw.Canvas) {
		n := float64(len(panels))
		for i, p := range panels {
			y1 := 1 - float64(i)/n
			p.Draw(region(c, 0, 1-legFrac, y1-1/n, y1))
		}
		leg.Draw(region(c, 1-legFrac+0.02, 1, 0, 0.97))
	})
	if err != nil {
		return nil, err
	}
	// Figure 4: the scanners inside the all-scanners variant.
	var scanners []string
	for _, r := range rows {
		for sc := range r.Scanners {
			if !slices.Contains(scanners, sc) {
				scanners = append(scanners, sc)
			}
		}
	}
	slices.Sort(scanners)
	if len(scanners) == 0 {
		return files, nil
	}
	p := newPlot(sampleTitle("Time per scanner per iteration, all on", sample), "", "")
	leg4 := newLegend()
	var all []msPoints
	withCI := false
	for i, size := range sizes {
		var best FirewallRow
		for _, r := range rows {
			if r.Size == size && len(r.Scanners) > len(best.Scanners) {
				best = r
			}
		}
		var m msPoints
		for j, sc := range scanners {
			v, ok := best.Scanners[sc]
			if !ok || v.Center <= 0 {
				continue
			}
			m.add(float64(j)-0.3+0.6*(float64(i)+0.5)/float64(len(sizes)), v)
			withCI = withCI || v.HasCI
		}
		if len(m.xs) == 0 {
			continue
		}
		th, err := m.draw(p, sizeColors[i%len(sizeColors)], draw.CircleGlyph{}, true)
		if err != nil {
			return nil, fmt.Errorf("scanner points: %w", err)
		}
		leg4.Add("output "+size, th)
		all = append(all, m)
	}
	p.Y.Label.Text = "median ms (log; whiskers: 95% CI)"
	if !withCI {
		p.Y.Label.Text = "median ms (log; n < 6: no CI)"
	}
	labels := make([]string, len(scanners))
	for i, sc := range scanners {
		labels[i] = strings.ReplaceAll(sc, "-", "\n")
	}
	p.NominalX(labels...)
	p.X.Min, p.X.Max = -0.5, float64(len(scanners))-0.5
	logMsAxis(p, all)
	more, err := withLegend(p, leg4, dir, "firewall-scanners", formats, 2.4*vg.Inch, 0.3)
	return append(files, more...), err
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

// LatencyRow is one config's latency for the benign call of BenchmarkGuard.
type LatencyRow struct {
	Config            string
	P50, P95, P99     Summary
	OverheadP50       Summary
	HasOverhead       bool
	OverC0P50         Summary
	HasOverC0         bool
	AllocsOp, BytesOp Summary
}

// LatencyRows reads BenchmarkGuard's sub-benchmarks (direct and one per config).
func LatencyRows(b *Bench) []LatencyRow {
	var rows []LatencyRow
	idx := map[string]int{}
	for _, k := range b.Keys {
		name, ok := strings.CutPrefix(k.Name, "Guard/")
		if !ok {
			continue
		}
		i, ok := idx[name]
		if !ok {
			i = len(rows)
			idx[name] = i
			rows = append(rows, LatencyRow{Config: name})
		}
		s := Summarize(b.Samples[k])
		switch k.Unit {
		case "p50-ns":
			rows[i].P50 = s
		case "p95-ns":
			rows[i].P95 = s
		case "p99-ns":
			rows[i].P99 = s
		case "overhead-p50-ns":
			rows[i].OverheadP50, rows[i].HasOverhead = s, true
		case "over-c0-p50-ns":
			rows[i].OverC0P50, rows[i].HasOverC0 = s, true
		case "allocs/op", "allocs/call":
			rows[i].AllocsOp = s
		case "B/op", "B/call":
			rows[i].BytesOp = s
		}
	}
	return rows
}

// LatencyFigure draws p50, p95 and p99 of the benign call per config.
func LatencyFigure(rows []LatencyRow, sample, dir string, formats []string) ([]string, error) {
	var names []string
	p50, p95, p99 := series{name: "p50"}, series{name: "p95"}, series{name: "p99"}
	for _, r := range rows {
		names = append(names, r.Config)
		p50.vals = append(p50.vals, r.P50.Center/1e3)
		p95.vals = append(p95.vals, r.P95.Center/1e3)
		p99.vals = append(p99.vals, r.P99.Center/1e3)
	}
	p, leg, err := groupedBars(sampleTitle("Latency of a benign read_file", sample), "µs (median of runs)", names, []series{p50, p95, p99})
	if err != nil {
		return nil, err
	}
	p.X.Tick.Label.Font.Size = 5.5
	return withLegend(p, leg, dir, "latency", formats, 2.4*vg.Inch, 0.15)
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func slug(s string) string {
	return strings.Trim(unsafeChars.ReplaceAllString(s, "_"), "_")
}
