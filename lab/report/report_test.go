package report_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/internal/testenv"
	"github.com/mcpguard/mcpguard/lab/eval"
	"github.com/mcpguard/mcpguard/lab/report"
)

// The sample inputs in ../../testdata/report come from real runs of this
// repository's benchmarks; testdata/report/README.md gives the commands.
const samples = "../../testdata/report"

func sampleInputs(t *testing.T) report.Inputs {
	t.Helper()
	var in report.Inputs
	var err error
	in.Std, err = report.ReadBench(filepath.Join(samples, "agent-2cpu.txt"))
	require.NoError(t, err)
	in.CVM, err = report.ReadBench(filepath.Join(samples, "agent-1cpu.txt"))
	require.NoError(t, err)
	in.Firewall, err = report.ReadBench(filepath.Join(samples, "firewall.txt"))
	require.NoError(t, err)
	in.Guard, err = report.ReadBench(filepath.Join(samples, "guard.txt"))
	require.NoError(t, err)
	in.Eval, err = report.ReadEval(filepath.Join(samples, "eval.json"))
	require.NoError(t, err)
	in.Sample = "testdata/report (see its README)"
	return in
}

// TestReportGolden draws everything from the samples: the Markdown summary
// is held against a golden file (-update rewrites it), and every figure
// exists, decodes in its format, and is not blank.
func TestReportGolden(t *testing.T) {
	in := sampleInputs(t)
	dir := t.TempDir()
	files, err := report.Write(in, dir, report.DefaultFormats())
	require.NoError(t, err)

	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	require.NoError(t, err)
	golden := filepath.Join(samples, "summary.golden.md")
	if testenv.Update() {
		require.NoError(t, os.WriteFile(golden, md, 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run with -update to create it")
	assert.Equal(t, string(want), string(md))

	bases := map[string]bool{}
	for _, f := range files {
		bases[strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))] = true
		switch filepath.Ext(f) {
		case ".png":
			checkPNG(t, f)
		case ".svg":
			checkSVG(t, f)
		case ".pdf":
			checkPDF(t, f)
		}
	}
	assert.Contains(t, string(md), "**Sample data**", "sample inputs are labelled as such")
	svg, err := os.ReadFile(filepath.Join(dir, "cvm-dashboard-none.svg"))
	require.NoError(t, err)
	assert.Contains(t, string(svg), "[sample data]")
	for _, want := range []string{"security", "security-categories", "latency", "firewall-added", "firewall-scanners", "cvm-dashboard-none", "summary"} {
		assert.True(t, bases[want], "figure %s was not drawn (got %v)", want, bases)
	}
	var cvm int
	for b := range bases {
		if strings.HasPrefix(b, "cvm-") {
			cvm++
		}
	}
	assert.Positive(t, cvm, "no CVM dashboard figure")
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err, path)
	b := img.Bounds()
	require.Greater(t, b.Dx(), 100, path)
	// Not blank: a real chart has a fair share of non-background pixels
	// and several colours (bars, text, axes).
	colours := map[[4]uint32]bool{}
	var ink int
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, a := img.At(x, y).RGBA()
			colours[[4]uint32{r >> 8, g >> 8, bl >> 8, a >> 8}] = true
			if !isWhite(img, x, y) {
				ink++
			}
		}
	}
	assert.Greater(t, len(colours), 4, "%s has too few colours to be a chart", path)
	assert.Greater(t, ink, (b.Dx()*b.Dy()/4)/100, "%s is (nearly) blank", path)
}

func isWhite(img image.Image, x, y int) bool {
	r, g, b, a := img.At(x, y).RGBA()
	return a == 0 || (r > 0xf000 && g > 0xf000 && b > 0xf000)
}

func checkSVG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := xml.NewDecoder(bytes.NewReader(b))
	var shapes int
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "%s is not well-formed XML", path)
		if se, ok := tok.(xml.StartElement); ok && (se.Name.Local == "path" || se.Name.Local == "text") {
			shapes++
		}
	}
	assert.Greater(t, shapes, 10, "%s draws almost nothing", path)
}

