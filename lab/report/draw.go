package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Figures are drawn for a paper's column: 3.5 in wide, 7-9 pt text, so
// they are legible printed at that size. PNGs are rendered at 200 dpi.
const (
	colW   = 3.5 * vg.Inch
	pngDPI = 200
)

// Font sizes at column width.
const (
	titleSize  = 8.5
	labelSize  = 7.5
	tickSize   = 6.5
	legendSize = 6.5
)

// newPlot returns a plot with the column-width font sizes.
func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = titleSize
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = labelSize
		a.Tick.Label.Font.Size = tickSize
		a.Padding = 2
	}
	p.Legend.TextStyle.Font.Size = legendSize
	return p
}

// newLegend returns a legend with the column-width font.
func newLegend() plot.Legend {
	l := plot.NewLegend()
	l.TextStyle.Font.Size = legendSize
	l.Top, l.Left = true, true
	l.ThumbnailWidth = 0.18 * vg.Inch
	return l
}

// region is the part of c between the fractions x0..x1 of its width and
// y0..y1 of its height (y from the bottom).
func region(c draw.Canvas, x0, x1, y0, y1 float64) draw.Canvas {
	w, h := c.Max.X-c.Min.X, c.Max.Y-c.Min.Y
	return draw.Crop(c, vg.Length(x0)*w, -vg.Length(1-x1)*w, vg.Length(y0)*h, -vg.Length(1-y1)*h)
}

// newCanvas returns a canvas of the format; PNGs at pngDPI.
func newCanvas(format string, w, h vg.Length) (vg.CanvasWriterTo, error) {
	if format == "png" {
		return vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(pngDPI))}, nil
	}
	return draw.NewFormattedCanvas(w, h, format)
}

// saveDrawing draws a figure of w x h with drawFn into dir/base.<format>
// for each format and returns the paths.
func saveDrawing(dir, base string, formats []string, w, h vg.Length, drawFn func(c draw.Canvas)) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("save figure: %w", err)
	}
	var out []string
	for _, f := range formats {
		path := filepath.Join(dir, base+"."+f)
		c, err := newCanvas(f, w, h)
		if err != nil {
			return nil, fmt.Errorf("save %s: %w", path, err)
		}
		drawFn(draw.New(c))
		file, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("save %s: %w", path, err)
		}
		_, err = c.WriteTo(file)
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("save %s: %w", path, err)
		}
		out = append(out, path)
	}
	return out, nil
}

// withLegend saves p with its legend in a column to the right of the plot
// area, so that no entry covers a bar.
func withLegend(p *plot.Plot, l plot.Legend, dir, base string, formats []string, h vg.Length, legendFrac float64) ([]string, error) {
	return saveDrawing(dir, base, formats, colW, h, func(c draw.Canvas) {
		p.Draw(region(c, 0, 1-legendFrac, 0, 1))
		l.Draw(region(c, 1-legendFrac+0.01, 1, 0, 0.92))
	})
}

// ratioTicks label a log-scaled axis of ratios (new/base) as percent
// changes: 0.5 is -50%, 2 is +100%.
type ratioTicks struct{}

func (ratioTicks) Ticks(lo, hi float64) []plot.Tick {
	cands := []float64{0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2}
	switch r := hi / lo; {
	case r > 50:
		cands = []float64{0.01, 0.1, 0.5, 1, 2, 10, 100}
	case r > 6:
		cands = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32}
	case r > 2.5:
		cands = []float64{0.25, 0.5, 0.8, 1, 1.25, 2, 4}
	}
	var ts []plot.Tick
	for _, v := range cands {
		if v < lo || v > hi {
			continue
		}
		label := "0"
		if v != 1 {
			label = fmt.Sprintf("%+.0f%%", (v-1)*100)
		}
		ts = append(ts, plot.Tick{Value: v, Label: label})
	}
	return ts
}

// logMsTicks label a log axis in milliseconds at 1-2-5 steps.
type logMsTicks struct{}

