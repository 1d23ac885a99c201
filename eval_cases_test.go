package mcpguard_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/guard/runtime"
	"github.com/mcpguard/mcpguard/internal/testenv"
	"github.com/mcpguard/mcpguard/lab/eval"
	"github.com/mcpguard/mcpguard/lab/servers"
)

// TestEvalCases runs every case under every config (TestEvalCases/C0/FR-01)
// and holds the verdicts against testdata/golden/eval/<config>.golden
// (`go test -run TestEvalCases -update .` rewrites them). A verdict moving
// in either direction fails: a lost block and a new block both need a
// reviewed golden change. Configs that cannot run here (configs.Build fails
// with ErrUnavailable, e.g. BPF LSM refused by the kernel) skip with the
// reason. -short runs the smoke subset. The APR / V-APR / FPR table is
// printed at the end.
func TestEvalCases(t *testing.T) {
	ctx := context.Background()
	cases, partial := evalCases(t)
	run := &evalRun{r: evalRunner(ctx, t, cases), cases: cases, partial: partial}
	for _, cfg := range configs.Names() {
		t.Run(cfg, func(t *testing.T) { run.config(ctx, t, cfg) })
	}
	var b strings.Builder
	require.NoError(t, eval.WriteTable(&b, run.reports))
	fmt.Fprintf(os.Stdout, "\n%d cases\n%s\n", len(cases), b.String())
}

// evalCases are the corpus's cases (the smoke subset under -short), only
// those MCPGUARD_EVAL_ONLY names if it is set, less those
// MCPGUARD_EVAL_EXCLUDE leaves out. Both are comma-separated id
// prefixes (MCPGUARD_EVAL_ONLY=BN- runs the benign cases); what is left
// is said in the log. partial reports that some cases were left out: the
// golden files then keep the verdicts of the others.
func evalCases(t *testing.T) (cases []*eval.Case, partial bool) {
	t.Helper()
	cases, err := eval.LoadCases("testdata/cases", servers.Names())
	require.NoError(t, err)
	all := len(cases)
	if testing.Short() {
		cases = eval.Smoke(cases)
	}
	matches := func(env string) func(*eval.Case) bool {
		prefixes := strings.Split(os.Getenv(env), ",")
		return func(c *eval.Case) bool {
			return slices.ContainsFunc(prefixes, func(p string) bool { return p != "" && strings.HasPrefix(c.ID, p) })
		}
	}
	if only := os.Getenv("MCPGUARD_EVAL_ONLY"); only != "" {
		named := matches("MCPGUARD_EVAL_ONLY")
		cases = slices.DeleteFunc(cases, func(c *eval.Case) bool { return !named(c) })
		t.Logf("MCPGUARD_EVAL_ONLY=%s: %d cases", only, len(cases))
	}
	if ex := os.Getenv("MCPGUARD_EVAL_EXCLUDE"); ex != "" {
		cases = slices.DeleteFunc(cases, matches("MCPGUARD_EVAL_EXCLUDE"))
		t.Logf("MCPGUARD_EVAL_EXCLUDE=%s: %d cases left", ex, len(cases))
	}
	require.NotEmpty(t, cases)
	return cases, len(cases) < all
}

// evalRunner is the harness over this checkout, with the cases' servers
// built (or prebuilt in MCPGUARD_SERVER_BIN, a directory of go build -o
// DIR/ ./testdata/servers/..., e.g. for a VM whose root is read-only).
// MCPGUARD_EVAL_TIMEOUT_SCALE stretches the time bounds on slow hosts (a
// TCG VM), where the defaults would cut live servers off.
func evalRunner(ctx context.Context, t *testing.T, cases []*eval.Case) *eval.Runner {
	t.Helper()
	root, err := filepath.Abs(".")
	require.NoError(t, err)
	binDir := os.Getenv("MCPGUARD_SERVER_BIN")
	if binDir == "" {
		binDir = t.TempDir()
		require.NoError(t, servers.Build(ctx, binDir, serverNames(cases)...))
	}
	r := &eval.Runner{Root: root, BinDir: binDir, WorkDir: t.TempDir(), RuntimeCache: runtime.NewCache()}
	if v := os.Getenv("MCPGUARD_EVAL_TIMEOUT_SCALE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err, "MCPGUARD_EVAL_TIMEOUT_SCALE")
		require.Positive(t, f, "MCPGUARD_EVAL_TIMEOUT_SCALE")
		r.Scale(f)
	}
	return r
}

// evalRun is TestEvalCases's state across its configs.
type evalRun struct {
	r       *eval.Runner
	cases   []*eval.Case
	reports []*eval.Report
	// partial: some of the corpus's cases were left out (-short,
	// MCPGUARD_EVAL_ONLY or _EXCLUDE).
	partial bool
	// viable are the attacks that succeed under C0: from C0's run, or
	// (a config run alone: -run TestEvalCases/C-app) from C0's golden.
	viable map[string]bool
}

