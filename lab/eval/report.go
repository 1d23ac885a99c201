package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcpguard/mcpguard/guard/configs"
)

// Count is a part of a whole: blocked of attacks, false positives of benign.
type Count struct {
	N     int `json:"n"`
	Total int `json:"total"`
}

// Rate is N/Total, NaN when Total is 0.
func (c Count) Rate() float64 {
	if c.Total == 0 {
		return math.NaN()
	}
	return float64(c.N) / float64(c.Total)
}

func (c Count) String() string { return fmt.Sprintf("%d/%d", c.N, c.Total) }

// Summary is one config's row of the table.
type Summary struct {
	Config string `json:"config"`
	// Blocked counts attack cases whose oracle did not fire (APR).
	Blocked Count `json:"blocked"`
	// ViableBlocked counts, among the attacks that succeed under C0, those
	// blocked here (V-APR). Total is 0 when no C0 run was given.
	ViableBlocked Count `json:"viable_blocked"`
	// FalsePositives counts benign cases whose expected result did not come back (FPR).
	FalsePositives Count `json:"false_positives"`
	// PerCategory: blocked/attacks for attack categories, false
	// positives/cases for benign.
	PerCategory map[string]Count `json:"per_category"`
	// Errors counts harness failures (verdict "error"); they are neither
	// blocked nor passed, and a run with errors is not a valid measurement.
	Errors int `json:"errors"`
	// Unjudged counts cases whose config could not be built because the
	// server has no policy or manifest file (a corpus gap, not a verdict).
	Unjudged int `json:"unjudged"`
	// Denied counts cases where the guard refused at least one call
	// (informational only).
	Denied int `json:"denied"`
	// BenignNotStarted counts benign cases whose server did not even start
	// (Result.StartError): a sandbox that kills benign servers at start is
	// a broken setup (e.g. BPF rules on overlayfs), and the row's FPR then
	// measures the setup, not the guard.
	BenignNotStarted int `json:"benign_not_started,omitempty"`
}

// APR, VAPR and FPR are the table's rates.
func (s Summary) APR() float64  { return s.Blocked.Rate() }
func (s Summary) VAPR() float64 { return s.ViableBlocked.Rate() }
func (s Summary) FPR() float64  { return s.FalsePositives.Rate() }

// Viable returns the IDs of attack cases that succeeded in a C0 run.
func Viable(c0 []*Result) map[string]bool {
	v := map[string]bool{}
	for _, r := range c0 {
		if r != nil && r.Attack && r.Verdict == Succeeded {
			v[r.ID] = true
		}
	}
	return v
}

// Summarize computes a config's row. viable (from Viable on a C0 run) may
// be nil, then V-APR is left unknown.
func Summarize(config string, results []*Result, viable map[string]bool) Summary {
	s := Summary{Config: config, PerCategory: map[string]Count{}}
	for _, r := range results {
		if r == nil {
			continue
		}
		if len(r.Denied) > 0 {
			s.Denied++
		}
		if r.Verdict == Error {
			if r.NoPolicy {
				s.Unjudged++
			} else {
				s.Errors++
			}
			continue
		}
		cat := s.PerCategory[r.Category]
		cat.Total++
		if r.Attack {
			s.Blocked.Total++
			if r.Verdict == Blocked {
				s.Blocked.N++
				cat.N++
			}
			if viable[r.ID] {
				s.ViableBlocked.Total++
				if r.Verdict == Blocked {
					s.ViableBlocked.N++
				}
			}
		} else {
			s.FalsePositives.Total++
			if r.Verdict == FalsePositive {
				s.FalsePositives.N++
				cat.N++
			}
			if r.StartError != "" {
				s.BenignNotStarted++
			}
		}
		s.PerCategory[r.Category] = cat
	}
	return s
}

// Report is one run of one config: what `mcpguard eval --json` writes and
// what aggregation reads.
type Report struct {
	RunID   string    `json:"run_id"`
	Config  string    `json:"config"`
	Time    time.Time `json:"time"`
	Host    Host      `json:"host"`
	Summary Summary   `json:"summary"`
	Results []*Result `json:"results"`
	// Skipped holds the reason when the config could not run here.
	Skipped string `json:"skipped,omitempty"`
}

// Host describes where a run happened.
type Host struct {
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	CPUs   int    `json:"cpus"`
	Kernel string `json:"kernel,omitempty"`
}

// ThisHost describes the running machine.
func ThisHost() Host {
	h := Host{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	return h
}

// WriteJSON writes r indented.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ReadReport reads a report written by WriteJSON.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read report %s: %w", path, err)
	}
	if r.Config == "" {
		return nil, fmt.Errorf("read report %s: no config (not an eval report?)", path)
	}
	return &r, nil
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

// attackCategories are the per-category columns of the table.
func attackCategories() []string {
	var out []string
	for _, c := range Categories() {
		if c != Benign {
			out = append(out, c)
		}
	}
	return out
}

