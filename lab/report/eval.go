package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/lab/eval"
)

// ErrNoReports is returned for an eval file that holds no config report.
var ErrNoReports = errors.New("no eval reports")

// ReadEval reads what `mcpguard eval --json` wrote (an array of reports) or
// one kept report (results/<run-id>/<config>.json).
func ReadEval(path string) ([]*eval.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read eval: %w", err)
	}
	b = bytes.TrimSpace(b)
	var reps []*eval.Report
	switch {
	case len(b) == 0:
		return nil, fmt.Errorf("read eval %s: %w (empty file)", path, ErrNoReports)
	case b[0] == '[':
		if err := json.Unmarshal(b, &reps); err != nil {
			return nil, fmt.Errorf("read eval %s: %w", path, err)
		}
	default:
		var r eval.Report
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("read eval %s: %w", path, err)
		}
		reps = []*eval.Report{&r}
	}
	for i, r := range reps {
		if r == nil || r.Config == "" {
			return nil, fmt.Errorf("read eval %s: report %d has no config (not an eval report?)", path, i)
		}
	}
	if len(reps) == 0 {
		return nil, fmt.Errorf("read eval %s: %w", path, ErrNoReports)
	}
	return reps, nil
}

// SortReports orders reports as the study's table does: the six configs
// first, in their order, then any others by name. Skipped configs are
// dropped: they have no figures.
func SortReports(reps []*eval.Report) []*eval.Report {
	order := configs.Names()
	idx := func(name string) int {
		if i := slices.Index(order, name); i >= 0 {
			return i
		}
		return len(order)
	}
	out := make([]*eval.Report, 0, len(reps))
	for _, r := range reps {
		if r.Skipped == "" {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b *eval.Report) int {
		if d := idx(a.Config) - idx(b.Config); d != 0 {
			return d
		}
		switch {
		case a.Config < b.Config:
			return -1
		case a.Config > b.Config:
			return 1
		}
		return 0
	})
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func writeFile(path string, b []byte) error {
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ShareViability fills in V-APR for reports that ran without C0 (the BPF
// configs, run on their own in a VM) from a C0 report among reps: a case
// is viable when its attack succeeds with no guard, wherever the guarded
// configs ran. It returns the configs it recomputed. Without a C0 report,
// or where a report already has its viability, nothing changes.
func ShareViability(reps []*eval.Report) []string {
	var viable map[string]bool
	for _, r := range reps {
		if r.Config == configs.C0 && r.Skipped == "" && len(r.Results) > 0 {
			viable = eval.Viable(r.Results)
			break
		}
	}
	if viable == nil {
		return nil
	}
	var done []string
	for _, r := range reps {
		if r.Skipped != "" || len(r.Results) == 0 || r.Summary.ViableBlocked.Total > 0 || r.Summary.Blocked.Total == 0 {
			continue
		}
		r.Summary = eval.Summarize(r.Config, r.Results, viable)
		done = append(done, r.Config)
	}
	return done
}

// Label names a report's row: its config, and its run too when another
// report of the same config is in reps (C0 run on the host and again in
// the VM beside the BPF configs).
func Label(r *eval.Report, reps []*eval.Report) string {
	for _, o := range reps {
		if o != r && o.Config == r.Config && o.Skipped == "" && r.Skipped == "" {
			return r.Config + " (" + r.RunID + ")"
		}
	}
	return r.Config
}

// SkippedNotes returns, per config that was skipped in every run given,
// why (a config skipped on the host but run in the VM has no note).
func SkippedNotes(reps []*eval.Report) []string {
	ran := map[string]bool{}
	for _, r := range reps {
		if r.Skipped == "" {
			ran[r.Config] = true
		}
	}
	var notes []string
	seen := map[string]bool{}
	for _, r := range reps {
		if r.Skipped != "" && !ran[r.Config] && !seen[r.Config] {
			seen[r.Config] = true
			notes = append(notes, r.Config+" was skipped: "+r.Skipped)
		}
	}
	return notes
}