func checkPDF(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte("%PDF-")), "%s is not a PDF", path)
	assert.Contains(t, string(b[len(b)-64:]), "%%EOF", "%s is truncated", path)
	assert.Greater(t, len(b), 2000, "%s is too small to hold a chart", path)
}

func TestBadInputsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	for name, body := range map[string]string{
		"empty.txt":     "",
		"noresults.txt": "goos: linux\nPASS\nok  \tx\t0.1s\n",
		"garbage.txt":   "BenchmarkX-2 notanumber ns/op\n",
	} {
		p := write(name, body)
		_, err := report.ReadBench(p)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), p)
		assert.ErrorIs(t, err, report.ErrNoResults)
	}
	_, err := report.ReadBench(filepath.Join(dir, "missing.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	for name, body := range map[string]string{
		"empty.json":     "",
		"notjson.json":   "{",
		"notreport.json": `[{"foo":1}]`,
	} {
		p := write(name, body)
		_, err := report.ReadEval(p)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), p)
	}
}

// benchFile writes a benchmark file with one value per run.
func benchFile(t *testing.T, name, unit string, vals ...float64) *report.Bench {
	t.Helper()
	var b strings.Builder
	b.WriteString("goos: linux\n")
	for _, v := range vals {
		fmt.Fprintf(&b, "BenchmarkX/case-2 \t 100\t %g %s\n", v, unit)
	}
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o644))
	r, err := report.ReadBench(p)
	require.NoError(t, err)
	return r
}

func TestGate(t *testing.T) {
	base := benchFile(t, "base.txt", "p50-ns", 100, 101, 99, 100, 102, 98, 100, 101)
	same := benchFile(t, "same.txt", "p50-ns", 101, 99, 100, 100, 98, 102, 101, 100)
	slow := benchFile(t, "slow.txt", "p50-ns", 130, 131, 129, 130, 132, 128, 130, 131)
	fast := benchFile(t, "fast.txt", "p50-ns", 70, 71, 69, 70, 72, 68, 70, 71)

	assert.Empty(t, report.Gate(report.Compare(base, same, nil), 5), "noise is not a regression")
	bad := report.Gate(report.Compare(base, slow, nil), 5)
	require.Len(t, bad, 1, "a 30%% slowdown is")
	assert.InDelta(t, 30, bad[0].DeltaPct, 1)
	assert.Empty(t, report.Gate(report.Compare(base, slow, nil), 50), "within the threshold")
	assert.Empty(t, report.Gate(report.Compare(base, fast, nil), 5), "faster is not a regression")

	// For a rate, lower is worse.
	rb := benchFile(t, "rb.txt", "tok/s", 100, 101, 99, 100, 102, 98)
	rs := benchFile(t, "rs.txt", "tok/s", 70, 71, 69, 70, 72, 68)
	assert.Len(t, report.Gate(report.Compare(rb, rs, nil), 5), 1)
	assert.Empty(t, report.Gate(report.Compare(rs, rb, nil), 5))

	// Too few runs can never be significant: no false alarm.
	b2 := benchFile(t, "b2.txt", "p50-ns", 100, 101)
	s2 := benchFile(t, "s2.txt", "p50-ns", 200, 201)
	assert.Empty(t, report.Gate(report.Compare(b2, s2, nil), 5))
}

