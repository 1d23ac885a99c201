package report

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mcpguard/mcpguard/lab/eval"
)

// Inputs are what a report is drawn from; any part may be missing.
type Inputs struct {
	// Std and CVM are BenchmarkAgent runs in a standard and a confidential
	// environment; their labels come from the files' `env:` lines.
	Std, CVM *Bench
	// AgentFilter selects the agent sub-benchmarks of the CVM dashboard
	// (nil: all).
	AgentFilter *regexp.Regexp
	// Firewall is a BenchmarkFirewall run.
	Firewall *Bench
	// Guard is a BenchmarkGuard run.
	Guard *Bench
	// Eval holds `mcpguard eval` reports.
	Eval []*eval.Report
	// Sample, when not empty, says the inputs are sample data (what they
	// are and where from): every figure title and the summary say so.
	Sample string
	// Run describes the run that made the inputs (ReadRun); may be empty.
	Run []RunLine
}

// envLabel is a file's environment as its `env:` line names it, else its name.
func envLabel(b *Bench) string {
	if v := b.Config["env"]; v != "" {
		return v
	}
	return strings.TrimSuffix(filepath.Base(b.File), filepath.Ext(b.File))
}

func ms(ns float64) string { return fmt.Sprintf("%.2f", ns/1e6) }
func us(ns float64) string { return fmt.Sprintf("%.1f", ns/1e3) }

// ci formats a summary's interval as benchstat does: ±x% of the center.
func ci(s Summary) string {
	if !s.HasCI || s.Center == 0 {
		return "±∞"
	}
	d := max(s.Hi-s.Center, s.Center-s.Lo)
	return fmt.Sprintf("±%.0f%%", 100*d/math.Abs(s.Center))
}

// Markdown writes the summary tables for whatever the inputs hold.
func Markdown(w io.Writer, in Inputs) error { return Build(in).WriteMarkdown(w) }

// Build lays out the report for whatever the inputs hold: a section per
// table, each naming the figures Write draws for it.
func Build(in Inputs) *Document {
	d := &Document{Title: "mcpguard report", Run: in.Run}
	if in.Sample != "" {
		d.Notes = append(d.Notes, Para{Lead: "Sample data", Text: ": " + in.Sample + ". These numbers illustrate the report; they are not results."})
	}
	d.Notes = append(d.Notes, Para{Text: "Medians over runs with 95% confidence intervals (benchmath, as benchstat computes them; ±∞ where fewer than 6 runs allow none)."})
	if len(in.Eval) > 0 {
		d.Sections = append(d.Sections, evalSections(in.Eval)...)
	}
	if in.Guard != nil {
		d.Sections = append(d.Sections, latencySection(in.Guard))
	}
	if in.Std != nil && in.CVM != nil {
		d.Sections = append(d.Sections, cvmSection(in.Std, in.CVM, in.AgentFilter))
	}
	if in.Std != nil && in.CVM == nil {
		d.Sections = append(d.Sections, agentSection(in.Std, in.AgentFilter))
	}
	if in.Firewall != nil {
		d.Sections = append(d.Sections, firewallSection(in.Firewall))
	}
	return d
}

// evalSections are Table 1 and the attacks blocked per category.
func evalSections(all []*eval.Report) []Section {
	reps := SortReports(all)
	t := newTable("config", "APR!", "V-APR!", "viable blocked!", "FPR!")
	for _, r := range reps {
		s := r.Summary
		t.add(Label(r, reps), fmt.Sprintf("%.1f%%", 100*s.APR()), fmt.Sprintf("%.1f%%", 100*s.VAPR()), s.ViableBlocked.String(), s.FalsePositives.String())
	}
	table1 := Section{ID: "security", Title: "Attack prevention and false positives (Table 1)", Table: t,
		Figures: []Figure{{"security", "APR, V-APR and FPR per config; a zero is labelled 0."}}}
	for _, n := range SkippedNotes(all) {
		table1.After = append(table1.After, Para{Text: n})
	}
	cats := categories(reps)
	head := []string{"config"}
	for _, c := range cats {
		head = append(head, c+"!")
	}
	ct := newTable(head...)
	for _, r := range reps {
		row := []string{Label(r, reps)}
		for _, c := range cats {
			row = append(row, r.Summary.PerCategory[c].String())
		}
		ct.add(row...)
	}
	return []Section{table1, {ID: "categories", Title: "Blocked per category", Sub: true, Table: ct,
		Figures: []Figure{{"security-categories", "The share of each category's attacks blocked, per config; a zero is labelled 0."}}}}
}

// latencySection is BenchmarkGuard's table: each row's own percentiles and
// its paired differences over direct and C0.
func latencySection(g *Bench) Section {
	t := newTable("config", "p50 µs!", "p95 µs!", "p99 µs!", "p50 over direct µs!", "p50 over C0 µs!", "allocs/call!")
	for _, r := range LatencyRows(g) {
		over, overC0 := "–", "–"
		if r.HasOverhead {
			over = us(r.OverheadP50.Center) + " " + ci(r.OverheadP50)
		}
		if r.HasOverC0 {
			overC0 = us(r.OverC0P50.Center) + " " + ci(r.OverC0P50)
		}
		t.add(r.Config, us(r.P50.Center)+" "+ci(r.P50), us(r.P95.Center), us(r.P99.Center), over, overC0, fmt.Sprintf("%.0f", r.AllocsOp.Center))
	}
	return Section{ID: "latency", Title: "Latency of a benign read_file (BenchmarkGuard)", Table: t,
		Figures: []Figure{{"latency", "What each config adds to the call: the median of per-round differences against the direct call (and against C0), with the 95% interval over runs."}}}
}

