package report

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/mcpguard/mcpguard/eval"
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

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0x94, 0x67, 0xbd, 0xff},
	color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff},
	color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
}

const (
	figW = 8 * vg.Inch
	figH = 4.5 * vg.Inch
)

// groupedBars draws one group of bars per group name, one bar per series,
// with interval whiskers where the series has them.
func groupedBars(title, ylabel string, groups []string, ss []series) (*plot.Plot, error) {
	if len(groups) == 0 || len(ss) == 0 {
		return nil, fmt.Errorf("%s: %w", title, ErrNoResults)
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	p.Legend.Top = true
	k := float64(len(ss))
	// Bars fill 80% of each group's slot; widths are in canvas units, so
	// they are derived from the figure's width and the group count.
	slot := (figW - 1.2*vg.Inch) / vg.Length(max(len(groups), 1))
	w := slot * 0.8 / vg.Length(k)
	for j, s := range ss {
		bars, err := plotter.NewBarChart(plotter.Values(s.vals), w)
		if err != nil {
			return nil, fmt.Errorf("bars %s: %w", s.name, err)
		}
		bars.Color = palette[j%len(palette)]
		bars.LineStyle.Width = 0
		shift := (float64(j) - (k-1)/2) * 0.8 / k
		bars.XMin = shift
		p.Add(bars)
		p.Legend.Add(s.name, bars)
		if s.lo != nil && !slices.Equal(s.lo, s.hi) {
			eb := errBars{}
			for i, v := range s.vals {
				eb.xys = append(eb.xys, plotter.XY{X: float64(i) + shift, Y: v})
				eb.errs = append(eb.errs, struct{ Low, High float64 }{v - s.lo[i], s.hi[i] - v})
			}
			yb, err := plotter.NewYErrorBars(eb)
			if err != nil {
				return nil, fmt.Errorf("error bars %s: %w", s.name, err)
			}
			yb.Color = color.Black
			p.Add(yb)
		}
	}
	p.NominalX(groups...)
	p.X.Min, p.X.Max = -0.5, float64(len(groups))-0.5
	// Headroom above the tallest bar (or whisker) for the legend.
	top := 0.0
	for _, s := range ss {
		for i, v := range s.vals {
			top = max(top, v)
			if s.hi != nil {
				top = max(top, s.hi[i])
			}
		}
	}
	p.Y.Max = top * 1.3
	return p, nil
}

type errBars struct {
	xys  plotter.XYs
	errs plotter.Errors
}

func (e errBars) Len() int                        { return len(e.xys) }
func (e errBars) XY(i int) (float64, float64)     { return e.xys[i].X, e.xys[i].Y }
func (e errBars) YError(i int) (float64, float64) { return e.errs[i].Low, e.errs[i].High }

// save writes p as dir/base.<format> for each format and returns the paths.
func save(p *plot.Plot, dir, base string, formats []string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("save figure: %w", err)
	}
	var out []string
	for _, f := range formats {
		path := filepath.Join(dir, base+"."+f)
		if err := p.Save(figW, figH, path); err != nil {
			return nil, fmt.Errorf("save %s: %w", path, err)
		}
		out = append(out, path)
	}
	return out, nil
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

// CVMFigures draws, for each benchmark, the phase medians of the standard
// and the confidential environment with their 95% intervals, the overhead
// in percent under each phase.
func CVMFigures(rows []PhaseRow, stdLabel, cvmLabel, dir string, formats []string) ([]string, error) {
	var names []string
	by := map[string][]PhaseRow{}
	for _, r := range rows {
		if _, ok := by[r.Bench]; !ok {
			names = append(names, r.Bench)
		}
		by[r.Bench] = append(by[r.Bench], r)
	}
	var files []string
	for _, name := range names {
		rs := by[name]
		std := series{name: stdLabel}
		cvm := series{name: cvmLabel}
		var groups []string
		for _, r := range rs {
			groups = append(groups, fmt.Sprintf("%s\n%+.1f%%", strings.TrimSuffix(r.Phase, "-ns"), r.OverheadPct))
			std.vals, std.lo, std.hi = append(std.vals, r.Std.Center/1e6), append(std.lo, r.Std.Lo/1e6), append(std.hi, r.Std.Hi/1e6)
			cvm.vals, cvm.lo, cvm.hi = append(cvm.vals, r.CVM.Center/1e6), append(cvm.lo, r.CVM.Lo/1e6), append(cvm.hi, r.CVM.Hi/1e6)
		}
		p, err := groupedBars(name+": "+stdLabel+" vs "+cvmLabel, "median ms (95% CI)", groups, []series{std, cvm})
		if err != nil {
			return nil, err
		}
		f, err := save(p, dir, "cvm-"+slug(name), formats)
		if err != nil {
			return nil, err
		}
		files = append(files, f...)
	}
	return files, nil
}

// FirewallRow is what one firewall variant adds per agent iteration.
type FirewallRow struct {
	Size, Firewall string
	Added          Summary // fw-ns: time spent in the firewall per iteration
	Pct            Summary // fw-pct: its share of the iteration
	Scanners       map[string]Summary
}

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
			rows = append(rows, FirewallRow{Size: pp["size"], Firewall: pp["fw"], Scanners: map[string]Summary{}})
		}
		s := Summarize(b.Samples[k])
		switch {
		case k.Unit == "fw-ns":
			rows[i].Added = s
		case k.Unit == "fw-pct":
			rows[i].Pct = s
		case strings.HasSuffix(k.Unit, "-ns") && !slices.Contains(agentPhases, k.Unit) && k.Unit != "sec/op":
			rows[i].Scanners[strings.TrimSuffix(k.Unit, "-ns")] = s
		}
	}
	return rows
}