// TestGateCorrectsForManyTests: sixty metrics of unchanged code, three of
// which come out at p < 0.05 by chance (as three of the did), are
// no regression after the correction; a slowdown in many metrics at once
// still is.
func TestGateCorrectsForManyTests(t *testing.T) {
	var base, same, slow strings.Builder
	base.WriteString("model-shape: small\n")
	same.WriteString("model-shape: small\n")
	slow.WriteString("model-shape: small\n")
	for i := range 60 {
		for j := range 8 {
			b := 100 + float64(j)
			s := 100.5 + float64(j)
			if i < 3 { // by chance, the new runs all came out slower
				s = 104 + float64(j)
			}
			fmt.Fprintf(&base, "BenchmarkX/m=%d-2 \t 1\t %g decode-ns\t %g timing-ppm\n", i, b, b)
			fmt.Fprintf(&same, "BenchmarkX/m=%d-2 \t 1\t %g decode-ns\t %g timing-ppm\n", i, s, 2*s)
			fmt.Fprintf(&slow, "BenchmarkX/m=%d-2 \t 1\t %g decode-ns\t %g timing-ppm\n", i, 2*b, b)
		}
	}
	read := func(name, text string) *report.Bench {
		p := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		r, err := report.ReadBench(p)
		require.NoError(t, err)
		return r
	}
	b, sm, sl := read("base.txt", base.String()), read("same.txt", same.String()), read("slow.txt", slow.String())
	rows := report.Compare(b, sm, nil)
	var uncorrected int
	for _, r := range rows {
		if r.Unit == "decode-ns" && r.Worse(3) {
			uncorrected++
		}
	}
	require.Equal(t, 3, uncorrected, "the fixture has three chance 'regressions' before correction")
	all, bad := report.Judge(rows, report.GateOptions{ThresholdPct: 3})
	assert.Empty(t, bad, "none after Benjamini-Hochberg")
	for _, j := range all {
		if j.Unit == "timing-ppm" {
			assert.False(t, j.Gated, "timing-ppm is not a per-iteration sample")
			assert.False(t, j.Regression, "timing-ppm doubled but is not judged")
		}
	}
	_, bad = report.Judge(report.Compare(b, sl, nil), report.GateOptions{ThresholdPct: 25})
	assert.Len(t, bad, 60, "twice as slow everywhere")
	_, bad = report.Judge(report.Compare(b, sl, nil), report.GateOptions{ThresholdPct: 25, Correction: report.Holm})
	assert.Len(t, bad, 60, "p = 1.6e-4 a metric survives Holm's 60x too")
	require.NoError(t, report.CheckConfig(b, sm, nil))
}

func TestAdjust(t *testing.T) {
	ps := []float64{0.01, 0.04, 0.03, 0.005}
	// Benjamini-Hochberg by hand: sorted 0.005 0.01 0.03 0.04 times 4/k:
	// 0.02 0.02 0.04 0.04, then the running minimum from the top.
	assert.InDeltaSlice(t, []float64{0.02, 0.04, 0.04, 0.02}, report.Adjust(ps, report.BH), 1e-12)
	// Holm: 0.005*4, 0.01*3, 0.03*2, 0.04*1, running maximum.
	assert.InDeltaSlice(t, []float64{0.03, 0.06, 0.06, 0.02}, report.Adjust(ps, report.Holm), 1e-12)
	assert.Equal(t, ps, report.Adjust(ps, report.NoCorrection))
	assert.Empty(t, report.Adjust(nil, report.BH))
}

func TestSummarizeMatchesBenchstat(t *testing.T) {
	s := report.Summarize([]float64{5, 1, 4, 2, 3, 6, 7})
	assert.Equal(t, 4.0, s.Center, "median")
	assert.LessOrEqual(t, s.Lo, s.Center)
	assert.GreaterOrEqual(t, s.Hi, s.Center)
	assert.Equal(t, 7, s.N)
}

func TestShareViability(t *testing.T) {
	res := func(id string, attack bool, verdict string) *eval.Result {
		return &eval.Result{ID: id, Category: "file_read", Attack: attack, Verdict: verdict}
	}
	c0 := []*eval.Result{res("A", true, eval.Succeeded), res("B", true, eval.Blocked), res("N", false, eval.Passed)}
	guarded := []*eval.Result{res("A", true, eval.Blocked), res("B", true, eval.Blocked), res("N", false, eval.Passed)}
	reps := []*eval.Report{
		{Config: "C-ebpf", Results: guarded, Summary: eval.Summarize("C-ebpf", guarded, nil)},
		{Config: "C0", Results: c0, Summary: eval.Summarize("C0", c0, eval.Viable(c0))},
	}
	require.Zero(t, reps[0].Summary.ViableBlocked.Total, "ran without C0: V-APR unknown")
	assert.Equal(t, []string{"C-ebpf"}, report.ShareViability(reps))
	assert.Equal(t, 1, reps[0].Summary.ViableBlocked.Total, "only A succeeded under C0")
	assert.Equal(t, 1, reps[0].Summary.ViableBlocked.N)
	assert.Equal(t, 2, reps[0].Summary.Blocked.N, "APR is untouched")
	assert.Empty(t, report.ShareViability(reps), "already filled in")
	assert.Empty(t, report.ShareViability(reps[:1]), "no C0 given")
}