// WriteTable prints the paper's Table 1: per config APR, V-APR, viable
// blocked, FPR, then blocked/attacks per category. Skipped configs get a
// line with the reason.
func WriteTable(w io.Writer, reports []*Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"config", "APR", "V-APR", "viable blocked", "FPR"}
	head = append(head, attackCategories()...)
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	var notes []string
	for _, r := range reports {
		if r.Skipped != "" {
			notes = append(notes, fmt.Sprintf("%s: skipped: %s", r.Config, r.Skipped))
			continue
		}
		s := r.Summary
		fpr := fmt.Sprintf("%s (%s)", pct(s.FPR()), s.FalsePositives)
		if s.BenignNotStarted > 0 {
			fpr = fmt.Sprintf("INVALID (%d/%d benign did not start)", s.BenignNotStarted, s.FalsePositives.Total)
			notes = append(notes, fmt.Sprintf("FAILED: %s: %d of %d benign cases did not start: the setup is broken "+
				"(the sandbox kills benign servers at start), so this row measures the setup, not the guard; "+
				"see the cases' start_error in --json (e.g. BPF rules on overlayfs, docs/l3.md)",
				s.Config, s.BenignNotStarted, s.FalsePositives.Total))
		}
		row := []string{
			s.Config,
			fmt.Sprintf("%s (%s)", pct(s.APR()), s.Blocked),
			pct(s.VAPR()),
			s.ViableBlocked.String(),
			fpr,
		}
		for _, c := range attackCategories() {
			row = append(row, s.PerCategory[c].String())
		}
		if s.Errors > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d harness errors (not a valid measurement)", s.Config, s.Errors))
		}
		if s.Unjudged > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d cases not judged (server without policy/manifest file)", s.Config, s.Unjudged))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	return nil
}

// Stat is a mean with its spread over runs.
type Stat struct {
	Mean   float64 `json:"mean"`
	StdDev float64 `json:"stddev"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func stat(xs []float64) Stat {
	var s Stat
	if len(xs) == 0 {
		return Stat{Mean: math.NaN(), StdDev: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	s.Min, s.Max = xs[0], xs[0]
	for _, x := range xs {
		s.Mean += x
		s.Min = math.Min(s.Min, x)
		s.Max = math.Max(s.Max, x)
	}
	s.Mean /= float64(len(xs))
	if len(xs) > 1 {
		for _, x := range xs {
			s.StdDev += (x - s.Mean) * (x - s.Mean)
		}
		s.StdDev = math.Sqrt(s.StdDev / float64(len(xs)-1))
	}
	return s
}

func (s Stat) pct() string {
	if math.IsNaN(s.Mean) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%% ± %.1f", 100*s.Mean, 100*s.StdDev)
}

// Aggregate is N runs of one config: means with spread (sample standard
// deviation, min, max), as the paper's table averages five runs.
type Aggregate struct {
	Config string   `json:"config"`
	Runs   []string `json:"runs"`
	APR    Stat     `json:"apr"`
	VAPR   Stat     `json:"v_apr"`
	FPR    Stat     `json:"fpr"`
	// Flaky lists cases whose verdict differed between runs.
	Flaky []string `json:"flaky,omitempty"`
}

// AggregateReports groups reports by config (skipped ones are left out)
// and computes each group's statistics, in table order (configs.Names),
// configs this build does not know last.
func AggregateReports(reports []*Report) []Aggregate {
	var order []string
	groups := map[string][]*Report{}
	for _, r := range reports {
		if r.Skipped != "" {
			continue
		}
		if _, ok := groups[r.Config]; !ok {
			order = append(order, r.Config)
		}
		groups[r.Config] = append(groups[r.Config], r)
	}
	rank := func(cfg string) int {
		if i := slices.Index(configs.Names(), cfg); i >= 0 {
			return i
		}
		return len(configs.Names())
	}
	slices.SortStableFunc(order, func(a, b string) int { return rank(a) - rank(b) })
	var out []Aggregate
	for _, cfg := range order {
		rs := groups[cfg]
		a := Aggregate{Config: cfg}
		var apr, vapr, fpr []float64
		verdicts := map[string]map[string]bool{}
		for _, r := range rs {
			a.Runs = append(a.Runs, r.RunID)
			apr = append(apr, r.Summary.APR())
			if r.Summary.ViableBlocked.Total > 0 {
				vapr = append(vapr, r.Summary.VAPR())
			}
			fpr = append(fpr, r.Summary.FPR())
			for _, res := range r.Results {
				if verdicts[res.ID] == nil {
					verdicts[res.ID] = map[string]bool{}
				}
				verdicts[res.ID][res.Verdict] = true
			}
		}
		a.APR, a.VAPR, a.FPR = stat(apr), stat(vapr), stat(fpr)
		for id, v := range verdicts {
			if len(v) > 1 {
				a.Flaky = append(a.Flaky, id)
			}
		}
		sort.Strings(a.Flaky)
		out = append(out, a)
	}
	return out
}

// WriteAggregateTable prints the aggregates: mean ± standard deviation.
func WriteAggregateTable(w io.Writer, aggs []Aggregate) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "config\truns\tAPR\tV-APR\tFPR\tflaky cases")
	for _, a := range aggs {
		flaky := "-"
		if len(a.Flaky) > 0 {
			flaky = strings.Join(a.Flaky, ",")
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", a.Config, len(a.Runs), a.APR.pct(), a.VAPR.pct(), a.FPR.pct(), flaky)
	}
	return tw.Flush()
}

// Golden renders the verdicts of a run as the golden file holds them: one
// "ID verdict" line per case, sorted, so a diff shows which case moved.
func Golden(results []*Result) string {
	lines := make([]string, 0, len(results))
	for _, r := range results {
		if r != nil {
			lines = append(lines, r.ID+" "+r.Verdict)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// ParseGolden reads a golden file into ID -> verdict.
func ParseGolden(b []byte) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("golden line %d: want \"ID verdict\", got %q", i+1, line)
		}
		switch f[1] {
		case Succeeded, Blocked, Passed, FalsePositive:
		default:
			return nil, fmt.Errorf("golden line %d: unknown verdict %q", i+1, f[1])
		}
		out[f[0]] = f[1]
	}
	return out, nil
}