// config runs every case under cfg and holds the verdicts against the
// config's golden file (or rewrites it under -update).
func (run *evalRun) config(ctx context.Context, t *testing.T, cfg string) {
	rep := &eval.Report{Config: cfg}
	run.reports = append(run.reports, rep)
	results, err := run.r.RunConfig(ctx, cfg, run.cases, eval.DefaultParallel(), nil)
	if errors.Is(err, configs.ErrUnavailable) {
		if testenv.BPF() && bpfConfig(cfg) {
			// -bpf asks for the kernel configs: a refusal is a failure,
			// never a skip that CI would count as green.
			t.Fatalf("-bpf was given but config %s is unavailable: %v", cfg, err)
		}
		rep.Skipped = err.Error()
		t.Skipf("config %s unavailable here: %v", cfg, err)
	}
	require.NoError(t, err)
	goldenPath := filepath.Join("testdata/golden/eval", cfg+".golden")
	golden := readGolden(t, goldenPath)
	if cfg == configs.C0 {
		run.viable = eval.Viable(results)
	} else if run.viable == nil {
		run.viable = viableFromGolden(t, run.cases)
	}
	for i, c := range run.cases {
		t.Run(c.ID, func(t *testing.T) { checkVerdict(t, cfg, c, results[i], golden, goldenPath) })
	}
	if testenv.Update() {
		writeGolden(t, goldenPath, golden, results, run.partial)
	} else if !run.partial {
		for id := range golden {
			if !hasCase(run.cases, id) {
				t.Errorf("%s lists %s, which is not in the corpus; run with -update", goldenPath, id)
			}
		}
	}
	rep.Results = results
	rep.Summary = eval.Summarize(cfg, results, run.viable)
	if cfg == configs.C0 && !run.partial && !testenv.Update() {
		// The count of viable attacks is what the golden file says.
		n := 0
		for _, v := range golden {
			if v == eval.Succeeded {
				n++
			}
		}
		assert.Equal(t, n, len(run.viable), "viable attacks under C0")
	}
}

// checkVerdict holds one case's result under cfg against the golden
// verdict; under C0 (pass-through) the guard denies nothing and every
// benign case passes.
func checkVerdict(t *testing.T, cfg string, c *eval.Case, res *eval.Result, golden map[string]string, goldenPath string) {
	if res.NoPolicy {
		t.Skipf("not judged: %s", res.Err)
	}
	require.NotEqual(t, eval.Error, res.Verdict, "harness error: %s", res.Err)
	if cfg == configs.C0 {
		assert.Empty(t, res.Denied, "C0 denied calls %v", res.Denied)
		if !c.Attack() {
			assert.Equal(t, eval.Passed, res.Verdict, "benign case failed under C0: %s", res.Detail)
		}
	}
	if testenv.Update() {
		return
	}
	want, ok := golden[c.ID]
	if !ok {
		t.Fatalf("%s has no verdict for %s (got %s: %s); run with -update and review", goldenPath, c.ID, res.Verdict, res.Detail)
	}
	assert.Equal(t, want, res.Verdict, "%s: %s (denied calls %v, call errors %v, start error %q)",
		c.ID, res.Detail, res.Denied, res.CallErrors, res.StartError)
}

func serverNames(cases []*eval.Case) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range cases {
		if !seen[c.Server] {
			seen[c.Server] = true
			out = append(out, c.Server)
		}
	}
	return out
}

func hasCase(cases []*eval.Case, id string) bool {
	for _, c := range cases {
		if c.ID == id {
			return true
		}
	}
	return false
}

func readGolden(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}
	}
	require.NoError(t, err)
	g, err := eval.ParseGolden(b)
	require.NoError(t, err, path)
	return g
}

// writeGolden rewrites the golden file; when only some cases ran (partial)
// their verdicts are merged into what is there.
func writeGolden(t *testing.T, path string, old map[string]string, results []*eval.Result, partial bool) {
	t.Helper()
	merged := map[string]string{}
	if partial {
		for k, v := range old {
			merged[k] = v
		}
	}
	for _, r := range results {
		if r.Verdict != eval.Error {
			merged[r.ID] = r.Verdict
		}
	}
	var rs []*eval.Result
	for id, v := range merged {
		rs = append(rs, &eval.Result{ID: id, Verdict: v})
	}
	if len(rs) == 0 {
		return // nothing judged (no policies yet): no golden file
	}
	golden := eval.Golden(rs)
	err := os.MkdirAll(filepath.Dir(path), 0o755)
	if err == nil {
		err = os.WriteFile(path, []byte(golden), 0o644)
	}
	if errors.Is(err, syscall.EROFS) {
		// The VM sees the checkout read-only: the file is in the log, to
		// be copied from it (docs/vm.md).
		t.Errorf("%s is on a read-only file system; what -update would write:\n%s", path, golden)
		return
	}
	require.NoError(t, err)
}

func viableFromGolden(t *testing.T, cases []*eval.Case) map[string]bool {
	g := readGolden(t, filepath.Join("testdata/golden/eval", configs.C0+".golden"))
	v := map[string]bool{}
	for _, c := range cases {
		if c.Attack() && g[c.ID] == eval.Succeeded {
			v[c.ID] = true
		}
	}
	return v
}

// bpfConfig reports whether cfg enforces with BPF LSM (and so must run under -bpf).
func bpfConfig(cfg string) bool {
	switch cfg {
	case configs.CEBPF, configs.CFull, configs.CABEBPF:
		return true
	}
	return false
}