// The host's eval and the VM's (C0 again, and the BPF configs the host
// skipped) in one report: each C0 row names its run, and no config that
// ran somewhere is reported as skipped.
func TestMergedHostAndVMEval(t *testing.T) {
	res := []*eval.Result{{ID: "A", Category: "file_read", Attack: true, Verdict: eval.Succeeded}}
	blocked := []*eval.Result{{ID: "A", Category: "file_read", Attack: true, Verdict: eval.Blocked}}
	reps := []*eval.Report{
		{RunID: "host", Config: "C0", Results: res, Summary: eval.Summarize("C0", res, eval.Viable(res))},
		{RunID: "host", Config: "C-ebpf", Skipped: "kernel refused BPF LSM"},
		{RunID: "host", Config: "C-full", Skipped: "kernel refused BPF LSM"},
		{RunID: "vm", Config: "C0", Results: res, Summary: eval.Summarize("C0", res, eval.Viable(res))},
		{RunID: "vm", Config: "C-ebpf", Results: blocked, Summary: eval.Summarize("C-ebpf", blocked, eval.Viable(res))},
	}
	var b bytes.Buffer
	require.NoError(t, report.Markdown(&b, report.Inputs{Eval: reps}))
	out := b.String()
	assert.Contains(t, out, "| C0 (host) |")
	assert.Contains(t, out, "| C0 (vm) |")
	assert.Contains(t, out, "| C-ebpf | 100.0% | 100.0% | 1/1 |")
	assert.NotContains(t, out, "C-ebpf was skipped")
	assert.Contains(t, out, "C-full was skipped: kernel refused BPF LSM")
}

// TestDashboardMarksOnlySignificantChanges: of two phases, the one that
// doubled is labelled with its change in figure 2, the one that moved by
// noise is not, and each phase's share adds up to the iteration.
func TestDashboardMarksOnlySignificantChanges(t *testing.T) {
	write := func(name, env string, decode func(j int) float64, planning func(j int) float64) *report.Bench {
		var b strings.Builder
		fmt.Fprintf(&b, "env: %s\n", env)
		for _, size := range []string{"1KiB", "16KiB"} {
			for j := range 8 {
				d, p := decode(j), planning(j)
				fmt.Fprintf(&b, "BenchmarkAgent/size=%s/guard=none-2 \t 1\t %g planning-ns\t %g tool-ns\t %g ttft-ns\t %g decode-ns\t %g tpot-ns\t %g other-ns\t %g e2e-ns\n",
					size, p, 1e6, 3e7, d, d/63, 1e5, p+1e6+3e7+d+1e5)
			}
		}
		p := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o644))
		r, err := report.ReadBench(p)
		require.NoError(t, err)
		return r
	}
	std := write("std.txt", "std", func(j int) float64 { return 5e7 + float64(j)*1e5 }, func(j int) float64 { return 2e7 + float64(j)*1e5 })
	cvm := write("cvm.txt", "cvm", func(j int) float64 { return 1.65e8 + float64(j)*1e5 }, func(j int) float64 { return 2.01e7 + float64(7-j)*1e5 })
	ds := report.Dashboards(std, cvm, nil)
	require.Len(t, ds, 1)
	d := ds[0]
	assert.Equal(t, []string{"1KiB", "16KiB"}, d.Sizes)
	dec, ok := d.Cell("16KiB", "decode-ns")
	require.True(t, ok)
	assert.True(t, dec.Changed, "decode more than tripled")
	pl, ok := d.Cell("16KiB", "planning-ns")
	require.True(t, ok)
	assert.False(t, pl.Changed, "planning moved by noise")

	dir := t.TempDir()
	files, err := report.DashboardFigure(d, "std", "cvm", "", dir, []string{"svg", "png"})
	require.NoError(t, err)
	require.Len(t, files, 2)
	checkPNG(t, files[1])
	svg, err := os.ReadFile(files[0])
	require.NoError(t, err)
	label := func(c report.DashCell) string { return fmt.Sprintf(">%+.0f%%<", (c.CVM.Center/c.Std.Center-1)*100) }
	assert.Contains(t, string(svg), label(dec), "the slower decode is labelled")
	assert.NotContains(t, string(svg), label(pl), "the unchanged planning is not")
	assert.NotContains(t, string(svg), "[sample data]")
	assert.Contains(t, string(svg), "whiskers: 95% CI", "8 runs a side give intervals")
}

