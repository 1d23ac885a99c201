package mcpguard_test

// BenchmarkAgent profiles one SimpleAgent iteration (plan a tool call, run it
// over MCP, answer from its output) phase by phase, by tool-output size and
// by guard config. Its output is benchstat input: run it in each VM with
// -env and compare the two files (see docs/agent.md and docs/cvm.md):
//
//	go test -run '^$' -bench Agent -count 10 -env std | tee std.txt
//	go test -run '^$' -bench Agent -count 10 -env cvm | tee cvm.txt
//	benchstat -col env -ignore cpu,cvm,cvm-evidence,kernel std.txt cvm.txt
//
// -col env puts the environments side by side and pairs the rows by
// benchmark name; -ignore drops the configuration lines that differ between
// the two machines by design, which would otherwise split every metric into
// one unpaired table per file (what `benchstat -ignore cpu std.txt cvm.txt`
// prints). TestBenchmarkAgent runs every row once and checks the relations
// between its metrics.
//
// With VLLM_BASE_URL unset it runs the embedded reference model (-model-shape,
// default medium) on a loopback HTTP listener.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/agent"
	"github.com/mcpguard/mcpguard/agent/envinfo"
	"github.com/mcpguard/mcpguard/agent/fsserver"
	"github.com/mcpguard/mcpguard/guard/configs"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

var (
	benchEnv    = flag.String("env", "", "label of this environment, written as the `env:` configuration line of the benchmark output (std, cvm, ...)")
	benchGuards = flag.String("agent.guards", "none,C0,C-AB,C-app,C-full,C-full-landlock",
		"comma-separated guard configs BenchmarkAgent runs, or all (none: no proxy at all); configs unavailable here are skipped with the reason (-v shows it)")
	benchAgentSizes = flag.String("agent.sizes", "1KiB,16KiB", "comma-separated tool-output sizes BenchmarkAgent runs, of "+sizeNames()+
		" (128KiB is ~33k prompt tokens: minutes per iteration for the medium shape's full attention on a CPU)")
	benchServer = flag.String("agent.server", "go", "MCP filesystem server: go (agent/fsserver) or npm (@modelcontextprotocol/server-filesystem from testdata/npm, run by node); -mcp-server overrides it")
	benchMCPCmd = flag.String("mcp-server", os.Getenv("MCP_FILESYSTEM_BINARY"),
		"any MCP filesystem server for the tool phase: a command line `\"CMD ARGS\"`, split on spaces, run with the target directory as its last argument (default $MCP_FILESYSTEM_BINARY)")
	benchDotEnv  = flag.String("agent.dotenv", ".env", "file with VLLM_BASE_URL etc. for keys the environment leaves unset")
	benchShape   = flag.String("model-shape", "", "decoder shape of the embedded reference model (no VLLM_BASE_URL): medium, small or qwen2.5-0.5b; default medium in benchmarks, small in the TestBenchmark* twins")
	benchNonce   = flag.Bool("agent.nonce", true, "start every iteration's prompt with a fresh random tag, so a server's prefix cache cannot serve it")
	benchCachePr = flag.Bool("agent.cache-prompt", false, "value of llama.cpp's cache_prompt field sent with every request (other servers ignore it; for vLLM start it with --no-enable-prefix-caching)")
)

// The test binary doubles as the agent's filesystem server (agent.FSServer).
func init() { fsserver.ServeIfChild() }

// benchSizes are the tool-output sizes studied: large context returns are
// part of what is measured.
var benchSizes = []benchSize{{"1KiB", 1 << 10}, {"16KiB", 16 << 10}, {"128KiB", 128 << 10}}

type benchSize struct {
	name  string
	bytes int
}

func sizeNames() string {
	var n []string
	for _, s := range benchSizes {
		n = append(n, s.name)
	}
	return strings.Join(n, ", ")
}

// sizeList expands a -*.sizes flag, failing on an unknown size.
func sizeList(tb testing.TB, flagName, value string) []string {
	tb.Helper()
	var out []string
	for _, s := range strings.Split(value, ",") {
		s = strings.TrimSpace(s)
		if !slices.ContainsFunc(benchSizes, func(b benchSize) bool { return b.name == s }) {
			tb.Fatalf("-%s: unknown size %q (have %s)", flagName, s, sizeNames())
		}
		out = append(out, s)
	}
	return out
}

// benchModel is the endpoint a benchmark talks to.
type benchModel struct {
	cfg       agent.Config
	endpoint  string // for the model-endpoint line
	baseURL   string // OpenAI base URL
	rootURL   string // classifier root for the reference server
	synthetic bool
	stop      func()
}

