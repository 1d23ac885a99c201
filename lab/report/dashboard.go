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
)

// sharePhases split an agent iteration (e2e-ns) into parts that add up to
// it: what BenchmarkAgent times (other-ns is what no phase covers). Files
// from before other-ns existed simply have no such part.
var sharePhases = []string{"planning-ns", "tool-ns", "ttft-ns", "decode-ns", "other-ns"}

// overheadPhases are the metrics whose CVM overhead the dashboard shows.
var overheadPhases = []string{"planning-ns", "tool-ns", "ttft-ns", "decode-ns", "tpot-ns", "e2e-ns"}

func phaseLabel(unit string) string {
	switch unit {
	case "ttft-ns":
		return "prefill"
	case "e2e-ns":
		return "iteration"
	}
	return strings.TrimSuffix(unit, "-ns")
}

// DashCell is one metric at one tool-output size in both environments.
type DashCell struct {
	Size, Unit string
	Std, CVM   Summary
	Judged
}

// Dashboard is figure 2's data for one guard config.
type Dashboard struct {
	Guard string
	Sizes []string
	Cells []DashCell
}

// Cell returns the cell of size and unit.
func (d *Dashboard) Cell(size, unit string) (DashCell, bool) {
	for _, c := range d.Cells {
		if c.Size == size && c.Unit == unit {
			return c, true
		}
	}
	return DashCell{}, false
}

// Dashboards groups the agent benchmarks of two environments by guard
// config, with significance corrected (Benjamini-Hochberg) over each
// dashboard's overhead tests, as the gate does.
func Dashboards(std, cvm *Bench, filter *regexp.Regexp) []Dashboard {
	units := append(slices.Clone(sharePhases), overheadPhases...)
	rows := Compare(std, cvm, func(k Key) bool {
		return strings.HasPrefix(k.Name, "Agent/") && slices.Contains(units, k.Unit) && (filter == nil || filter.MatchString(k.Name))
	})
	var out []Dashboard
	byGuard := map[string]int{}
	for _, r := range rows {
		pp := parts(r.Name)
		g := pp["guard"]
		i, ok := byGuard[g]
		if !ok {
			i = len(out)
			byGuard[g] = i
			out = append(out, Dashboard{Guard: g})
		}
		d := &out[i]
		if !slices.Contains(d.Sizes, pp["size"]) {
			d.Sizes = append(d.Sizes, pp["size"])
		}
		d.Cells = append(d.Cells, DashCell{Size: pp["size"], Unit: r.Unit, Std: r.Base, CVM: r.New, Judged: Judged{Row: r}})
	}
	for i := range out {
		d := &out[i]
		var idx []int
		var tested []Row
		for j, c := range d.Cells {
			if slices.Contains(overheadPhases, c.Unit) {
				idx = append(idx, j)
				tested = append(tested, c.Row)
			}
		}
		judged, _ := Judge(tested, GateOptions{})
		for k, j := range idx {
			d.Cells[j].Judged = judged[k]
		}
	}
	return out
}

// DashboardFigure draws figure 2 for one guard config: (a) each phase's
// share of an iteration, standard vs CVM, by tool-output size, stacked;
// (b) the phases' medians on a log axis, so that a 1 ms tool call and a
// 1 s prefill are both visible; (c) the CVM's overhead per phase with
// intervals, on a log-ratio axis, significant changes (Benjamini-Hochberg
// q < 0.05) filled and labelled, the rest hollow and grey.
func DashboardFigure(d Dashboard, stdLabel, cvmLabel, sample, dir string, formats []string) ([]string, error) {
	if len(d.Sizes) == 0 {
		return nil, fmt.Errorf("dashboard: %w", ErrNoResults)
	}
	guard := ""
	if d.Guard != "" {
		guard = ", guard " + d.Guard
	}
	pa, legA, err := dashShares(d, stdLabel, cvmLabel, sampleTitle("(a) Share of an iteration"+guard, sample))
	if err != nil {
		return nil, err
	}
	pb, legB, err := dashMedians(d, stdLabel, cvmLabel)
	if err != nil {
		return nil, err
	}
	pc, legC, err := dashOverhead(d, stdLabel, cvmLabel)
	if err != nil {
		return nil, err
	}
	h := 7.2 * vg.Inch
	legFrac := 0.3
	return saveDrawing(dir, "cvm-dashboard"+guardSlug(d.Guard), formats, colW, h, func(c draw.Canvas) {
		pa.Draw(region(c, 0, 1-legFrac, 0.67, 1))
		legA.Draw(region(c, 1-legFrac+0.02, 1, 0.67, 0.95))
		pb.Draw(region(c, 0, 1-legFrac, 0.34, 0.66))
		legB.Draw(region(c, 1-legFrac+0.02, 1, 0.34, 0.63))
		pc.Draw(region(c, 0, 1-legFrac, 0, 0.33))
		legC.Draw(region(c, 1-legFrac+0.02, 1, 0, 0.30))
	})
}

