package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/mcpguard/mcpguard/eval"
	"github.com/mcpguard/mcpguard/guard/configs"
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
