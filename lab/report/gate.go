package report

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ErrConfigMismatch is returned when two benchmark files were not run in
// the same configuration (another model, endpoint, shape, server...), so a
// difference between them says nothing about the code.
var ErrConfigMismatch = errors.New("configuration lines differ")

// gateConfigKeys are the configuration lines that must agree between the
// files the gate compares. Lines that describe the machine (cpu, kernel,
// env, cvm) may differ: comparing machines is what benchstat is for, and a
// CI runner's kernel build changes from boot to boot.
var gateConfigKeys = []string{
	"goos", "goarch", "pkg",
	"model", "model-endpoint", "model-shape", "model-synthetic",
	"prompt-nonce", "cache-prompt", "max-tokens", "mcp-server", "classifier-endpoint",
}

// GateConfigKeys returns the configuration lines CheckConfig compares.
func GateConfigKeys() []string { return slices.Clone(gateConfigKeys) }

// CheckConfig returns an error wrapping ErrConfigMismatch that names every
// line of GateConfigKeys (less ignore) whose value differs between the
// files, a line missing from one file counting as different.
func CheckConfig(base, cur *Bench, ignore []string) error {
	var diffs []string
	for _, k := range gateConfigKeys {
		if slices.Contains(ignore, k) {
			continue
		}
		bv, bok := base.Config[k]
		cv, cok := cur.Config[k]
		if bok != cok || bv != cv {
			show := func(v string, ok bool) string {
				if !ok {
					return "(none)"
				}
				return fmt.Sprintf("%q", v)
			}
			diffs = append(diffs, fmt.Sprintf("%s: %s vs %s", k, show(bv, bok), show(cv, cok)))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: %s", ErrConfigMismatch, strings.Join(diffs, "; "))
	}
	return nil
}

// notSamples are units that are not a mean over one run's iterations, so
// their values across runs are not independent samples of one quantity:
// timing-ppm divides by a cost measured once per process (every
// sub-benchmark of one process shares it); the rest are counts or
// fractions that describe the workload, not its speed.
var notSamples = []string{"timing-ppm", "incomplete-frac", "workers", "segments", "peak-frac", "loadavg"}

// Gated reports whether the gate judges unit: times per operation (…-ns,
// ns/op, sec/op) and rates (…/s), which are means over a run's
// iterations. Token counts, sizes, allocations and the units of
// notSamples are shown but never fail the gate.
func Gated(unit string) bool {
	if slices.Contains(notSamples, unit) {
		return false
	}
	u := strings.ToLower(unit)
	return strings.HasSuffix(u, "-ns") || u == "ns/op" || u == "sec/op" || strings.HasSuffix(u, "/s")
}

// Loads returns the medians of the two files' loadavg metrics (the
// machine's 1-minute load average at the end of each row), and whether both
// files have them.
func Loads(base, cur *Bench) (lb, lc float64, ok bool) {
	med := func(b *Bench) (float64, bool) {
		var all []float64
		for k, v := range b.Samples {
			if k.Unit == "loadavg" {
				all = append(all, v...)
			}
		}
		if len(all) == 0 {
			return 0, false
		}
		slices.Sort(all)
		return all[len(all)/2], true
	}
	lb, ok1 := med(base)
	lc, ok2 := med(cur)
	return lb, lc, ok1 && ok2
}

// MoreLoaded reports whether the new file's machine was at least ratio
// times as loaded as the base's (loads below one runnable thread count as
// one, an idle machine). A wall-clock slowdown measured then says as much
// about the machine as about the code.
func MoreLoaded(base, cur *Bench, ratio float64) bool {
	lb, lc, ok := Loads(base, cur)
	return ok && ratio > 0 && max(lc, 1)/max(lb, 1) >= ratio
}

// Correction is how the gate corrects p-values for the number of tests.
type Correction string

// Corrections.
const (
	// BH is Benjamini-Hochberg: it controls the false discovery rate, and
	// with no real change at all the chance of any false alarm, at Alpha,
	// while a slowdown that shows in many metrics at once (a slower machine,
	// a slower build) still gets through with few runs.
	BH Correction = "bh"
	// Holm is Holm-Bonferroni: the chance of any false alarm at Alpha
	// whatever else changed; with few runs nothing may reach it.
	Holm Correction = "holm"
	// NoCorrection tests each metric at Alpha alone (benchstat's way: with
	// 60 metrics, about 3 false alarms a run).
	NoCorrection Correction = "none"
)

// GateOptions configure Judge. Zero values mean the defaults.
type GateOptions struct {
	// ThresholdPct is the smallest slowdown, in percent, that fails the gate.
	ThresholdPct float64
	// Alpha is the level of the corrected tests (0.05).
	Alpha float64
	// Correction is BH by default.
	Correction Correction
}

// Judged is one row with the gate's view of it.
type Judged struct {
	Row
	// Gated says whether the unit is judged at all (Gated).
	Gated bool
	// Q is the p-value adjusted for the number of gated tests (1 when not gated).
	Q float64
	// Regression: gated, Q < Alpha, and worse by more than the threshold.
	Regression bool
	// Changed: gated and Q < Alpha, in either direction.
	Changed bool
}

// Judge adjusts the p-values of the gated rows for their number and marks
// the regressions; it returns every row and the regressions.
func Judge(rows []Row, o GateOptions) (all, bad []Judged) {
	if o.Alpha <= 0 {
		o.Alpha = 0.05
	}
	if o.Correction == "" {
		o.Correction = BH
	}
	all = make([]Judged, len(rows))
	var idx []int
	for i, r := range rows {
		all[i] = Judged{Row: r, Q: 1, Gated: Gated(r.Unit)}
		if all[i].Gated {
			idx = append(idx, i)
		}
	}
	ps := make([]float64, len(idx))
	for j, i := range idx {
		ps[j] = rows[i].P
	}
	qs := Adjust(ps, o.Correction)
	for j, i := range idx {
		a := &all[i]
		a.Q = qs[j]
		a.Changed = a.Q < o.Alpha
		a.Regression = a.Changed && a.worseBy(o.ThresholdPct)
		if a.Regression {
			bad = append(bad, *a)
		}
	}
	return all, bad
}

// Gate returns the rows that got worse by more than thresholdPct percent,
// significantly after the default correction (Benjamini-Hochberg at 0.05).
func Gate(rows []Row, thresholdPct float64) []Row {
	_, bad := Judge(rows, GateOptions{ThresholdPct: thresholdPct})
	out := make([]Row, len(bad))
	for i, b := range bad {
		out[i] = b.Row
	}
	return out
}

// Adjust returns p-values adjusted for len(ps) tests: Benjamini-Hochberg's
// step-up q-values, Holm's step-down values, or ps unchanged. A test is
// significant at level alpha when its adjusted value is below alpha.
func Adjust(ps []float64, c Correction) []float64 {
	m := len(ps)
	out := make([]float64, m)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return ps[order[a]] < ps[order[b]] })
	switch c {
	case BH:
		running := 1.0
		for k := m - 1; k >= 0; k-- {
			i := order[k]
			running = min(running, ps[i]*float64(m)/float64(k+1))
			out[i] = running
		}
	case Holm:
		running := 0.0
		for k := 0; k < m; k++ {
			i := order[k]
			running = max(running, min(1, ps[i]*float64(m-k)))
			out[i] = running
		}
	default:
		copy(out, ps)
	}
	return out
}
