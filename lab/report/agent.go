package report

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// AgentRow is one BenchmarkAgent sub-benchmark (a tool-output size and a
// guard config) in one environment: the medians of its phases.
type AgentRow struct {
	Size, Guard string
	Phases      map[string]Summary
}

// AgentRows reads BenchmarkAgent's sub-benchmarks whose names match filter
// (all when nil), in file order.
func AgentRows(b *Bench, filter *regexp.Regexp) []AgentRow {
	var rows []AgentRow
	idx := map[string]int{}
	for _, k := range b.Keys {
		if !strings.HasPrefix(k.Name, "Agent/") || !slices.Contains(sharePhases, k.Unit) || (filter != nil && !filter.MatchString(k.Name)) {
			continue
		}
		i, ok := idx[k.Name]
		if !ok {
			pp := parts(k.Name)
			i = len(rows)
			idx[k.Name] = i
			rows = append(rows, AgentRow{Size: pp["size"], Guard: pp["guard"], Phases: map[string]Summary{}})
		}
		rows[i].Phases[k.Unit] = Summarize(b.Samples[k])
	}
	return rows
}

// AgentFigure draws one environment's agent iteration split into its
// phases (their medians stacked), a bar per guard config, a panel per
// tool-output size: the guards differ only in the tool phase, which the
// model's phases dwarf.
func AgentFigure(rows []AgentRow, env, sample, dir string, formats []string) ([]string, error) {
	sizes := distinct(rows, func(r AgentRow) string { return r.Size })
	guards := distinct(rows, func(r AgentRow) string { return r.Guard })
	if len(rows) == 0 {
		return nil, fmt.Errorf("agent figure: %w", ErrNoResults)
	}
	st := stack{
		sizes: sizes, bars: guards, parts: sharePhases,
		value: func(size, guard, part string) float64 {
			for _, r := range rows {
				if r.Size == size && r.Guard == guard {
					return r.Phases[part].Center
				}
			}
			return 0
		},
		title: func(size string) string { return "Output " + size + " (" + env + ")" },
		label: func(guard string) string { return strings.ReplaceAll(guard, "-landlock", "\n-landlock") },
	}
	return st.draw(sample, dir, "agent-phases", formats)
}

// distinct returns key of each row, each value once, in the order first seen.
func distinct[R any](rows []R, key func(R) string) []string {
	var out []string
	for _, r := range rows {
		if k := key(r); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}
