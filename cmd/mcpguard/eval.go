package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/guard/runtime"
	"github.com/mcpguard/mcpguard/lab/eval"
	"github.com/mcpguard/mcpguard/lab/servers"
)

func cmdEval(ctx context.Context, s stdio, args []string) error {
	if len(args) > 0 && args[0] == "aggregate" {
		return cmdEvalAggregate(s, args[1:])
	}
	o, err := parseEvalFlags(s, args)
	if err != nil {
		return err
	}
	cases, err := o.loadCases()
	if err != nil {
		return err
	}
	r, cleanup, err := o.runner(ctx, s, cases)
	defer cleanup()
	if err != nil {
		return err
	}
	runDir := filepath.Join(o.resultsDir, o.runID)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return err
	}
	reports, errorsSeen, err := o.runConfigs(ctx, s, r, cases, runDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "%d cases (%s), run %s\n", len(cases), o.casesDir, o.runID)
	if err := eval.WriteTable(s.out, reports); err != nil {
		return err
	}
	fmt.Fprintf(s.err, "reports in %s\n", runDir)
	if o.jsonOut != "" {
		if err := writeJSONFile(o.jsonOut, reports); err != nil {
			return err
		}
	}
	if errorsSeen > 0 {
		return &exitCode{1, fmt.Errorf("%d harness errors: the run is not a valid measurement (see the reports' \"error\" fields)", errorsSeen)}
	}
	return nil
}

// evalOptions are mcpguard eval's flags, checked.
type evalOptions struct {
	configs                              []string
	casesDir, jsonOut, runID, resultsDir string
	only, auditFile, serverBin           string
	smoke, verbose                       bool
	parallel                             int
	scale                                float64
}

