// Package report turns benchmark output (`go test -bench`, read with
// golang.org/x/perf's benchfmt) and eval results (`mcpguard eval --json`)
// into the study's figures and tables, and compares two benchmark runs the
// way benchstat does (benchmath) to gate regressions.
package report

import (
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// Confidence is the confidence level of every interval reported.
const Confidence = 0.95

// ErrNoResults is returned for an input file that holds no benchmark results.
var ErrNoResults = errors.New("no benchmark results")

// Key names one series of measurements: a benchmark (without its
// -GOMAXPROCS suffix) and a unit.
type Key struct {
	Name, Unit string
}

// Bench is one benchmark output file.
type Bench struct {
	File string
	// Config holds the file's configuration lines (goos, cpu, env, cvm, ...),
	// the first value seen for each key.
	Config map[string]string
	// Samples holds every measurement, per benchmark and unit, in the units
	// the benchmark reported (p50-ns stays in ns).
	Samples map[Key][]float64
	// Keys lists the keys in the order first seen.
	Keys []Key
}

// ReadBench reads a `go test -bench` output file. A file that cannot be
// parsed, or holds no results, is an error naming the file.
func ReadBench(path string) (*Bench, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read benchmarks: %w", err)
	}
	defer f.Close()
	b := &Bench{File: path, Config: map[string]string{}, Samples: map[Key][]float64{}}
	r := benchfmt.NewReader(f, path)
	var syntaxErrs []string
	for r.Scan() {
		switch rec := r.Result().(type) {
		case *benchfmt.SyntaxError:
			syntaxErrs = append(syntaxErrs, rec.Error())
		case *benchfmt.Result:
			for _, c := range rec.Config {
				if _, ok := b.Config[c.Key]; !ok && c.File {
					b.Config[c.Key] = string(c.Value)
				}
			}
			name := stripProcs(rec.Name.String())
			for _, v := range rec.Values {
				unit, val := v.Unit, v.Value
				if v.OrigUnit != "" {
					unit, val = v.OrigUnit, v.OrigValue
				}
				k := Key{name, unit}
				if _, ok := b.Samples[k]; !ok {
					b.Keys = append(b.Keys, k)
				}
				b.Samples[k] = append(b.Samples[k], val)
			}
		}
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("read benchmarks %s: %w", path, err)
	}
	if len(b.Keys) == 0 {
		if len(syntaxErrs) > 0 {
			return nil, fmt.Errorf("read benchmarks %s: %w; first syntax error: %s", path, ErrNoResults, syntaxErrs[0])
		}
		return nil, fmt.Errorf("read benchmarks %s: %w", path, ErrNoResults)
	}
	return b, nil
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

func stripProcs(name string) string { return procsSuffix.ReplaceAllString(name, "") }

// Summary is a median with its confidence interval. With too few runs
// for a 95% interval (fewer than 6), HasCI is false and Lo = Hi = Center.
type Summary struct {
	Center, Lo, Hi float64
	N              int
	HasCI          bool
}

// Summarize returns the median and its 95% interval, as benchstat does.
func Summarize(vals []float64) Summary {
	s := benchmath.AssumeNothing.Summary(benchmath.NewSample(append([]float64(nil), vals...), &benchmath.DefaultThresholds), Confidence)
	out := Summary{Center: s.Center, Lo: s.Lo, Hi: s.Hi, N: len(vals), HasCI: true}
	if math.IsInf(s.Lo, 0) || math.IsNaN(s.Lo) || math.IsInf(s.Hi, 0) || math.IsNaN(s.Hi) {
		out.Lo, out.Hi, out.HasCI = s.Center, s.Center, false
	}
	return out
}

// Summary returns the summary of one series, and whether it exists.
func (b *Bench) Summary(k Key) (Summary, bool) {
	v, ok := b.Samples[k]
	if !ok {
		return Summary{}, false
	}
	return Summarize(v), true
}

// Row compares one series between two files.
type Row struct {
	Key
	Base, New Summary
	// DeltaPct is the change of the median, in percent of the base.
	DeltaPct float64
	// P is the p-value of the Mann-Whitney U-test benchstat uses; the
	// change is Significant when P < Alpha.
	P, Alpha    float64
	Significant bool
}

// Compare returns a row for every series present in both files, in the
// base file's order. keep, if not nil, selects the series.
func Compare(base, cur *Bench, keep func(Key) bool) []Row {
	var rows []Row
	for _, k := range base.Keys {
		if keep != nil && !keep(k) {
			continue
		}
		nv, ok := cur.Samples[k]
		if !ok {
			continue
		}
		bv := base.Samples[k]
		s1 := benchmath.NewSample(append([]float64(nil), bv...), &benchmath.DefaultThresholds)
		s2 := benchmath.NewSample(append([]float64(nil), nv...), &benchmath.DefaultThresholds)
		c := benchmath.AssumeNothing.Compare(s1, s2)
		r := Row{Key: k, Base: Summarize(bv), New: Summarize(nv), P: c.P, Alpha: c.Alpha}
		if r.Base.Center != 0 {
			r.DeltaPct = (r.New.Center/r.Base.Center - 1) * 100
		}
		r.Significant = c.P < c.Alpha
		rows = append(rows, r)
	}
	return rows
}

// HigherIsBetter reports whether a larger value of unit is an improvement:
// rates and throughputs are, times, sizes and counts of work are not.
func HigherIsBetter(unit string) bool {
	u := strings.ToLower(unit)
	for _, s := range []string{"/s", "gflops", "peak-frac", "apr", "ops"} {
		if strings.Contains(u, s) {
			return !strings.HasSuffix(u, "/op") || strings.Contains(u, "/s")
		}
	}
	return false
}

// Worse reports whether the row is a significant change for the worse by
// more than thresholdPct percent. Significant is the uncorrected test; the
// gate (Judge) corrects for the number of tests first.
func (r Row) Worse(thresholdPct float64) bool {
	if !r.Significant {
		return false
	}
	return r.worseBy(thresholdPct)
}

func (r Row) worseBy(thresholdPct float64) bool {
	if HigherIsBetter(r.Unit) {
		return r.DeltaPct < -thresholdPct
	}
	return r.DeltaPct > thresholdPct
}