// FirewallFigures draws what each firewall variant adds to one agent
// iteration, by tool-output size (figure 3), and the per-scanner time of the
// variant that runs them all (figure 4).
func FirewallFigures(rows []FirewallRow, dir string, formats []string) ([]string, error) {
	var sizes, fws []string
	for _, r := range rows {
		if !slices.Contains(sizes, r.Size) {
			sizes = append(sizes, r.Size)
		}
		if !slices.Contains(fws, r.Firewall) {
			fws = append(fws, r.Firewall)
		}
	}
	find := func(size, fw string) (FirewallRow, bool) {
		for _, r := range rows {
			if r.Size == size && r.Firewall == fw {
				return r, true
			}
		}
		return FirewallRow{}, false
	}
	var ss []series
	for _, size := range sizes {
		s := series{name: "output " + size}
		for _, fw := range fws {
			r, _ := find(size, fw)
			s.vals, s.lo, s.hi = append(s.vals, r.Added.Center/1e6), append(s.lo, r.Added.Lo/1e6), append(s.hi, r.Added.Hi/1e6)
		}
		ss = append(ss, s)
	}
	p, err := groupedBars("Firewall time per agent iteration", "median ms (95% CI)", fws, ss)
	if err != nil {
		return nil, err
	}
	files, err := save(p, dir, "firewall-added", formats)
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
	ss = ss[:0]
	for _, size := range sizes {
		s := series{name: "output " + size}
		var best FirewallRow
		for _, r := range rows {
			if r.Size == size && len(r.Scanners) > len(best.Scanners) {
				best = r
			}
		}
		for _, sc := range scanners {
			v := best.Scanners[sc]
			s.vals, s.lo, s.hi = append(s.vals, v.Center/1e6), append(s.lo, v.Lo/1e6), append(s.hi, v.Hi/1e6)
		}
		ss = append(ss, s)
	}
	p, err = groupedBars("Time per scanner, all scanners on", "median ms (95% CI)", scanners, ss)
	if err != nil {
		return nil, err
	}
	more, err := save(p, dir, "firewall-scanners", formats)
	return append(files, more...), err
}

// SecurityFigures draws APR, V-APR and FPR per config (table 1 as a
// chart) and the blocked share per attack category.
func SecurityFigures(reps []*eval.Report, dir string, formats []string) ([]string, error) {
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
	p, err := groupedBars("Attack prevention and false positives per config", "%", names, []series{apr, vapr, fpr})
	if err != nil {
		return nil, err
	}
	p.Y.Max = 130 // room for the legend above 100%
	files, err := save(p, dir, "security", formats)
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
	p, err = groupedBars("Attacks blocked per category", "% blocked", cats, ss)
	if err != nil {
		return nil, err
	}
	p.Y.Max = 130
	more, err := save(p, dir, "security-categories", formats)
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
func LatencyFigure(rows []LatencyRow, dir string, formats []string) ([]string, error) {
	var names []string
	p50, p95, p99 := series{name: "p50"}, series{name: "p95"}, series{name: "p99"}
	for _, r := range rows {
		names = append(names, r.Config)
		p50.vals = append(p50.vals, r.P50.Center/1e3)
		p95.vals = append(p95.vals, r.P95.Center/1e3)
		p99.vals = append(p99.vals, r.P99.Center/1e3)
	}
	p, err := groupedBars("Latency of a benign read_file per config", "µs (median of runs)", names, []series{p50, p95, p99})
	if err != nil {
		return nil, err
	}
	return save(p, dir, "latency", formats)
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func slug(s string) string {
	return strings.Trim(unsafeChars.ReplaceAllString(s, "_"), "_")
}