// dashSpan is the width of the slot each phase's points share.
const dashSpan = 0.7

// dashShares is panel (a): each phase's share of an iteration, a stacked
// bar per size and environment.
func dashShares(d Dashboard, stdLabel, cvmLabel, title string) (*plot.Plot, plot.Legend, error) {
	pa := newPlot(title, "", "% of iteration (medians)")
	var labels []string
	for _, s := range d.Sizes {
		labels = append(labels, s+" "+stdLabel, s+" "+cvmLabel)
	}
	leg := newLegend()
	var below *plotter.BarChart
	w := colW * 0.62 / vg.Length(len(labels)) * 0.75
	for _, ph := range sharePhases {
		vals := make(plotter.Values, len(labels))
		any := false
		for i, s := range d.Sizes {
			for e := 0; e < 2; e++ {
				total := 0.0
				for _, q := range sharePhases {
					if c, ok := d.Cell(s, q); ok {
						total += pick(c, e).Center
					}
				}
				if c, ok := d.Cell(s, ph); ok && total > 0 {
					vals[2*i+e] = 100 * pick(c, e).Center / total
					any = true
				}
			}
		}
		if !any {
			continue
		}
		bars, err := stackBar(pa, below, vals, w, phaseColors[ph])
		if err != nil {
			return nil, leg, fmt.Errorf("dashboard shares: %w", err)
		}
		below = bars
		leg.Add(phaseLabel(ph), bars)
	}
	pa.NominalX(labels...)
	pa.Y.Min, pa.Y.Max = 0, 100
	pa.X.Tick.Label.Font.Size = 6
	pa.X.Tick.Label.Rotation = math.Pi / 2
	pa.X.Tick.Label.XAlign, pa.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	return pa, leg, nil
}

// dashMedians is panel (b): the phases' medians per size and environment
// on a log axis.
func dashMedians(d Dashboard, stdLabel, cvmLabel string) (*plot.Plot, plot.Legend, error) {
	pb := newPlot("(b) Median per phase", "", "ms (log)")
	phases := []string{"planning-ns", "tool-ns", "ttft-ns", "decode-ns", "tpot-ns"}
	var phLabels []string
	for _, ph := range phases {
		phLabels = append(phLabels, phaseLabel(ph))
	}
	leg := newLegend()
	var all []msPoints
	n := float64(2 * len(d.Sizes))
	for i, s := range d.Sizes {
		for e := 0; e < 2; e++ {
			var m msPoints
			for pi, ph := range phases {
				c, ok := d.Cell(s, ph)
				if !ok || pick(c, e).Center <= 0 {
					continue
				}
				m.add(float64(pi)-dashSpan/2+dashSpan*(float64(2*i+e)+0.5)/n, pick(c, e))
			}
			if len(m.xs) == 0 {
				continue
			}
			th, err := m.draw(pb, sizeColors[i%len(sizeColors)], draw.RingGlyph{}, e == 1)
			if err != nil {
				return nil, leg, fmt.Errorf("dashboard medians: %w", err)
			}
			all = append(all, m)
			leg.Add(fmt.Sprintf("%s %s", s, envName(e, stdLabel, cvmLabel)), th)
		}
	}
	pb.NominalX(phLabels...)
	pb.X.Min, pb.X.Max = -0.5, float64(len(phases))-0.5
	logMsAxis(pb, all)
	return pb, leg, nil
}

// ratioPoints are the overhead ratios of one size, split into the
// significant ones (filled, labelled) and the rest.
type ratioPoints struct {
	sig, rest diffPoints
	labels    plotter.XYLabels
}

