package report

import (
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

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

// LatencyFigure draws what each config adds to the benign call: the
// median over runs of each run's paired difference (the median of
// per-round differences) against the direct call, and against C0, with
// its 95% interval. Differences, not each row's own percentiles: the
// rows' own latencies move together with the machine, and noise would
// decide their order.
func LatencyFigure(rows []LatencyRow, sample, dir string, formats []string) ([]string, error) {
	var names []string
	var direct, c0 diffPoints
	for _, r := range rows {
		if !r.HasOverhead {
			continue // the direct row itself
		}
		x := float64(len(names))
		names = append(names, r.Config)
		direct.add(x-0.14, r.OverheadP50)
		if r.HasOverC0 {
			c0.add(x+0.14, r.OverC0P50)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("latency figure: %w (no row with overhead-p50-ns)", ErrNoResults)
	}
	p := newPlot(sampleTitle("Latency added to a benign read_file", sample), "", "µs added (paired, median of runs)")
	zero := plotter.NewFunction(func(float64) float64 { return 0 })
	zero.Color, zero.Width = color.Gray{Y: 0x60}, 0.5
	p.Add(zero)
	leg := newLegend()
	for i, s := range []struct {
		pts   diffPoints
		name  string
		shape draw.GlyphDrawer
	}{{direct, "over direct", draw.CircleGlyph{}}, {c0, "over C0", draw.TriangleGlyph{}}} {
		if len(s.pts.xs) == 0 {
			continue
		}
		th, err := s.pts.draw(p, palette[i], s.shape)
		if err != nil {
			return nil, fmt.Errorf("latency figure: %w", err)
		}
		leg.Add(s.name, th)
	}
	lo, hi := min(0, direct.min(), c0.min()), max(0, direct.max(), c0.max())
	pad := (hi - lo) * 0.12
	p.Y.Min, p.Y.Max = lo-pad, hi+pad
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	p.X.Tick.Label.Font.Size = 5.5
	if len(names) > 4 {
		p.X.Tick.Label.Rotation = math.Pi / 6
		p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YTop
	}
	p.X.Label.Text = "whiskers: 95% CI over runs"
	if !direct.withCI {
		p.X.Label.Text = "no 95% CI: fewer than 6 runs"
	}
	p.X.Label.TextStyle.Font.Size = 6
	return withLegend(p, leg, dir, "latency", formats, 2.4*vg.Inch, 0.2)
}

// diffPoints are paired differences in µs with their intervals, each
// labelled with its value.
type diffPoints struct {
	xs, ys, lo, hi []float64
	withCI         bool
}

func (d *diffPoints) add(x float64, s Summary) {
	d.xs = append(d.xs, x)
	d.ys = append(d.ys, s.Center/1e3)
	d.lo = append(d.lo, s.Lo/1e3)
	d.hi = append(d.hi, s.Hi/1e3)
	d.withCI = d.withCI || s.HasCI
}

func (d *diffPoints) min() float64 {
	m := math.Inf(1)
	for i := range d.ys {
		m = min(m, d.lo[i], d.ys[i])
	}
	return m
}

func (d *diffPoints) max() float64 {
	m := math.Inf(-1)
	for i := range d.ys {
		m = max(m, d.hi[i], d.ys[i])
	}
	return m
}

// draw adds the points, their whiskers and their value labels to p.
func (d *diffPoints) draw(p *plot.Plot, c color.Color, shape draw.GlyphDrawer) (plot.Thumbnailer, error) {
	ps, th, err := points(d.xs, d.ys, d.lo, d.hi, c, shape, true)
	if err != nil {
		return nil, err
	}
	p.Add(ps...)
	var ls plotter.XYLabels
	for i := range d.xs {
		ls.XYs = append(ls.XYs, plotter.XY{X: d.xs[i], Y: d.ys[i]})
		ls.Labels = append(ls.Labels, fmt.Sprintf("%+.0f", d.ys[i]))
	}
	labels, err := plotter.NewLabels(ls)
	if err != nil {
		return nil, err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].Font.Size = 5
		labels.TextStyle[i].Color = c
		labels.TextStyle[i].YAlign = draw.YCenter
	}
	labels.Offset = vg.Point{X: 3}
	p.Add(labels)
	return th, nil
}
