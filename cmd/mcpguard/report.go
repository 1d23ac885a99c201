package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/mcpguard/mcpguard/lab/report"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func cmdReport(ctx context.Context, s stdio, args []string) error {
	fs := newFlags(s, "report", "[flags]",
		`Draws the study's figures (PNG, SVG and PDF), a Markdown summary and one page to
open (index.html: the tables with their figures, read from the file system, no
server) with the same numbers, from benchmark output (go test -bench) and eval
results (mcpguard eval --json). Each input is optional; what is given is drawn:

  --std/--cvm   BenchmarkAgent in a standard and a confidential VM: the
                dashboard per guard config (figure 2): each phase's share of an
                iteration by tool-output size, the medians on a log axis, the
                overhead with intervals, significant changes marked; --std
                alone: a table of one environment's phases
  --firewall    BenchmarkFirewall: what each scanner adds per iteration (figures 3, 4)
  --eval        mcpguard eval --json: APR, V-APR, FPR per config and per category (table 1)
  --guard       BenchmarkGuard: the benign call per config, its latency added
                over direct and C0 (paired differences with intervals)
  --run         key: value lines about the run (machine, commit, stage times),
                shown at the top of the summary and the page

Example: mcpguard report --std std.txt --cvm cvm.txt --eval eval.json --out report/`)
	std := fs.String("std", "", "BenchmarkAgent output from the standard VM")
	cvm := fs.String("cvm", "", "BenchmarkAgent output from the confidential VM")
	fw := fs.String("firewall", "", "BenchmarkFirewall output")
	guardBench := fs.String("guard", "", "BenchmarkGuard output")
	runFile := fs.String("run", "", "`file` of key: value lines describing the run")
	var evals listFlag
	fs.Var(&evals, "eval", "mcpguard eval --json `file` (repeatable)")
	filter := fs.String("agent-filter", "", "only agent sub-benchmarks matching this `regexp` in the CVM dashboard")
	out := fs.String("out", "report", "output `dir`ectory")
	sample := fs.String("sample", "", "the inputs are sample data: this `note` (what they are) goes in the summary, and every figure title says [sample data]")
	formats := fs.String("formats", strings.Join(report.DefaultFormats(), ","), "figure formats")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cvm != "" && *std == "" {
		return fmt.Errorf("%w: --cvm needs --std to compare with", errUsage)
	}
	in := report.Inputs{Sample: *sample}
	var err error
	if *filter != "" {
		if in.AgentFilter, err = regexp.Compile(*filter); err != nil {
			return fmt.Errorf("%w: --agent-filter: %v", errUsage, err)
		}
	}
	read := func(path string) (*report.Bench, error) {
		if path == "" {
			return nil, nil
		}
		return report.ReadBench(path)
	}
	if in.Std, err = read(*std); err != nil {
		return err
	}
	if in.CVM, err = read(*cvm); err != nil {
		return err
	}
	if in.Firewall, err = read(*fw); err != nil {
		return err
	}
	if in.Guard, err = read(*guardBench); err != nil {
		return err
	}
	if *runFile != "" {
		if in.Run, err = report.ReadRun(*runFile); err != nil {
			return err
		}
	}
	for _, e := range evals {
		reps, err := report.ReadEval(e)
		if err != nil {
			return err
		}
		in.Eval = append(in.Eval, reps...)
	}
	if cfgs := report.ShareViability(in.Eval); len(cfgs) > 0 {
		fmt.Fprintf(s.err, "report: V-APR of %s from the C0 run given (they ran without one)\n", strings.Join(cfgs, ", "))
	}
	if in.Std == nil && in.Firewall == nil && in.Guard == nil && len(in.Eval) == 0 {
		return fmt.Errorf("%w: nothing to draw: give --std/--cvm, --firewall, --guard or --eval", errUsage)
	}
	files, err := report.Write(in, *out, strings.Split(*formats, ","))
	for _, f := range files {
		fmt.Fprintln(s.out, f)
	}
	return err
}
