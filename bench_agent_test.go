package mcpguard_test

// BenchmarkAgent profiles one SimpleAgent iteration (plan a tool call, run it
// over MCP, answer from its output) phase by phase, by tool-output size and
// by guard config. Its output is benchstat input: run it in each VM with
// -env and compare (see docs/agent.md and docs/cvm.md):
//
//	go test -run '^$' -bench Agent -count 10 -env std | tee std.txt
//	go test -run '^$' -bench Agent -count 10 -env cvm | tee cvm.txt
//	benchstat -ignore cpu std.txt cvm.txt
//
// With VLLM_BASE_URL unset it runs the embedded reference model on a
// loopback HTTP listener.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
	benchServer = flag.String("agent.server", "go", "MCP filesystem server: go (agent/fsserver) or npm (@modelcontextprotocol/server-filesystem from testdata/npm, run by node)")
	benchDotEnv = flag.String("agent.dotenv", ".env", "file with VLLM_BASE_URL etc. for keys the environment leaves unset")
)

// The test binary doubles as the agent's filesystem server (agent.FSServer).
func init() { fsserver.ServeIfChild() }

// benchSizes are the tool-output sizes studied: large context returns are
// part of what is measured.
var benchSizes = []struct {
	name  string
	bytes int
}{{"1KiB", 1 << 10}, {"16KiB", 16 << 10}, {"128KiB", 128 << 10}}

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
// on loopback when there is none.
func startModel(b *testing.B) *benchModel {
	b.Helper()
	cfg, err := agent.LoadConfig(*benchDotEnv)
	if err != nil {
		b.Fatal(err)
	}
	e, err := agent.OpenEndpoint(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	m := &benchModel{cfg: cfg, baseURL: e.BaseURL, rootURL: e.Root, endpoint: e.BaseURL,
		synthetic: e.Synthetic, stop: func() { e.Close() }}
	if e.Reference != nil {
		// Its loopback port changes from run to run; a line that differs
		// would keep benchstat from pairing the runs.
		m.endpoint = "embedded reference server (loopback HTTP)"
	}
	return m
}

func (m *benchModel) llm() *agent.LLM {
	return agent.NewLLM(agent.LLMOptions{BaseURL: m.baseURL, APIKey: m.cfg.APIKey, Model: m.cfg.Model,
		RequestTimeout: m.cfg.RequestTimeout, StallTimeout: m.cfg.StallTimeout})
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
// then extra) that are new or changed since the last call.
func printEnv(b *testing.B, m *benchModel, extra ...envinfo.Line) {
	b.Helper()
	printedConfig.Lock()
	defer printedConfig.Unlock()
	lines := envinfo.Lines(*benchEnv, envinfo.Detect(envinfo.DefaultPaths()),
		envinfo.Line{Key: "model-endpoint", Value: m.endpoint},
		envinfo.Line{Key: "model-synthetic", Value: fmt.Sprint(m.synthetic)},
		envinfo.Line{Key: "mcp-server", Value: *benchServer})
	var fresh []envinfo.Line
	for _, l := range append(lines, extra...) {
		if v, ok := printedConfig.lines[l.Key]; !ok || v != l.Value {
			fresh = append(fresh, l)
			printedConfig.lines[l.Key] = l.Value
		}
	}
	if err := envinfo.Write(os.Stdout, fresh); err != nil {
		b.Fatal(err)
	}
}

// targetDir is the fixed directory the benchmarks' files live in. Its path
// is in the prompts and the tool calls, so a random temporary name would
// change the token counts from run to run and from VM to VM.
func targetDir(b *testing.B) string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), "mcpguard-agent-bench")
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// writeTarget fills dir with one text file per size, prose-like so that
// tokenizers see ordinary text, deterministic so runs compare.
func writeTarget(b *testing.B, dir string) map[string]string {
	b.Helper()
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
			b.Fatal(err)
		}
		paths[s.name] = p
	}
	return paths
}

