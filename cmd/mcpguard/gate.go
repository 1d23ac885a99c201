package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/mcpguard/mcpguard/lab/report"
)

func cmdGate(ctx context.Context, s stdio, args []string) error {
	fs := newFlags(s, "gate", "[flags] BASE NEW",
		`Compares two go test -bench outputs with benchstat's statistics (medians,
Mann-Whitney U-tests) and fails when a metric got significantly worse by more
than --threshold percent. Only per-iteration times (…-ns, sec/op) and rates
(…/s) are judged: token counts, sizes and timing-ppm (a cost measured once
per process) are shown, never judged. The p-values are corrected for the
number of metrics judged (Benjamini-Hochberg by default), so sixty noisy
metrics do not yield three false alarms a run. Times are worse when higher,
rates when lower. The files must agree on the configuration lines that
define the experiment (model, model-endpoint, model-shape, model-synthetic,
prompt-nonce, cache-prompt, max-tokens, mcp-server, classifier-endpoint,
goos, goarch, pkg); cpu, kernel and env may differ. Run each side with
-count 8 or more: with 6 runs a side no single metric can reach
significance after the correction.

Each row of BenchmarkAgent and BenchmarkFirewall also reports the machine's
1-minute load average (loadavg, not judged). When the new run's machine was
--load-ratio times as loaded as the base's or more, a slowdown says as much
about the machine as about the code: the gate then reports regressions as
inconclusive (exit 3) instead of failing.

Exit status: 0 no regression, 1 a regression (listed), 2 bad input, usage
or configurations that differ, 3 regressions measured on a machine much more
loaded than the base's (inconclusive).

In CI (scripts/test.sh; testdata/gate/README.md):
  go test -run '^$' -bench 'Agent/size=(1KiB|16KiB)/guard=none$' -model-shape small \
      -benchtime 3x -count 8 . > new.txt
  mcpguard gate testdata/gate/agent.txt new.txt`)
	o := &gateOptions{}
	fs.Float64Var(&o.threshold, "threshold", 25, "allowed slowdown in `percent`")
	fs.Float64Var(&o.alpha, "alpha", 0.05, "level of the corrected tests")
	correction := fs.String("correction", string(report.BH), "multiple-comparison correction: bh (Benjamini-Hochberg), holm or none")
	filter := fs.String("filter", "", "only benchmarks whose name matches this `regexp`")
	ignore := fs.String("ignore-config", "", "comma-separated configuration `keys` allowed to differ")
	fs.Float64Var(&o.loadRatio, "load-ratio", 1.5, "regressions are inconclusive (exit 3) when the new run's load average is this `ratio` of the base's or more (0: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("%w: want BASE and NEW files", errUsage)
	}
	if err := o.check(*correction, *filter, *ignore); err != nil {
		return err
	}
	base, cur, err := readGateFiles(fs.Arg(0), fs.Arg(1), o.ignore)
	if err != nil {
		return err
	}
	rows := report.Compare(base, cur, o.keep)
	if len(rows) == 0 {
		return &exitCode{code: 2, err: errors.New("the two files share no benchmark")}
	}
	all, bad := report.Judge(rows, report.GateOptions{ThresholdPct: o.threshold, Alpha: o.alpha, Correction: o.correction})
	o.writeTable(s, all)
	if lb, lc, ok := report.Loads(base, cur); ok {
		fmt.Fprintf(s.out, "machine load (median 1-minute load average): base %.1f, new %.1f\n", lb, lc)
	}
	if len(bad) > 0 && report.MoreLoaded(base, cur, o.loadRatio) {
		return &exitCode{code: 3, err: fmt.Errorf("inconclusive: %d metric(s) worse by more than %.1f%%, but the new run's machine was at least %gx as loaded as the base's", len(bad), o.threshold, o.loadRatio)}
	}
	if len(bad) > 0 {
		return &exitCode{code: 1, err: fmt.Errorf("%d metric(s) significantly worse by more than %.1f%%", len(bad), o.threshold)}
	}
	return nil
}

// gateOptions are mcpguard gate's flags, checked.
type gateOptions struct {
	threshold, alpha, loadRatio float64
	correction                  report.Correction
	keep                        func(report.Key) bool // nil: every benchmark
	ignore                      []string              // configuration keys allowed to differ
}

// check reads the flags that need more than parsing: --correction,
// --filter and --ignore-config.
func (o *gateOptions) check(correction, filter, ignore string) error {
	o.correction = report.Correction(correction)
	switch o.correction {
	case report.BH, report.Holm, report.NoCorrection:
	default:
		return fmt.Errorf("%w: --correction %q: want bh, holm or none", errUsage, correction)
	}
	if filter != "" {
		re, err := regexp.Compile(filter)
		if err != nil {
			return fmt.Errorf("%w: --filter: %v", errUsage, err)
		}
		o.keep = func(k report.Key) bool { return re.MatchString(k.Name) }
	}
	for _, k := range strings.Split(ignore, ",") {
		if k = strings.TrimSpace(k); k != "" {
			o.ignore = append(o.ignore, k)
		}
	}
	return nil
}

// readGateFiles reads both benchmark outputs and checks that they are the
// same experiment (exit 2 when not).
func readGateFiles(basePath, newPath string, ignore []string) (base, cur *report.Bench, err error) {
	if base, err = report.ReadBench(basePath); err != nil {
		return nil, nil, &exitCode{code: 2, err: err}
	}
	if cur, err = report.ReadBench(newPath); err != nil {
		return nil, nil, &exitCode{code: 2, err: err}
	}
	if err := report.CheckConfig(base, cur, ignore); err != nil {
		return nil, nil, &exitCode{code: 2, err: fmt.Errorf("%s vs %s: %w", basePath, newPath, err)}
	}
	return base, cur, nil
}

// writeTable prints every metric with its verdict, and what q means.
func (o *gateOptions) writeTable(s stdio, all []report.Judged) {
	tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "benchmark\tunit\tbase\tnew\tdelta\tp\tq\tverdict\t")
	for _, r := range all {
		verdict, q := "~", fmt.Sprintf("%.3f", r.Q)
		switch {
		case !r.Gated:
			verdict, q = "not judged", "-"
		case r.Regression:
			verdict = "REGRESSION"
		case r.Changed:
			verdict = "changed"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.4g\t%.4g\t%+.1f%%\t%.3f\t%s\t%s\t\n", r.Name, r.Unit, r.Base.Center, r.New.Center, r.DeltaPct, r.P, q, verdict)
	}
	tw.Flush()
	fmt.Fprintf(s.out, "q: p-value corrected (%s) over the %d judged metrics; a regression is q < %g and worse by more than %g%%\n",
		o.correction, countGated(all), o.alpha, o.threshold)
}

func countGated(rows []report.Judged) int {
	n := 0
	for _, r := range rows {
		if r.Gated {
			n++
		}
	}
	return n
}