// cvmSection compares the agent phases of two environments (figure 2).
func cvmSection(stdB, cvmB *Bench, filter *regexp.Regexp) Section {
	std, cvm := envLabel(stdB), envLabel(cvmB)
	t := newTable("benchmark", "phase", std+" ms!", cvm+" ms!", "overhead!", "p!", "q!")
	rows := CVMRows(stdB, cvmB, filter)
	ps := make([]float64, len(rows))
	for i, r := range rows {
		ps[i] = r.P
	}
	qs := Adjust(ps, BH)
	for i, r := range rows {
		delta := "~"
		if qs[i] < 0.05 {
			delta = fmt.Sprintf("%+.1f%%", r.OverheadPct)
		}
		t.add(strings.TrimPrefix(r.Bench, "Agent/"), strings.TrimSuffix(r.Phase, "-ns"),
			ms(r.Std.Center)+" "+ci(r.Std), ms(r.CVM.Center)+" "+ci(r.CVM), delta, fmt.Sprintf("%.3f", r.P), fmt.Sprintf("%.3f", qs[i]))
	}
	s := Section{ID: "agent", Title: fmt.Sprintf("Agent phases: %s vs %s (figure 2)", std, cvm), Table: t,
		Before: []Para{{Text: "Overhead is shown where the change is significant after Benjamini-Hochberg correction over the table's tests (q < 0.05), else ~."}}}
	for _, d := range Dashboards(stdB, cvmB, filter) {
		s.Figures = append(s.Figures, Figure{"cvm-dashboard" + guardSlug(d.Guard), "Figure 2, guard " + d.Guard + ": each phase's share, the medians, and the overhead of " + cvm + " over " + std + "."})
	}
	return s
}

// agentSection is one environment's BenchmarkAgent phases (a run with no
// second environment to compare it with, as `make bench` makes): medians
// with their intervals, one row per sub-benchmark in file order.
func agentSection(std *Bench, filter *regexp.Regexp) Section {
	cols := []struct{ unit, head string }{
		{"planning-ns", "planning ms"}, {"tool-ns", "tool ms"}, {"ttft-ns", "TTFT ms"},
		{"decode-ns", "decode ms"}, {"tpot-ns", "TPOT ms"}, {"e2e-ns", "e2e ms"},
	}
	head := []string{"benchmark"}
	for _, c := range cols {
		head = append(head, c.head+"!")
	}
	t := newTable(append(head, "gen tok/s!")...)
	seen := map[string]bool{}
	for _, k := range std.Keys {
		if k.Unit != "e2e-ns" || seen[k.Name] || (filter != nil && !filter.MatchString(k.Name)) {
			continue
		}
		seen[k.Name] = true
		row := []string{strings.TrimPrefix(k.Name, "Agent/")}
		for _, c := range cols {
			cell := "–"
			if s, ok := std.Summary(Key{k.Name, c.unit}); ok {
				cell = ms(s.Center) + " " + ci(s)
			}
			row = append(row, cell)
		}
		cell := "–"
		if s, ok := std.Summary(Key{k.Name, "gen-tok/s"}); ok {
			cell = fmt.Sprintf("%.1f %s", s.Center, ci(s))
		}
		t.add(append(row, cell)...)
	}
	return Section{ID: "agent", Title: fmt.Sprintf("Agent phases: %s (BenchmarkAgent)", envLabel(std)), Table: t,
		Figures: []Figure{{"agent-phases", "One agent iteration split into its phases, per tool-output size and guard (medians)."}}}
}

// firewallSection is what each guardrail adds to an agent iteration.
func firewallSection(fw *Bench) Section {
	t := newTable("size", "firewall", "firewall ms!", "share of iteration!", "per scanner ms")
	for _, r := range FirewallRows(fw) {
		var sc []string
		for _, name := range sortedKeys(r.Scanners) {
			sc = append(sc, fmt.Sprintf("%s %s", name, ms(r.Scanners[name].Center)))
		}
		t.add(r.Size, r.Firewall, ms(r.Added.Center)+" "+ci(r.Added), fmt.Sprintf("%.1f%%", r.Pct.Center), strings.Join(sc, ", "))
	}
	return Section{ID: "guardrails", Title: "Guardrail cost per agent iteration (figures 3 and 4)", Table: t,
		Figures: []Figure{
			{"firewall-added", "Figure 3: an agent iteration with each guardrail, its phases and the guardrail's time stacked, per tool-output size."},
			{"firewall-scanners", "Figure 4: each scanner's time per iteration with all of them on (log axis)."},
		}}
}