func parseEvalFlags(s stdio, args []string) (*evalOptions, error) {
	fs := newFlags(s, "eval", "[flags]  |  mcpguard eval aggregate [--json FILE] REPORT.json...",
		"Runs the case corpus under one or all defence configs and prints the APR / V-APR / FPR\n"+
			"table (config, APR, V-APR, viable attacks blocked, FPR, attacks blocked per category).\n"+
			"Each config's report is kept as results/<run-id>/<config>.json. V-APR counts the attacks\n"+
			"that succeed under C0, so C0 is run first whenever another config is asked for.\n"+
			"Configs that cannot run here (e.g. BPF LSM refused by the kernel) are listed as skipped.\n"+
			"`mcpguard eval aggregate results/*/C-full.json` averages N runs (mean ± sd, flaky cases).")
	o := &evalOptions{}
	config := fs.String("config", "all", "config `names` to run (comma-separated), or all: "+strings.Join(configs.Names(), ", "))
	fs.StringVar(&o.casesDir, "cases", "testdata/cases", "case `dir`ectory (one JSON file per case)")
	fs.StringVar(&o.jsonOut, "json", "", "also write all reports (per-case verdicts) to `file` as a JSON array")
	fs.StringVar(&o.runID, "run-id", "", "name of this run under the results dir (default: UTC timestamp)")
	fs.StringVar(&o.resultsDir, "results", "results", "`dir`ectory that keeps runs (results/<run-id>/<config>.json)")
	fs.BoolVar(&o.smoke, "smoke", false, "run the smoke subset only (one server, a handful of cases)")
	fs.IntVar(&o.parallel, "parallel", eval.DefaultParallel(), "cases run at once")
	fs.StringVar(&o.only, "case", "", "run only the cases whose ID has this `prefix` (e.g. XL-)")
	fs.StringVar(&o.auditFile, "audit", "", "append the guard's audit events to `file`")
	fs.BoolVar(&o.verbose, "v", false, "copy every server's stderr to stderr")
	fs.Float64Var(&o.scale, "timeout-scale", 1, "multiply every time bound (10 s per call, 30 s per case, settle times) by `f`, for slow hosts such as a TCG VM")
	fs.StringVar(&o.serverBin, "server-bin", os.Getenv("MCPGUARD_SERVER_BIN"), "`dir`ectory of prebuilt Go servers (go build -o DIR/ ./testdata/servers/...); default: build into a temp dir")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q (did you mean 'mcpguard eval aggregate'?)", errUsage, fs.Args())
	}
	var err error
	if o.configs, err = evalConfigs(*config); err != nil {
		return nil, err
	}
	if o.parallel < 1 {
		return nil, fmt.Errorf("%w: --parallel must be at least 1", errUsage)
	}
	if o.runID == "" {
		o.runID = time.Now().UTC().Format("20060102T150405Z")
	}
	if strings.ContainsAny(o.runID, `/\`) || o.runID == "." || o.runID == ".." {
		return nil, fmt.Errorf("%w: --run-id %q must be a plain name", errUsage, o.runID)
	}
	if o.scale <= 0 {
		return nil, fmt.Errorf("%w: --timeout-scale must be positive", errUsage)
	}
	return o, nil
}

// evalConfigs is --config's list: all configs, or the ones named, with C0
// first (V-APR counts the attacks that succeed under it).
func evalConfigs(list string) ([]string, error) {
	if list == "all" {
		return configs.Names(), nil
	}
	var cfgs []string
	for _, c := range strings.Split(list, ",") {
		if !slices.Contains(configs.Names(), c) {
			return nil, fmt.Errorf("%w: unknown config %q (known: %s, all)", errUsage, c, strings.Join(configs.Names(), ", "))
		}
		if !slices.Contains(cfgs, c) {
			cfgs = append(cfgs, c)
		}
	}
	if !slices.Contains(cfgs, configs.C0) {
		cfgs = append([]string{configs.C0}, cfgs...)
	}
	return cfgs, nil
}

// loadCases are the corpus's cases, less those --smoke and --case leave
// out.
func (o *evalOptions) loadCases() ([]*eval.Case, error) {
	cases, err := eval.LoadCases(o.casesDir, servers.Names())
	if err != nil {
		return nil, err
	}
	if o.smoke {
		cases = eval.Smoke(cases)
	}
	if o.only != "" {
		cases = slices.DeleteFunc(cases, func(c *eval.Case) bool { return !strings.HasPrefix(c.ID, o.only) })
		if len(cases) == 0 {
			return nil, fmt.Errorf("%w: no case ID starts with %q", errUsage, o.only)
		}
	}
	return cases, nil
}

// runner is the harness for the run: the cases' servers built (unless
// --server-bin has them), a work directory, the audit log. cleanup, never
// nil, removes and closes what runner made.
func (o *evalOptions) runner(ctx context.Context, s stdio, cases []*eval.Case) (r *eval.Runner, cleanup func(), err error) {
	var undo []func()
	cleanup = func() {
		for _, f := range slices.Backward(undo) {
			f()
		}
	}
	root, err := servers.Root()
	if err != nil {
		return nil, cleanup, err
	}
	binDir := o.serverBin
	if binDir == "" {
		if binDir, err = os.MkdirTemp("", "mcpguard-servers-"); err != nil {
			return nil, cleanup, err
		}
		undo = append(undo, func() { os.RemoveAll(binDir) })
		fmt.Fprintf(s.err, "building servers...\n")
		if err := servers.Build(ctx, binDir, usedServers(cases)...); err != nil {
			return nil, cleanup, err
		}
	}
	workDir, err := os.MkdirTemp("", "mcpguard-eval-")
	if err != nil {
		return nil, cleanup, err
	}
	undo = append(undo, func() { os.RemoveAll(workDir) })
	r = &eval.Runner{Root: root, BinDir: binDir, WorkDir: workDir, RuntimeCache: runtime.NewCache()}
	r.Scale(o.scale)
	if o.verbose {
		r.Verbose = s.err
	}
	if o.auditFile != "" {
		f, err := os.OpenFile(o.auditFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, cleanup, err
		}
		undo = append(undo, func() { f.Close() })
		r.Audit = audit.New(f)
	}
	return r, cleanup, nil
}

// runConfigs runs the cases under each config in turn, keeping each
// config's report in runDir as it is done; errorsSeen counts the harness
// errors.
func (o *evalOptions) runConfigs(ctx context.Context, s stdio, r *eval.Runner, cases []*eval.Case, runDir string) (reports []*eval.Report, errorsSeen int, err error) {
	var viable map[string]bool
	for _, cfg := range o.configs {
		rep := &eval.Report{RunID: o.runID, Config: cfg, Time: time.Now().UTC(), Host: eval.ThisHost()}
		start := time.Now()
		results, err := r.RunConfig(ctx, cfg, cases, o.parallel, progress(s, cfg))
		if isTerminal(s.err) {
			fmt.Fprintf(s.err, "\r\033[K") // the progress line
		}
		switch {
		case errors.Is(err, configs.ErrUnavailable):
			rep.Skipped = err.Error()
			fmt.Fprintf(s.err, "[%s] skipped: %v\n", cfg, err)
		case err != nil:
			return nil, 0, fmt.Errorf("config %s: %w", cfg, err)
		default:
			if cfg == configs.C0 {
				viable = eval.Viable(results)
			}
			rep.Results = results
			rep.Summary = eval.Summarize(cfg, results, viable)
			errorsSeen += rep.Summary.Errors
			fmt.Fprintf(s.err, "[%s] %d cases in %.1fs\n", cfg, len(results), time.Since(start).Seconds())
		}
		reports = append(reports, rep)
		if err := writeJSONFile(filepath.Join(runDir, cfg+".json"), rep); err != nil {
			return nil, 0, err
		}
	}
	return reports, errorsSeen, nil
}

// progress reports each case as it is done: on a terminal one line
// redrawn, else a line per case.
func progress(s stdio, cfg string) func(done, total int, res *eval.Result) {
	if !isTerminal(s.err) {
		return func(done, total int, res *eval.Result) {
			fmt.Fprintf(s.err, "[%s] %d/%d %s %s (%.0f ms)\n", cfg, done, total, res.ID, res.Verdict, res.DurationMS)
		}
	}
	return func(done, total int, res *eval.Result) {
		fmt.Fprintf(s.err, "\r\033[K[%s] %d/%d %s %s", cfg, done, total, res.ID, res.Verdict)
	}
}

func cmdEvalAggregate(s stdio, args []string) error {
	fs := newFlags(s, "eval aggregate", "[--json FILE] REPORT.json...",
		"Averages N runs of the same config(s), as the paper's table averages five runs: APR, V-APR\n"+
			"and FPR as mean ± sample standard deviation, and the cases whose verdict changed between runs.\n"+
			"Example: mcpguard eval aggregate results/*/C-full.json")
	jsonOut := fs.String("json", "", "also write the aggregates to `file` (JSON)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: no report files (e.g. results/*/C0.json)", errUsage)
	}
	var reports []*eval.Report
	for _, p := range fs.Args() {
		r, err := eval.ReadReport(p)
		if err != nil {
			return err
		}
		reports = append(reports, r)
	}
	aggs := eval.AggregateReports(reports)
	if len(aggs) == 0 {
		return errors.New("every report given is of a skipped config")
	}
	if err := eval.WriteAggregateTable(s.out, aggs); err != nil {
		return err
	}
	if *jsonOut != "" {
		return writeJSONFile(*jsonOut, aggs)
	}
	return nil
}

// isTerminal reports whether w is a terminal (progress redraws one line)
// rather than a file or pipe (one line per case).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func usedServers(cases []*eval.Case) []string {
	var out []string
	for _, c := range cases {
		if !slices.Contains(out, c.Server) {
			out = append(out, c.Server)
		}
	}
	return out
}

func writeJSONFile(path string, v any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := eval.WriteJSON(f, v); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