func TestMoreLoaded(t *testing.T) {
	quiet := benchFile(t, "quiet.txt", "loadavg", 2, 2.5, 3)
	busy := benchFile(t, "busy.txt", "loadavg", 20, 22, 25)
	alsoQuiet := benchFile(t, "q2.txt", "loadavg", 2.4, 2.6, 2.2)
	idle := benchFile(t, "idle.txt", "loadavg", 0.1, 0.2, 0.1)
	none := benchFile(t, "none.txt", "p50-ns", 1, 2, 3)
	lb, lc, ok := report.Loads(quiet, busy)
	require.True(t, ok)
	assert.Equal(t, 2.5, lb)
	assert.Equal(t, 22.0, lc)
	assert.True(t, report.MoreLoaded(quiet, busy, 1.5))
	assert.False(t, report.MoreLoaded(busy, quiet, 1.5), "a quieter new run is judged")
	assert.False(t, report.MoreLoaded(quiet, alsoQuiet, 1.5))
	assert.False(t, report.MoreLoaded(idle, alsoQuiet, 3), "below one runnable thread counts as one")
	assert.False(t, report.MoreLoaded(quiet, busy, 0), "0 turns the check off")
	assert.False(t, report.MoreLoaded(quiet, none, 1.5), "no loadavg, no check")
	assert.False(t, report.Gated("loadavg"))
}

// A BenchmarkAgent run with nothing to compare it with (make bench) gets
// a phase table of its own: every sub-benchmark, medians in ms.
func TestAgentTableWithoutCVM(t *testing.T) {
	std, err := report.ReadBench(filepath.Join(samples, "agent-2cpu.txt"))
	require.NoError(t, err)
	var md strings.Builder
	require.NoError(t, report.Markdown(&md, report.Inputs{Std: std}))
	out := md.String()
	assert.Contains(t, out, "## Agent phases:")
	assert.Contains(t, out, "| benchmark | planning ms | tool ms | TTFT ms | decode ms | TPOT ms | e2e ms | gen tok/s |")
	names := map[string]bool{}
	for _, k := range std.Keys {
		if k.Unit == "e2e-ns" {
			names[k.Name] = true
			assert.Contains(t, out, "| "+strings.TrimPrefix(k.Name, "Agent/")+" | ", "a row for %s", k.Name)
		}
	}
	require.NotEmpty(t, names)
	s, ok := std.Summary(report.Key{Name: firstKey(names), Unit: "e2e-ns"})
	require.True(t, ok)
	assert.Contains(t, out, fmt.Sprintf("%.2f", s.Center/1e6), "the e2e median in ms")
	assert.NotContains(t, out, "vs", "no comparison without a second environment")

	// Its figure: the phases stacked, a panel per size.
	dir := t.TempDir()
	files, err := report.Write(report.Inputs{Std: std}, dir, []string{"png", "svg"})
	require.NoError(t, err)
	require.Contains(t, files, filepath.Join(dir, "agent-phases.png"))
	checkPNG(t, filepath.Join(dir, "agent-phases.png"))
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	require.NoError(t, err)
	assert.Contains(t, string(page), `<img src="agent-phases.png"`)
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}
