package report

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

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
	sizes := distinct(rows, func(r FirewallRow) string { return r.Size })
	fws := distinct(rows, func(r FirewallRow) string { return r.Firewall })
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
	st := stack{
		sizes: sizes, bars: fws, parts: append(slices.Clone(sharePhases), "firewall"),
		value: func(size, fw, part string) float64 {
			r, ok := find(size, fw)
			if !ok {
				return 0
			}
			if part == "firewall" {
				return r.Added.Center
			}
			return r.Phases[part].Center
		},
		title: func(size string) string { return "Iteration, output " + size },
		label: func(fw string) string {
			return strings.NewReplacer("_", "\n", "promptguard", "prompt\nguard").Replace(fw)
		},
	}
	files, err := st.draw(sample, dir, "firewall-added", formats)
	if err != nil {
		return nil, err
	}
	more, err := scannerFigure(rows, sizes, sample, dir, formats)
	return append(files, more...), err
}

// scannerFigure is figure 4: the scanners inside the all-scanners variant,
// each scanner's median time per iteration by size, on a log axis (none
// drawn when no row timed a scanner).
func scannerFigure(rows []FirewallRow, sizes []string, sample, dir string, formats []string) ([]string, error) {
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
		return nil, nil
	}
	p := newPlot(sampleTitle("Time per scanner per iteration, all on", sample), "", "")
	leg := newLegend()
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
		leg.Add("output "+size, th)
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
	return withLegend(p, leg, dir, "firewall-scanners", formats, 2.4*vg.Inch, 0.3)
}

// stack is a figure of stacked bars, one panel per size: a bar per name
// in bars, the medians of parts stacked in their phase colours, the
// legend beside the panels.
type stack struct {
	sizes, bars, parts []string
	// value is a part's median in ns (0 where there is none).
	value func(size, bar, part string) float64
	// title names a panel, label a bar.
	title func(size string) string
	label func(bar string) string
}

// draw saves the figure as dir/base.<format>.
func (s stack) draw(sample, dir, base string, formats []string) ([]string, error) {
	leg := newLegend()
	var panels []*plot.Plot
	for si, size := range s.sizes {
		title := fmt.Sprintf("(%c) %s", 'a'+si, s.title(size))
		if si == 0 {
			title = sampleTitle(title, sample)
		}
		p := newPlot(title, "", "median ms, stacked")
		var below *plotter.BarChart
		w := slotWidth(len(s.bars)) * 0.7
		for _, part := range s.parts {
			vals := make(plotter.Values, len(s.bars))
			any := false
			for i, bar := range s.bars {
				vals[i] = s.value(size, bar, part) / 1e6
				any = any || vals[i] > 0
			}
			if !any {
				continue
			}
			bars, err := stackBar(p, below, vals, w, phaseColors[part])
			if err != nil {
				return nil, fmt.Errorf("%s bars: %w", base, err)
			}
			below = bars
			if si == 0 {
				leg.Add(partLabel(part), bars)
			}
		}
		labels := make([]string, len(s.bars))
		for i, bar := range s.bars {
			labels[i] = s.label(bar)
		}
		p.NominalX(labels...)
		p.X.Tick.Label.Font.Size = 5.5
		p.Y.Min = 0
		panels = append(panels, p)
	}
	legFrac := 0.3
	h := vg.Length(len(panels)) * 2.3 * vg.Inch
	return saveDrawing(dir, base, formats, colW, h, func(c draw.Canvas) {
		n := float64(len(panels))
		for i, p := range panels {
			y1 := 1 - float64(i)/n
			p.Draw(region(c, 0, 1-legFrac, y1-1/n, y1))
		}
		leg.Draw(region(c, 1-legFrac+0.02, 1, 0, 0.97))
	})
}

// partLabel names a stacked part in a legend.
func partLabel(part string) string {
	if part == "firewall" {
		return "guardrails"
	}
	return phaseLabel(part)
}