func (logMsTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)) - 1; e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 {
				t.Label = trimFloat(v)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

func trimFloat(v float64) string {
	if v >= 1 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%g", v)
}

// palette is the colour of each series, in order (matplotlib's tab10).
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

// phaseColors give each phase one colour in every figure.
var phaseColors = map[string]color.Color{
	"planning-ns": palette[0], "tool-ns": palette[2], "ttft-ns": palette[1], "decode-ns": palette[4],
	"tpot-ns": palette[5], "other-ns": palette[7], "e2e-ns": color.Black, "firewall": palette[3],
}

// sizeColors tell tool-output sizes apart.
var sizeColors = []color.Color{palette[0], palette[1], palette[3], palette[2]}

func sampleTitle(title, sample string) string {
	if sample != "" {
		return title + " [sample data]"
	}
	return title
}

// slotWidth is the width of one of n equal slots along the x axis of a
// plot drawn beside a legend column (withLegend).
func slotWidth(n int) vg.Length {
	return (colW*0.68 - 0.5*vg.Inch) / vg.Length(max(n, 1))
}

// stackBar adds to p a bar chart of vals in colour c on top of below (nil
// for the lowest part) and returns it, for the next part to stack on. The
// parts are outlined in white so that neighbours of one colour stay apart.
func stackBar(p *plot.Plot, below *plotter.BarChart, vals plotter.Values, w vg.Length, c color.Color) (*plotter.BarChart, error) {
	bars, err := plotter.NewBarChart(vals, w)
	if err != nil {
		return nil, err
	}
	bars.Color = c
	bars.LineStyle.Width = 0.3
	bars.LineStyle.Color = color.White
	if below != nil {
		bars.StackOn(below)
	}
	p.Add(bars)
	return bars, nil
}

type errBars struct {
	xys  plotter.XYs
	errs plotter.Errors
}

func (e errBars) Len() int                        { return len(e.xys) }
func (e errBars) XY(i int) (float64, float64)     { return e.xys[i].X, e.xys[i].Y }
func (e errBars) YError(i int) (float64, float64) { return e.errs[i].Low, e.errs[i].High }

// whiskers returns the intervals lo..hi around the values ys at xs in
// colour c, leaving out the empty ones (a point, not an interval); nil
// when none is left.
func whiskers(xs, ys, lo, hi []float64, c color.Color) (*plotter.YErrorBars, error) {
	var eb errBars
	for i := range xs {
		if lo[i] == hi[i] {
			continue
		}
		eb.xys = append(eb.xys, plotter.XY{X: xs[i], Y: ys[i]})
		eb.errs = append(eb.errs, struct{ Low, High float64 }{ys[i] - lo[i], hi[i] - ys[i]})
	}
	if len(eb.xys) == 0 {
		return nil, nil
	}
	yb, err := plotter.NewYErrorBars(eb)
	if err != nil {
		return nil, err
	}
	yb.Color = c
	yb.LineStyle.Width = 0.6
	yb.CapWidth = 3
	return yb, nil
}

// points is a scatter of values with optional vertical intervals.
func points(xs, ys, lo, hi []float64, c color.Color, shape draw.GlyphDrawer, filled bool) ([]plot.Plotter, plot.Thumbnailer, error) {
	xy := make(plotter.XYs, len(xs))
	for i := range xs {
		xy[i] = plotter.XY{X: xs[i], Y: ys[i]}
	}
	sc, err := plotter.NewScatter(xy)
	if err != nil {
		return nil, nil, err
	}
	sc.GlyphStyle.Color = c
	sc.GlyphStyle.Radius = 2.2
	sc.GlyphStyle.Shape = shape
	if filled {
		switch shape.(type) {
		case draw.CircleGlyph:
			sc.GlyphStyle.Shape = draw.CircleGlyph{}
		case draw.RingGlyph:
			sc.GlyphStyle.Shape = draw.CircleGlyph{}
		case draw.TriangleGlyph:
			sc.GlyphStyle.Shape = draw.PyramidGlyph{}
		}
	}
	out := []plot.Plotter{sc}
	if lo != nil {
		yb, err := whiskers(xs, ys, lo, hi, c)
		if err != nil {
			return nil, nil, err
		}
		if yb != nil {
			out = append(out, yb)
		}
	}
	return out, sc, nil
}

// msPoints are medians in milliseconds with their intervals, for a log
// axis (logMsAxis).
type msPoints struct{ xs, ys, lo, hi []float64 }

// add puts the median of s at x. The interval's low end is kept above a
// hundredth of the median: a log axis has no room for 0.
func (m *msPoints) add(x float64, s Summary) {
	m.xs = append(m.xs, x)
	m.ys = append(m.ys, s.Center/1e6)
	m.lo = append(m.lo, max(s.Lo, s.Center/100)/1e6)
	m.hi = append(m.hi, s.Hi/1e6)
}

// draw adds the points to p (see points) and returns their legend entry.
func (m *msPoints) draw(p *plot.Plot, c color.Color, shape draw.GlyphDrawer, filled bool) (plot.Thumbnailer, error) {
	ps, th, err := points(m.xs, m.ys, m.lo, m.hi, c, shape, filled)
	if err != nil {
		return nil, err
	}
	p.Add(ps...)
	return th, nil
}

// logMsAxis puts p's y axis on a log scale in ms that spans the medians
// and interval tops of all, with a factor of two to spare either side.
func logMsAxis(p *plot.Plot, all []msPoints) {
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logMsTicks{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, m := range all {
		for i := range m.ys {
			lo, hi = min(lo, m.ys[i]), max(hi, m.hi[i])
		}
	}
	if lo < hi {
		p.Y.Min, p.Y.Max = lo/2, hi*2
	}
}