// newBenchAgent starts the filesystem server over dir, under guard ("none":
// directly), and connects the agent. The guarded server runs under
// guard.Proxy in this process (agent.Server.Guard), not the mcpguard binary.
func newBenchAgent(b *testing.B, m *benchModel, dir, guard string, o agent.Options) *agent.Agent {
	b.Helper()
	var srv agent.Server
	switch *benchServer {
	case "go":
		var err error
		if srv, err = agent.FSServer(dir); err != nil {
			b.Fatal(err)
		}
	case "npm":
		script, err := filepath.Abs("testdata/npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := os.Stat(script); err != nil {
			b.Skip("npm server not installed (cd testdata/npm && npm ci):", err)
		}
		srv = agent.Server{Command: []string{"node", script, dir}}
	default:
		b.Fatalf("-agent.server %q: want go or npm", *benchServer)
	}
	if guard != "none" {
		exe, _ := os.Executable()
		srv.Guard = guard
		srv.GuardOptions = configs.Options{Server: "agent-fsserver", PolicyFile: "agent/testdata/fsserver-policy.json",
			ManifestFile: "agent/testdata/fsserver-manifest.json",
			Vars:         map[string]string{"WS": dir, "BIN": exe, "HOME": os.Getenv("HOME"), "TMP": os.TempDir()}}
	}
	o.LLM, o.Server = m.llm(), srv
	if o.MaxTokens == 0 {
		o.MaxTokens = m.cfg.MaxTokens
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := agent.New(ctx, o)
	if errors.Is(err, agent.ErrGuardConfig) {
		b.Skipf("guard %s not usable here: %v", guard, err)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
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

// phaseSums accumulates per-iteration measurements; report turns them into
// per-op means.
type phaseSums struct {
	n                                         int
	planning, tool, prefill, decode, tpot, fw time.Duration
	promptTok, genTok, chunks                 int
	serverPrefill, serverDecode               float64 // llama.cpp timings, ms
	timings                                   int
	scanners                                  map[string]time.Duration
}

func (s *phaseSums) add(r *agent.Result) {
	s.n++
	p := r.Phases
	s.planning += p.Planning
	s.tool += p.Tool
	s.prefill += p.Prefill
	s.decode += p.Decode
	s.tpot += r.TPOT()
	s.fw += p.Firewall
	s.promptTok += r.PromptTokens()
	s.genTok += r.GenTokens()
	for _, st := range []*agent.Stream{r.Plan, r.Final} {
		if st == nil {
			continue
		}
		s.chunks += st.Chunks
		if st == r.Final && st.Timings != nil {
			s.serverPrefill += st.Timings.PromptMS
			s.serverDecode += st.Timings.PredictedMS
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

// report writes the per-op means. timing-ppm is what the per-chunk timing
// bookkeeping costs (measured in this process by agent.StampCost) relative to
// the phases it times, in parts per million: under 10000 means under 1%.
func (s *phaseSums) report(b *testing.B, stampCost time.Duration) {
	if s.n == 0 {
		return
	}
	n := float64(s.n)
	mean := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / n }
	b.ReportMetric(mean(s.planning), "planning-ns")
	b.ReportMetric(mean(s.tool), "tool-ns")
	b.ReportMetric(mean(s.prefill), "ttft-ns")
	b.ReportMetric(mean(s.decode), "decode-ns")
	b.ReportMetric(mean(s.tpot), "tpot-ns")
	b.ReportMetric(float64(s.promptTok)/n, "prompt-tok")
	b.ReportMetric(float64(s.genTok)/n, "gen-tok")
	if s.decode > 0 {
		b.ReportMetric(float64(s.genTok)/s.decode.Seconds(), "gen-tok/s")
	}
	if timed := s.planning + s.prefill + s.decode; timed > 0 {
		b.ReportMetric(float64(stampCost)*float64(s.chunks)/float64(timed)*1e6, "timing-ppm")
	}
	if s.timings > 0 {
		b.ReportMetric(s.serverPrefill/float64(s.timings)*1e6, "server-prefill-ns")
		b.ReportMetric(s.serverDecode/float64(s.timings)*1e6, "server-decode-ns")
	}
}

func BenchmarkAgent(b *testing.B) {
	m := startModel(b)
	defer m.stop()
	printEnv(b, m)
	dir := targetDir(b)
	files := writeTarget(b, dir)
	stampCost := agent.StampCost(100000)
	for _, size := range benchSizes {
		for _, guard := range guardList(*benchGuards) {
			b.Run(fmt.Sprintf("size=%s/guard=%s", size.name, guard), func(b *testing.B) {
				a := newBenchAgent(b, m, dir, guard, agent.Options{})
				var sums phaseSums
				ctx := context.Background()
				for b.Loop() {
					r, err := a.Run(ctx, task(files[size.name]))
					if err != nil {
						b.Fatal(err)
					}
					if r.Outcome != agent.Completed {
						b.Fatalf("run %s: %+v", r.Outcome, r.Verdict)
					}
					sums.add(r)
				}
				sums.report(b, stampCost)
			})
		}
	}
}