// startModel uses the configured endpoint, or starts the reference server
// on loopback when there is none: -model-shape, else medium for a benchmark
// and small for a test twin (fast; the relations it checks hold for any shape).
func startModel(tb testing.TB) *benchModel {
	tb.Helper()
	cfg, err := agent.LoadConfig(*benchDotEnv)
	if err != nil {
		tb.Fatal(err)
	}
	switch {
	case *benchShape != "":
		cfg.ModelShape = *benchShape
	case isBench(tb):
		cfg.ModelShape = "medium"
	default:
		cfg.ModelShape = "small"
	}
	e, err := agent.OpenEndpoint(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	m := &benchModel{cfg: cfg, baseURL: e.BaseURL, rootURL: e.Root, endpoint: e.BaseURL,
		synthetic: e.Synthetic, stop: func() { e.Close() }}
	if e.Reference != nil {
		// Its loopback port changes from run to run; a line that differs
		// would keep benchstat from pairing the runs.
		m.endpoint = "embedded reference server (loopback HTTP)"
	} else {
		m.cfg.ModelShape = "" // a real server's: the model line names it
	}
	return m
}

func isBench(tb testing.TB) bool { _, ok := tb.(*testing.B); return ok }

func (m *benchModel) llm() *agent.LLM {
	return agent.NewLLM(agent.LLMOptions{BaseURL: m.baseURL, APIKey: m.cfg.APIKey, Model: m.cfg.Model,
		RequestTimeout: m.cfg.RequestTimeout, StallTimeout: m.cfg.StallTimeout,
		ExtraBody: map[string]any{"cache_prompt": *benchCachePr}})
}

// printedConfig remembers the configuration lines already written in this
// process: a line is written before the first result it applies to, and
// again only if its value changes (benchfmt keeps a value until it is
// overwritten).
var printedConfig = struct {
	sync.Mutex
	lines map[string]string
}{lines: map[string]string{}}

// printEnv writes the configuration lines (env, detected facts, endpoint,
// model, how the phases are kept valid, then extra) that are new or changed
// since the last call. A test twin writes none: its output is not benchstat
// input.
func printEnv(tb testing.TB, m *benchModel, extra ...envinfo.Line) {
	tb.Helper()
	if !isBench(tb) {
		return
	}
	printedConfig.Lock()
	defer printedConfig.Unlock()
	model := m.cfg.Model
	if model == "" {
		model = "(first listed)"
	}
	shape := m.cfg.ModelShape
	if shape == "" {
		shape = "n/a"
	}
	lines := envinfo.Lines(*benchEnv, envinfo.Detect(envinfo.DefaultPaths()),
		envinfo.Line{Key: "model-endpoint", Value: m.endpoint},
		envinfo.Line{Key: "model", Value: model},
		envinfo.Line{Key: "model-shape", Value: shape},
		envinfo.Line{Key: "model-synthetic", Value: fmt.Sprint(m.synthetic)},
		envinfo.Line{Key: "prompt-nonce", Value: fmt.Sprint(*benchNonce)},
		envinfo.Line{Key: "cache-prompt", Value: fmt.Sprint(*benchCachePr)},
		envinfo.Line{Key: "max-tokens", Value: fmt.Sprint(m.cfg.MaxTokens)},
		envinfo.Line{Key: "mcp-server", Value: serverLabel()})
	var fresh []envinfo.Line
	for _, l := range append(lines, extra...) {
		if v, ok := printedConfig.lines[l.Key]; !ok || v != l.Value {
			fresh = append(fresh, l)
			printedConfig.lines[l.Key] = l.Value
		}
	}
	if err := envinfo.Write(os.Stdout, fresh); err != nil {
		tb.Fatal(err)
	}
}

// targetDir is the fixed directory the benchmarks' files live in. Its path
// is in the prompts and the tool calls, so a random temporary name would
// change the token counts from run to run and from VM to VM.
func targetDir(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(os.TempDir(), "mcpguard-agent-bench")
	if !isBench(tb) {
		// Twins may run beside a benchmark (go test -run X -bench Y).
		dir += "-test"
	}
	if err := os.RemoveAll(dir); err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// writeTarget fills dir with one text file per size, prose-like so that
// tokenizers see ordinary text, deterministic so runs compare.
func writeTarget(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	words := strings.Fields("the agent reads a file from disk and reports what it holds so that each " +
		"benchmark run sees ordinary prose with numbers like 42 and 2026 names such as Alice Bob " +
		"and punctuation, quotes \"here\" and (parentheses); lines end with a full stop.")
	rng := rand.New(rand.NewPCG(1, 2))
	paths := map[string]string{}
	for _, s := range benchSizes {
		var sb strings.Builder
		for sb.Len() < s.bytes {
			sb.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(12) == 0 {
				sb.WriteString(".\n")
			} else {
				sb.WriteByte(' ')
			}
		}
		p := filepath.Join(dir, "notes-"+s.name+".txt")
		if err := os.WriteFile(p, []byte(sb.String()[:s.bytes]), 0o644); err != nil {
			tb.Fatal(err)
		}
		paths[s.name] = p
	}
	return paths
}

// serverLabel names the tool phase's MCP server for the mcp-server line.
func serverLabel() string {
	if c := strings.TrimSpace(*benchMCPCmd); c != "" {
		return c
	}
	return *benchServer
}

// mcpServer returns the filesystem server over dir: -mcp-server's command,
// else -agent.server's.
func mcpServer(tb testing.TB, dir string) agent.Server {
	tb.Helper()
	if c := strings.Fields(*benchMCPCmd); len(c) > 0 {
		if _, err := exec.LookPath(c[0]); err != nil {
			tb.Fatalf("-mcp-server / MCP_FILESYSTEM_BINARY %q: %v", c[0], err)
		}
		return agent.Server{Command: append(c, dir)}
	}
	switch *benchServer {
	case "go":
		srv, err := agent.FSServer(dir)
		if err != nil {
			tb.Fatal(err)
		}
		return srv
	case "npm":
		script, err := filepath.Abs("testdata/npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := os.Stat(script); err != nil {
			tb.Skip("npm server not installed (cd testdata/npm && npm ci):", err)
		}
		return agent.Server{Command: []string{"node", script, dir}}
	}
	tb.Fatalf("-agent.server %q: want go or npm", *benchServer)
	return agent.Server{}
}

// newBenchAgent starts the filesystem server over dir, under guard ("none":
// directly), and connects the agent. The guarded server runs under
// guard.Proxy in this process (agent.Server.Guard), not the mcpguard binary.
func newBenchAgent(tb testing.TB, m *benchModel, dir, guard string, o agent.Options) *agent.Agent {
	tb.Helper()
	srv := mcpServer(tb, dir)
	if guard != "none" {
		exe, _ := os.Executable()
		srv.Guard = guard
		srv.GuardOptions = configs.Options{Server: "agent-fsserver", PolicyFile: "agent/testdata/fsserver-policy.json",
			ManifestFile: "agent/testdata/fsserver-manifest.json",
			Vars:         map[string]string{"WS": dir, "BIN": exe, "HOME": os.Getenv("HOME"), "TMP": os.TempDir()}}
	}
	o.LLM, o.Server, o.Nonce = m.llm(), srv, *benchNonce
	if o.MaxTokens == 0 {
		o.MaxTokens = m.cfg.MaxTokens
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := agent.New(ctx, o)
	if errors.Is(err, agent.ErrGuardConfig) {
		tb.Skipf("guard %s not usable here: %v", guard, err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { a.Close() })
	return a
}

// guardList expands the -agent.guards flag.
func guardList(flagValue string) []string {
	if strings.TrimSpace(flagValue) == "all" {
		return append([]string{"none"}, configs.Names()...)
	}
	var out []string
	for _, g := range strings.Split(flagValue, ",") {
		if g = strings.TrimSpace(g); g != "" {
			out = append(out, g)
		}
	}
	return out
}

func task(path string) string { return "Read the file " + path + " and summarize what it says." }

// phaseSums accumulates per-iteration measurements of the completed
// iterations; metrics turns them into per-op values.
type phaseSums struct {
	n, incomplete                             int
	planning, tool, prefill, decode, tpot, fw time.Duration
	total                                     time.Duration
	planTok, answerTok, answerPrompt          int
	promptTok, chunks                         int
	decodeSteps                               int // answer tokens after the first
	cached, cachedKnown                       int
	serverPrefill, serverDecode               float64 // llama.cpp timings, ms
	timings                                   int
	gaps                                      []time.Duration // the answers' inter-chunk times
	scanners                                  map[string]time.Duration
}

// add counts r: a completed iteration's measurements, or an incomplete one
// (the model called a tool again instead of answering), whose phases would
// time a second plan as if it were the answer.
func (s *phaseSums) add(r *agent.Result) {
	if r.Outcome == agent.NoAnswer {
		s.incomplete++
		return
	}
	s.n++
	p := r.Phases
	s.planning += p.Planning
	s.tool += p.Tool
	s.prefill += p.Prefill
	s.decode += p.Decode
	s.tpot += r.TPOT()
	s.fw += p.Firewall
	s.total += p.Total
	s.promptTok += r.PromptTokens()
	for _, st := range []*agent.Stream{r.Plan, r.Final} {
		if st == nil {
			continue
		}
		s.chunks += st.Chunks
		if n, ok := st.CachedTokens(); ok {
			s.cached += n
			s.cachedKnown++
		}
	}
	if r.Plan != nil {
		s.planTok += r.Plan.CompletionTokens()
	}
	if f := r.Final; f != nil {
		n := f.CompletionTokens()
		s.answerTok += n
		s.decodeSteps += max(n-1, 0)
		c, _ := f.CachedTokens()
		s.answerPrompt += f.PromptTokens() - c
		s.gaps = append(s.gaps, f.Gaps...)
		if f.Timings != nil {
			s.serverPrefill += f.Timings.PromptMS
			s.serverDecode += f.Timings.PredictedMS
			s.timings++
		}
	}
	for k, v := range r.ScannerTime {
		if s.scanners == nil {
			s.scanners = map[string]time.Duration{}
		}
		s.scanners[k] += v
	}
}

// metric is one reported value.
type metric struct {
	unit string
	v    float64
}

// metrics is a row's values in report order.
type metrics []metric

func (ms metrics) get(unit string) (float64, bool) {
	for _, m := range ms {
		if m.unit == unit {
			return m.v, true
		}
	}
	return 0, false
}

// percentile is the nearest-rank q-quantile of sorted.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// metrics returns the per-op values, as vLLM's bench serve and GenAI-Perf
// define them where they overlap:
//   - planning-ns, tool-ns, ttft-ns (the answer's time to first token: its
//     prefill), decode-ns (its first to last token), tpot-ns (decode-ns over
//     the answer's tokens after the first), e2e-ns (the whole iteration),
//     other-ns (e2e less the phases and the firewall: message building,
//     the streams' tails);
//   - gen-tok/s: the answer's tokens after the first over its decode time,
//     so 1/tpot for equal answers; prefill-tok/s: the answer request's
//     prompt tokens not served from a prefix cache over its TTFT;
//   - itl-p50/p90/p99-ns: percentiles of the answers' inter-chunk times;
//   - plan-tok, answer-tok, prompt-tok (both requests), cached-tok (both,
//     only when the server says), incomplete-frac (iterations whose model
//     called a tool again instead of answering, counted apart);
//   - timing-ppm: what the per-chunk timing costs (agent.StampCost,
//     measured once in this process) relative to the phases it times, in
//     parts per million; not a per-iteration sample, so the gate skips it.
func (s *phaseSums) metrics(stampCost time.Duration) metrics {
	var ms metrics
	add := func(unit string, v float64) { ms = append(ms, metric{unit, v}) }
	if all := s.n + s.incomplete; all > 0 {
		add("incomplete-frac", float64(s.incomplete)/float64(all))
	}
	if s.n == 0 {
		return ms
	}
	n := float64(s.n)
	mean := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / n }
	add("planning-ns", mean(s.planning))
	add("tool-ns", mean(s.tool))
	add("ttft-ns", mean(s.prefill))
	add("decode-ns", mean(s.decode))
	add("tpot-ns", mean(s.tpot))
	add("e2e-ns", mean(s.total))
	add("other-ns", mean(s.total-s.planning-s.tool-s.prefill-s.decode-s.fw))
	if len(s.gaps) > 0 {
		g := slices.Clone(s.gaps)
		slices.Sort(g)
		add("itl-p50-ns", float64(percentile(g, 0.50)))
		add("itl-p90-ns", float64(percentile(g, 0.90)))
		add("itl-p99-ns", float64(percentile(g, 0.99)))
	}
	if s.decode > 0 && s.decodeSteps > 0 {
		add("gen-tok/s", float64(s.decodeSteps)/s.decode.Seconds())
	}
	if s.prefill > 0 && s.answerPrompt > 0 {
		add("prefill-tok/s", float64(s.answerPrompt)/s.prefill.Seconds())
	}
	add("plan-tok", float64(s.planTok)/n)
	add("answer-tok", float64(s.answerTok)/n)
	add("prompt-tok", float64(s.promptTok)/n)
	if s.cachedKnown > 0 {
		add("cached-tok", float64(s.cached)/n)
	}
	if timed := s.planning + s.prefill + s.decode; timed > 0 {
		add("timing-ppm", float64(stampCost)*float64(s.chunks)/float64(timed)*1e6)
	}
	if s.timings > 0 {
		add("server-prefill-ns", s.serverPrefill/float64(s.timings)*1e6)
		add("server-decode-ns", s.serverDecode/float64(s.timings)*1e6)
	}
	return ms
}

// runRow runs one row of a benchmark table, encoding/json/v2's way: as a
// sub-benchmark whose loop is b.Loop, or (from a TestBenchmark* twin) as a
// subtest whose loop runs once, after which check tests the relations
// between the row's metrics.
func runRow(tb testing.TB, name string, row func(tb testing.TB, loop func() bool) metrics) {
	switch tb := tb.(type) {
	case *testing.B:
		tb.Run(name, func(b *testing.B) {
			for _, m := range row(b, b.Loop) {
				b.ReportMetric(m.v, m.unit)
			}
			// The machine's load when the row ended: not a measurement of
			// the code, but it says whether two runs saw comparable machines
			// (mcpguard gate shows it and judges it not).
			if l, ok := loadAvg(); ok {
				b.ReportMetric(l, "loadavg")
			}
		})
	case *testing.T:
		tb.Run(name, func(t *testing.T) {
			left := 1
			ms := row(t, func() bool { left--; return left >= 0 })
			checkMetrics(t, ms)
		})
	default:
		tb.Fatalf("runRow: %T", tb)
	}
}

// loadAvg is the 1-minute load average, where /proc/loadavg has it.
func loadAvg() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// checkMetrics tests what must hold between a row's metrics whatever the
// machine's speed: no ratio of times is asserted, only identities (within
// rounding) and orderings.
func checkMetrics(t *testing.T, ms metrics) {
	t.Helper()
	get := func(unit string) float64 {
		t.Helper()
		v, ok := ms.get(unit)
		require.True(t, ok, "metric %s missing from %v", unit, ms)
		return v
	}
	assert.Zero(t, get("incomplete-frac"), "the model answered after the tool result")
	assert.Positive(t, get("plan-tok"))
	answer := get("answer-tok")
	require.Greater(t, answer, 1.0)
	// The answer's decode rate is the inverse of its time per output token
	// (the old gen-tok/s divided the plan's and the answer's tokens by the
	// answer's decode time: 25% too high).
	assert.InEpsilon(t, 1e9/get("tpot-ns"), get("gen-tok/s"), 0.01, "gen-tok/s vs 1/tpot")
	assert.InEpsilon(t, (answer-1)/get("decode-ns")*1e9, get("gen-tok/s"), 0.01, "gen-tok/s vs answer tokens over decode time")
	// The phases and the rest make up the iteration: other-ns is what no
	// phase timed (building messages, the streams' usage chunks), small
	// beside the iteration and never negative.
	e2e := get("e2e-ns")
	phases := get("planning-ns") + get("tool-ns") + get("ttft-ns") + get("decode-ns")
	fw, _ := ms.get("fw-ns")
	assert.InDelta(t, e2e, phases+fw+get("other-ns"), 1, "phases + firewall + other = e2e")
	assert.GreaterOrEqual(t, get("other-ns"), 0.0)
	assert.Less(t, get("other-ns"), 0.15*e2e+float64(50*time.Millisecond), "phases cover the iteration")
	p50, p90, p99 := get("itl-p50-ns"), get("itl-p90-ns"), get("itl-p99-ns")
	assert.LessOrEqual(t, p50, p90)
	assert.LessOrEqual(t, p90, p99)
	assert.Positive(t, get("prefill-tok/s"))
	assert.Greater(t, get("prompt-tok"), answer)
}

func BenchmarkAgent(b *testing.B)     { runAgent(b) }
func TestBenchmarkAgent(t *testing.T) { runAgent(t) }

func runAgent(tb testing.TB) {
	m := startModel(tb)
	defer m.stop()
	printEnv(tb, m)
	dir := targetDir(tb)
	files := writeTarget(tb, dir)
	stampCost := agent.StampCost(100000)
	for _, size := range sizeList(tb, "agent.sizes", *benchAgentSizes) {
		for _, guard := range guardList(*benchGuards) {
			runRow(tb, fmt.Sprintf("size=%s/guard=%s", size, guard), func(tb testing.TB, loop func() bool) metrics {
				a := newBenchAgent(tb, m, dir, guard, agent.Options{})
				var sums phaseSums
				ctx := context.Background()
				for loop() {
					r, err := a.Run(ctx, task(files[size]))
					if err != nil {
						tb.Fatal(err)
					}
					if r.Outcome != agent.Completed && r.Outcome != agent.NoAnswer {
						tb.Fatalf("run %s: %+v", r.Outcome, r.Verdict)
					}
					sums.add(r)
				}
				if sums.n == 0 {
					tb.Errorf("no iteration completed: the model called a tool again instead of answering %d time(s)", sums.incomplete)
				}
				return sums.metrics(stampCost)
			})
		}
	}
}