// dashOverhead is panel (c): the CVM's overhead per phase on a log-ratio
// axis, significant changes filled and labelled.
func dashOverhead(d Dashboard, stdLabel, cvmLabel string) (*plot.Plot, plot.Legend, error) {
	pc := newPlot("(c) Overhead "+cvmLabel+" vs "+stdLabel, "", "change of median")
	pc.Y.Scale = plot.LogScale{}
	pc.Y.Tick.Marker = ratioTicks{}
	var ovLabels []string
	for _, ph := range overheadPhases {
		ovLabels = append(ovLabels, phaseLabel(ph))
	}
	rlo, rhi := 0.8, 1.25
	var sigLabels plotter.XYLabels
	leg := newLegend()
	for i, s := range d.Sizes {
		rp := dashRatios(d, i, s)
		for _, pts := range []diffPoints{rp.sig, rp.rest} {
			for k := range pts.ys {
				rlo, rhi = min(rlo, pts.lo[k], pts.ys[k]), max(rhi, pts.hi[k], pts.ys[k])
			}
		}
		sigLabels.XYs = append(sigLabels.XYs, rp.labels.XYs...)
		sigLabels.Labels = append(sigLabels.Labels, rp.labels.Labels...)
		col := sizeColors[i%len(sizeColors)]
		if len(rp.sig.xs) > 0 {
			ps, th, err := points(rp.sig.xs, rp.sig.ys, rp.sig.lo, rp.sig.hi, col, draw.CircleGlyph{}, true)
			if err != nil {
				return nil, leg, fmt.Errorf("dashboard overhead: %w", err)
			}
			pc.Add(ps...)
			leg.Add(s+", q < 0.05", th)
		}
		if len(rp.rest.xs) > 0 {
			ps, _, err := points(rp.rest.xs, rp.rest.ys, rp.rest.lo, rp.rest.hi, mute(col), draw.RingGlyph{}, false)
			if err != nil {
				return nil, leg, fmt.Errorf("dashboard overhead: %w", err)
			}
			pc.Add(ps...)
		}
	}
	grey := color.Gray{Y: 0x90}
	_, thNS, _ := points([]float64{0}, []float64{1}, nil, nil, grey, draw.RingGlyph{}, false)
	leg.Add("hollow: q ≥ 0.05", thNS)
	one := plotter.NewFunction(func(float64) float64 { return 1 })
	one.Color, one.Width = color.Gray{Y: 0x60}, 0.5
	pc.Add(one)
	if len(sigLabels.XYs) > 0 {
		ls, err := plotter.NewLabels(sigLabels)
		if err == nil {
			for i := range ls.TextStyle {
				ls.TextStyle[i].Font.Size = 5.5
				ls.TextStyle[i].XAlign = -0.5
				ls.Offset = vg.Point{X: 3}
			}
			pc.Add(ls)
		}
	}
	pc.NominalX(ovLabels...)
	pc.X.Min, pc.X.Max = -0.5, float64(len(overheadPhases))-0.5
	pc.Y.Min, pc.Y.Max = rlo/1.15, rhi*1.15
	ciNote := "whiskers: 95% CI (n ≥ 6 a side)"
	if !anyCI(d) {
		ciNote = "no 95% CI: fewer than 6 runs"
	}
	pc.X.Label.Text = ciNote + "; labels: q < 0.05 (BH)"
	pc.X.Label.TextStyle.Font.Size = 6
	return pc, leg, nil
}

// dashRatios is one size's (the i-th) CVM/standard ratios per phase, with
// a conservative interval: the extremes of the two medians' intervals.
func dashRatios(d Dashboard, i int, size string) ratioPoints {
	var rp ratioPoints
	nS := float64(len(d.Sizes))
	for pi, ph := range overheadPhases {
		c, ok := d.Cell(size, ph)
		if !ok || c.Std.Center <= 0 || c.CVM.Center <= 0 {
			continue
		}
		x := float64(pi) - dashSpan/2 + dashSpan*(float64(i)+0.5)/nS
		r := c.CVM.Center / c.Std.Center
		l, h := r, r
		if c.Std.HasCI && c.CVM.HasCI && c.Std.Lo > 0 {
			l, h = c.CVM.Lo/c.Std.Hi, c.CVM.Hi/c.Std.Lo
		}
		pts := &rp.rest
		if c.Changed {
			pts = &rp.sig
			rp.labels.XYs = append(rp.labels.XYs, plotter.XY{X: x, Y: r})
			rp.labels.Labels = append(rp.labels.Labels, fmt.Sprintf("%+.0f%%", (r-1)*100))
		}
		pts.xs, pts.ys, pts.lo, pts.hi = append(pts.xs, x), append(pts.ys, r), append(pts.lo, l), append(pts.hi, h)
	}
	return rp
}

func guardSlug(g string) string {
	if g == "" {
		return ""
	}
	return "-" + slug(g)
}

func pick(c DashCell, env int) Summary {
	if env == 0 {
		return c.Std
	}
	return c.CVM
}

func envName(env int, std, cvm string) string {
	if env == 0 {
		return std
	}
	return cvm
}

func anyCI(d Dashboard) bool {
	for _, c := range d.Cells {
		if c.Std.HasCI && c.CVM.HasCI {
			return true
		}
	}
	return false
}

// mute returns c blended halfway to light grey: for changes that are not
// significant.
func mute(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	m := func(v uint32) uint8 { return uint8((v>>8)/3 + 0xb0*2/3) }
	return color.RGBA{m(r), m(g), m(b), 0xff}
}
