package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"text/tabwriter"

	"github.com/mcpguard/mcpguard/report"
)

func cmdGate(ctx context.Context, s stdio, args []string) error {
	fs := newFlags(s, "gate", "[flags] BASE NEW",
		`Compares two go test -bench outputs with benchstat's statistics (median,
Mann-Whitney U-test at alpha 0.05) and fails when a metric got significantly
worse by more than --threshold percent. Times, bytes and allocations are
worse when higher; rates (.../s, gflops) when lower. Run each side with
-count 6 or more, or no change can reach significance.

Exit status: 0 no regression, 1 a regression (listed), 2 bad input or usage.

In CI:  go test -run '^$' -bench Guard -count 10 . > new.txt
        mcpguard gate --threshold 10 base.txt new.txt`)
	threshold := fs.Float64("threshold", 5, "allowed slowdown in `percent`")
	filter := fs.String("filter", "", "only benchmarks whose name matches this `regexp`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("%w: want BASE and NEW files", errUsage)
	}
	var keep func(report.Key) bool
	if *filter != "" {
		re, err := regexp.Compile(*filter)
		if err != nil {
			return fmt.Errorf("%w: --filter: %v", errUsage, err)
		}
		keep = func(k report.Key) bool { return re.MatchString(k.Name) }
	}
	base, err := report.ReadBench(fs.Arg(0))
	if err != nil {
		return &exitCode{code: 2, err: err}
	}
	cur, err := report.ReadBench(fs.Arg(1))
	if err != nil {
		return &exitCode{code: 2, err: err}
	}
	rows := report.Compare(base, cur, keep)
	if len(rows) == 0 {
		return &exitCode{code: 2, err: errors.New("the two files share no benchmark")}
	}
	tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "benchmark\tunit\tbase\tnew\tdelta\tp\tverdict\t")
	for _, r := range rows {
		verdict := "~"
		switch {
		case r.Worse(*threshold):
			verdict = "REGRESSION"
		case r.Significant:
			verdict = "changed"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.4g\t%.4g\t%+.1f%%\t%.3f\t%s\t\n", r.Name, r.Unit, r.Base.Center, r.New.Center, r.DeltaPct, r.P, verdict)
	}
	tw.Flush()
	if bad := report.Gate(rows, *threshold); len(bad) > 0 {
		return &exitCode{code: 1, err: fmt.Errorf("%d metric(s) significantly worse by more than %.1f%%", len(bad), *threshold)}
	}
	return nil
}
