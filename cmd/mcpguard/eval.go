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
	"github.com/mcpguard/mcpguard/internal/eval"
	"github.com/mcpguard/mcpguard/internal/servers"
)

func cmdEval(ctx context.Context, s stdio, args []string) error {
	if len(args) > 0 && args[0] == "aggregate" {
		return cmdEvalAggregate(s, args[1:])
	}
	fs := newFlags(s, "eval", "[flags]  |  mcpguard eval aggregate [--json FILE] REPORT.json...",
		"Runs the case corpus under one or all defence configs and prints the APR / V-APR / FPR\n"+
			"table (config, APR, V-APR, viable attacks blocked, FPR, attacks blocked per category).\n"+
			"Each config's report is kept as results/<run-id>/<config>.json. V-APR counts the attacks\n"+
			"that succeed under C0, so C0 is run first whenever another config is asked for.\n"+
			"Configs that cannot run here (e.g. BPF LSM refused by the kernel) are listed as skipped.\n"+
			"`mcpguard eval aggregate results/*/C-full.json` averages N runs (mean ± sd, flaky cases).")
	config := fs.String("config", "all", "config `names` to run (comma-separated), or all: "+strings.Join(configs.Names(), ", "))
	casesDir := fs.String("cases", "testdata/cases", "case `dir`ectory (one JSON file per case)")
	jsonOut := fs.String("json", "", "also write all reports (per-case verdicts) to `file` as a JSON array")
	runID := fs.String("run-id", "", "name of this run under the results dir (default: UTC timestamp)")
	resultsDir := fs.String("results", "results", "`dir`ectory that keeps runs (results/<run-id>/<config>.json)")
	smoke := fs.Bool("smoke", false, "run the smoke subset only (one server, a handful of cases)")
	parallel := fs.Int("parallel", eval.DefaultParallel(), "cases run at once")
	only := fs.String("case", "", "run only the cases whose ID has this `prefix` (e.g. XL-)")
	auditFile := fs.String("audit", "", "append the guard's audit events to `file`")
	verbose := fs.Bool("v", false, "copy every server's stderr to stderr")
	scale := fs.Float64("timeout-scale", 1, "multiply every time bound (10 s per call, 30 s per case, settle times) by `f`, for slow hosts such as a TCG VM")
	serverBin := fs.String("server-bin", os.Getenv("MCPGUARD_SERVER_BIN"), "`dir`ectory of prebuilt Go servers (go build -o DIR/ ./testdata/servers/...); default: build into a temp dir")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q (did you mean 'mcpguard eval aggregate'?)", errUsage, fs.Args())
	}
	var cfgs []string
	if *config == "all" {
		cfgs = configs.Names()
	} else {
		for _, c := range strings.Split(*config, ",") {
			if !slices.Contains(configs.Names(), c) {
				return fmt.Errorf("%w: unknown config %q (known: %s, all)", errUsage, c, strings.Join(configs.Names(), ", "))
			}
			if !slices.Contains(cfgs, c) {
				cfgs = append(cfgs, c)
			}
		}
		if !slices.Contains(cfgs, configs.C0) {
			cfgs = append([]string{configs.C0}, cfgs...)
		}
	}
	if *parallel < 1 {
		return fmt.Errorf("%w: --parallel must be at least 1", errUsage)
	}
	if *runID == "" {
		*runID = time.Now().UTC().Format("20060102T150405Z")
	}
	if strings.ContainsAny(*runID, `/\`) || *runID == "." || *runID == ".." {
		return fmt.Errorf("%w: --run-id %q must be a plain name", errUsage, *runID)
	}

	cases, err := eval.LoadCases(*casesDir, servers.Names())
	if err != nil {
		return err
	}
	if *smoke {
		cases = eval.Smoke(cases)
	}
	if *only != "" {
		cases = slices.DeleteFunc(cases, func(c *eval.Case) bool { return !strings.HasPrefix(c.ID, *only) })
		if len(cases) == 0 {
			return fmt.Errorf("%w: no case ID starts with %q", errUsage, *only)
		}
	}
	root, err := servers.Root()
	if err != nil {
		return err
	}
	binDir := *serverBin
	if binDir == "" {
		if binDir, err = os.MkdirTemp("", "mcpguard-servers-"); err != nil {
			return err
		}
		defer os.RemoveAll(binDir)
		fmt.Fprintf(s.err, "building servers...\n")
		if err := servers.Build(ctx, binDir, usedServers(cases)...); err != nil {
			return err
		}
	}
	workDir, err := os.MkdirTemp("", "mcpguard-eval-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(workDir)
	r := &eval.Runner{Root: root, BinDir: binDir, WorkDir: workDir}
	if *scale <= 0 {
		return fmt.Errorf("%w: --timeout-scale must be positive", errUsage)
	}
	r.Scale(*scale)
	if *verbose {
		r.Verbose = s.err
	}
	if *auditFile != "" {
		f, err := os.OpenFile(*auditFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		r.Audit = audit.New(f)
	}
	runDir := filepath.Join(*resultsDir, *runID)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return err
	}

	var reports []*eval.Report
	var viable map[string]bool
	errorsSeen := 0
	for _, cfg := range cfgs {
		rep := &eval.Report{RunID: *runID, Config: cfg, Time: time.Now().UTC(), Host: eval.ThisHost()}
		start := time.Now()
		tty := isTerminal(s.err)
		results, err := r.RunConfig(ctx, cfg, cases, *parallel, func(done, total int, res *eval.Result) {
			if tty {
				fmt.Fprintf(s.err, "\r\033[K[%s] %d/%d %s %s", cfg, done, total, res.ID, res.Verdict)
			} else {
				fmt.Fprintf(s.err, "[%s] %d/%d %s %s (%.0f ms)\n", cfg, done, total, res.ID, res.Verdict, res.DurationMS)
			}
		})
		if tty {
			fmt.Fprintf(s.err, "\r\033[K")
		}
		switch {
		case errors.Is(err, configs.ErrUnavailable):
			rep.Skipped = err.Error()
			fmt.Fprintf(s.err, "[%s] skipped: %v\n", cfg, err)
		case err != nil:
			return fmt.Errorf("config %s: %w", cfg, err)
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
			return err
		}
	}
	fmt.Fprintf(s.out, "%d cases (%s), run %s\n", len(cases), *casesDir, *runID)
	if err := eval.WriteTable(s.out, reports); err != nil {
		return err
	}
	fmt.Fprintf(s.err, "reports in %s\n", runDir)
	if *jsonOut != "" {
		if err := writeJSONFile(*jsonOut, reports); err != nil {
			return err
		}
	}
	if errorsSeen > 0 {
		return &exitCode{1, fmt.Errorf("%d harness errors: the run is not a valid measurement (see the reports' \"error\" fields)", errorsSeen)}
	}
	return nil
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
