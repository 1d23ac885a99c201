package mcpguard_test

import (
	"slices"
	"testing"
)

// The latency benchmarks (BenchmarkGuard, BenchmarkStandalone) measure
// rows in rounds: every round calls every row once, in rotating order, so
// that every row sees the same history before each measured call (on VMs a
// session's latency depends on how long its processes slept) and the
// machine's drift falls on all alike; a row's cost against another is the
// median of their per-round differences.

// latencies holds each row's call latencies (ns), one per round.
type latencies [][]float64

// measureRounds runs rounds while more() says so, each calling call(i)
// for the rows 0..rows-1 in rotating order.
func measureRounds(rows int, more func() bool, call func(i int) float64) latencies {
	lat := make(latencies, rows)
	for n := 0; more(); n++ {
		for k := range rows {
			i := (n + k) % rows
			lat[i] = append(lat[i], call(i))
		}
	}
	return lat
}

// times is a loop condition for measureRounds: n rounds.
func times(n int) func() bool {
	return func() bool { n--; return n >= 0 }
}

// over is the median of the per-round differences between row i and row
// base.
func (l latencies) over(i, base int) float64 {
	d := make([]float64, len(l[i]))
	for k := range d {
		d[k] = l[i][k] - l[base][k]
	}
	return median(sorted(d))
}

// quantile is row i's p-quantile (lower, no interpolation).
func (l latencies) quantile(i int, p float64) float64 {
	own := sorted(slices.Clone(l[i]))
	return own[int(p*float64(len(own)-1))]
}

func median(sorted []float64) float64 { return sorted[(len(sorted)-1)/2] }

func sorted(v []float64) []float64 { slices.Sort(v); return v }

// reportMetric reports v as a benchmark metric, or logs it in a test.
func reportMetric(tb testing.TB, v float64, unit string) {
	tb.Helper()
	if b, ok := tb.(*testing.B); ok {
		b.ReportMetric(v, unit)
		return
	}
	tb.Logf("%s %.4g", unit, v)
}
