package report

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mcpguard/mcpguard/internal/eval"
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
}

// envLabel is a file's environment as its `env:` line names it, else its name.
func envLabel(b *Bench) string {
	if v := b.Config["env"]; v != "" {
		return v
	}
	return strings.TrimSuffix(filepath.Base(b.File), filepath.Ext(b.File))
}

// Write draws every figure the inputs allow into dir, in the given
// formats, and writes the Markdown summary with the same numbers to
// dir/summary.md. It returns the files written.
func Write(in Inputs, dir string, formats []string) ([]string, error) {
	if len(formats) == 0 {
		formats = DefaultFormats()
	}
	var files []string
	add := func(f []string, err error) error {
		files = append(files, f...)
		return err
	}
	if in.Std != nil && in.CVM != nil {
		for _, d := range Dashboards(in.Std, in.CVM, in.AgentFilter) {
			if err := add(DashboardFigure(d, envLabel(in.Std), envLabel(in.CVM), in.Sample, dir, formats)); err != nil {
				return files, err
			}
		}
	}
	if in.Firewall != nil {
		if err := add(FirewallFigures(FirewallRows(in.Firewall), in.Sample, dir, formats)); err != nil {
			return files, err
		}
	}
	if len(in.Eval) > 0 {
		if err := add(SecurityFigures(in.Eval, in.Sample, dir, formats)); err != nil {
			return files, err
		}
	}
	if in.Guard != nil {
		if err := add(LatencyFigure(LatencyRows(in.Guard), in.Sample, dir, formats)); err != nil {
			return files, err
		}
	}
	var md bytes.Buffer
	if err := Markdown(&md, in); err != nil {
		return files, err
	}
	path := filepath.Join(dir, "summary.md")
	if err := writeFile(path, md.Bytes()); err != nil {
		return files, err
	}
	return append(files, path), nil
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
func Markdown(w io.Writer, in Inputs) error {
	var b strings.Builder
	b.WriteString("# mcpguard report\n\n")
	if in.Sample != "" {
		fmt.Fprintf(&b, "**Sample data**: %s. These numbers illustrate the report; they are not results.\n\n", in.Sample)
	}
	b.WriteString("Medians over runs with 95% confidence intervals (benchmath, as benchstat computes them; ±∞ where fewer than 6 runs allow none).\n")
	if len(in.Eval) > 0 {
		reps := SortReports(in.Eval)
		b.WriteString("\n## Attack prevention and false positives (Table 1)\n\n")
		b.WriteString("| config | APR | V-APR | viable blocked | FPR |\n|---|---:|---:|---:|---:|\n")
		for _, r := range reps {
			s := r.Summary
			fmt.Fprintf(&b, "| %s | %.1f%% | %.1f%% | %s | %s |\n", Label(r, reps), 100*s.APR(), 100*s.VAPR(), s.ViableBlocked, s.FalsePositives)
		}
		for _, n := range SkippedNotes(in.Eval) {
			fmt.Fprintf(&b, "\n%s\n", n)
		}
		cats := categories(reps)
		b.WriteString("\n### Blocked per category\n\n| config |")
		for _, c := range cats {
			b.WriteString(" " + c + " |")
		}
		b.WriteString("\n|---|" + strings.Repeat("---:|", len(cats)) + "\n")
		for _, r := range reps {
			b.WriteString("| " + Label(r, reps) + " |")
			for _, c := range cats {
				b.WriteString(" " + r.Summary.PerCategory[c].String() + " |")
			}
			b.WriteString("\n")
		}
	}
	if in.Guard != nil {
		b.WriteString("\n## Latency of a benign read_file (BenchmarkGuard)\n\n")
		b.WriteString("| config | p50 µs | p95 µs | p99 µs | p50 over direct µs | p50 over C0 µs | allocs/call |\n|---|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range LatencyRows(in.Guard) {
			over, overC0 := "–", "–"
			if r.HasOverhead {
				over = us(r.OverheadP50.Center) + " " + ci(r.OverheadP50)
			}
			if r.HasOverC0 {
				overC0 = us(r.OverC0P50.Center) + " " + ci(r.OverC0P50)
			}
			fmt.Fprintf(&b, "| %s | %s %s | %s | %s | %s | %s | %.0f |\n", r.Config, us(r.P50.Center), ci(r.P50), us(r.P95.Center), us(r.P99.Center), over, overC0, r.AllocsOp.Center)
		}
	}
	if in.Std != nil && in.CVM != nil {
		std, cvm := envLabel(in.Std), envLabel(in.CVM)
		fmt.Fprintf(&b, "\n## Agent phases: %s vs %s (figure 2)\n\n", std, cvm)
		b.WriteString("\nOverhead is shown where the change is significant after Benjamini-Hochberg correction over the table's tests (q < 0.05), else ~.\n\n")
		fmt.Fprintf(&b, "| benchmark | phase | %s ms | %s ms | overhead | p | q |\n|---|---|---:|---:|---:|---:|---:|\n", std, cvm)
		rows := CVMRows(in.Std, in.CVM, in.AgentFilter)
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
			fmt.Fprintf(&b, "| %s | %s | %s %s | %s %s | %s | %.3f | %.3f |\n", strings.TrimPrefix(r.Bench, "Agent/"), strings.TrimSuffix(r.Phase, "-ns"),
				ms(r.Std.Center), ci(r.Std), ms(r.CVM.Center), ci(r.CVM), delta, r.P, qs[i])
		}
	}
	if in.Std != nil && in.CVM == nil {
		agentTable(&b, in.Std, in.AgentFilter)
	}
	if in.Firewall != nil {
		rows := FirewallRows(in.Firewall)
		b.WriteString("\n## Guardrail cost per agent iteration (figures 3 and 4)\n\n")
		b.WriteString("| size | firewall | firewall ms | share of iteration | per scanner ms |\n|---|---|---:|---:|---|\n")
		for _, r := range rows {
			var sc []string
			for _, name := range sortedKeys(r.Scanners) {
				sc = append(sc, fmt.Sprintf("%s %s", name, ms(r.Scanners[name].Center)))
			}
			fmt.Fprintf(&b, "| %s | %s | %s %s | %.1f%% | %s |\n", r.Size, r.Firewall, ms(r.Added.Center), ci(r.Added), r.Pct.Center, strings.Join(sc, ", "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// agentTable writes one environment's BenchmarkAgent phases (a run with
// no second environment to compare it with, as `make bench` makes):
// medians with their intervals, one row per sub-benchmark in file order.
func agentTable(b *strings.Builder, std *Bench, filter *regexp.Regexp) {
	cols := []struct{ unit, head string }{
		{"planning-ns", "planning ms"}, {"tool-ns", "tool ms"}, {"ttft-ns", "TTFT ms"},
		{"decode-ns", "decode ms"}, {"tpot-ns", "TPOT ms"}, {"e2e-ns", "e2e ms"},
	}
	fmt.Fprintf(b, "\n## Agent phases: %s (BenchmarkAgent)\n\n| benchmark |", envLabel(std))
	for _, c := range cols {
		b.WriteString(" " + c.head + " |")
	}
	b.WriteString(" gen tok/s |\n|---|" + strings.Repeat("---:|", len(cols)+1) + "\n")
	seen := map[string]bool{}
	for _, k := range std.Keys {
		if k.Unit != "e2e-ns" || seen[k.Name] || (filter != nil && !filter.MatchString(k.Name)) {
			continue
		}
		seen[k.Name] = true
		b.WriteString("| " + strings.TrimPrefix(k.Name, "Agent/") + " |")
		for _, c := range cols {
			cell := "–"
			if s, ok := std.Summary(Key{k.Name, c.unit}); ok {
				cell = ms(s.Center) + " " + ci(s)
			}
			b.WriteString(" " + cell + " |")
		}
		cell := "–"
		if s, ok := std.Summary(Key{k.Name, "gen-tok/s"}); ok {
			cell = fmt.Sprintf("%.1f %s", s.Center, ci(s))
		}
		b.WriteString(" " + cell + " |\n")
	}
}
