//go:build unix

package mcpguard_test

// BenchmarkFirewall drills into what LlamaFirewall-style guardrails cost one
// agent iteration: no firewall, each scanner alone, all together, by
// tool-output size. The regex, hidden-ASCII and PromptGuard scanners read the
// tool's output before it reaches the model; the AlignmentCheck judge reads
// the trace at each assistant action (the tool call and the final answer).
// The classifier is PROMPTGUARD_URL (TEI /predict by default, PROMPTGUARD_API=vllm
// for /classify), else the reference server's /predict; the judge uses the
// agent's own model endpoint.
//
// BenchmarkFirewallClient shows the client side of each scanner alone,
// against an endpoint that answers at once.

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpguard/mcpguard/agent"
	"github.com/mcpguard/mcpguard/agent/envinfo"
	"github.com/mcpguard/mcpguard/agent/firewall"
	"github.com/mcpguard/mcpguard/guard/classify/promptguard"
	"github.com/mcpguard/mcpguard/lab/llmtest"
	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/assert"
)

var benchFWSizes = flag.String("firewall.sizes", "1KiB,16KiB", "comma-separated tool-output sizes BenchmarkFirewall runs, of 1KiB, 16KiB, 128KiB (128KiB: the classifier and the judge each take seconds per iteration on the reference model)")

// scannerUnit names a scanner's metric.
func scannerUnit(name string) string { return strings.ReplaceAll(name, "_", "-") + "-ns" }

type fwSetup struct {
	name string
	// tool and assistant are the scanners per role.
	tool, assistant []firewall.Scanner
}

func firewallSetups(b testing.TB, m *benchModel) []fwSetup {
	b.Helper()
	url, api := m.cfg.ClassifierURL, firewall.ClassifierAPI(m.cfg.ClassifierAPI)
	if url == "" {
		url = m.rootURL
	}
	if url == "" {
		b.Fatal("an external VLLM_BASE_URL needs PROMPTGUARD_URL for the classifier")
	}
	pg, err := firewall.NewPromptGuard(firewall.PromptGuardOptions{URL: url, API: api, Model: m.cfg.ClassifierModel})
	if err != nil {
		b.Fatal(err)
	}
	llm := m.llm()
	if err := llm.ResolveModel(context.Background()); err != nil {
		b.Fatal(err)
	}
	judge, err := firewall.NewAlignment(firewall.AlignmentOptions{Client: llm.Client(), Model: llm.Model()})
	if err != nil {
		b.Fatal(err)
	}
	regex, hidden := firewall.NewRegex(), firewall.NewHiddenASCII()
	return []fwSetup{
		{name: "none"},
		{name: "regex", tool: []firewall.Scanner{regex}},
		{name: "hidden_ascii", tool: []firewall.Scanner{hidden}},
		{name: "promptguard", tool: []firewall.Scanner{pg}},
		{name: "alignment_check", assistant: []firewall.Scanner{judge}},
		{name: "all", tool: []firewall.Scanner{hidden, regex, pg}, assistant: []firewall.Scanner{judge}},
	}
}

func BenchmarkFirewall(b *testing.B)     { runFirewall(b) }
func TestBenchmarkFirewall(t *testing.T) { runFirewall(t) }

func runFirewall(tb testing.TB) {
	m := startModel(tb)
	defer m.stop()
	classifier := m.cfg.ClassifierURL
	if classifier == "" {
		classifier = "embedded reference server /predict (loopback HTTP)"
	}
	printEnv(tb, m, envinfo.Line{Key: "classifier-endpoint", Value: classifier})
	dir := targetDir(tb)
	files := writeTarget(tb, dir)
	setups := firewallSetups(tb, m)
	stampCost := agent.StampCost(100000)
	for _, size := range sizeList(tb, "firewall.sizes", *benchFWSizes) {
		for _, s := range setups {
			runRow(tb, fmt.Sprintf("size=%s/fw=%s", size, s.name), func(tb testing.TB, loop func() bool) metrics {
				var fw *firewall.Firewall
				if s.name != "none" {
					fw = firewall.New(map[firewall.Role][]firewall.Scanner{firewall.RoleTool: s.tool, firewall.RoleAssistant: s.assistant})
				}
				a := newBenchAgent(tb, m, dir, "none", agent.Options{Firewall: fw})
				var sums phaseSums
				ctx := context.Background()
				for loop() {
					r, err := a.Run(ctx, task(files[size]))
					if err != nil {
						tb.Fatal(err)
					}
					// A clean file must pass: a false positive would time a
					// shorter, blocked run instead of an iteration.
					switch r.Outcome {
					case agent.Completed, agent.NoAnswer:
					default:
						tb.Fatalf("clean file stopped (%s) by %s: %s", r.Outcome, r.Verdict.Scanner, r.Verdict.Reason)
					}
					sums.add(r)
				}
				if sums.n == 0 {
					tb.Errorf("no iteration completed: the model called a tool again instead of answering %d time(s)", sums.incomplete)
					return nil
				}
				ms := sums.metrics(stampCost)
				n := float64(sums.n)
				ms = append(ms, metric{"fw-ns", float64(sums.fw.Nanoseconds()) / n})
				if sums.total > 0 {
					ms = append(ms, metric{"fw-pct", 100 * float64(sums.fw) / float64(sums.total)})
				}
				for _, sc := range append(s.tool, s.assistant...) {
					ms = append(ms, metric{scannerUnit(sc.Name()), float64(sums.scanners[sc.Name()].Nanoseconds()) / n})
				}
				if !isBench(tb) {
					var scanned time.Duration
					for _, d := range sums.scanners {
						scanned += d
					}
					assert.Equal(tb, sums.fw, scanned, "the scanners' times add up to the firewall's")
					if s.name == "none" {
						assert.Zero(tb, sums.fw)
					} else {
						assert.Positive(tb, sums.fw)
					}
				}
				return ms
			})
		}
	}
}

// processCPU is the user+system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFirewallClient is each scanner's client side (request building,
// HTTP, parsing, segmenting) against an endpoint that answers at once, so
// the model's own compute is out of the picture: ns/op is the cost per scan.
func BenchmarkFirewallClient(b *testing.B) {
	srv := llmtest.New()
	defer srv.Close()
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = srv.BaseURL()
	judge, err := firewall.NewAlignment(firewall.AlignmentOptions{Client: openai.NewClientWithConfig(cfg), Model: "scripted"})
	if err != nil {
		b.Fatal(err)
	}
	tei, err := firewall.NewPromptGuard(firewall.PromptGuardOptions{URL: srv.URL, API: firewall.TEI})
	if err != nil {
		b.Fatal(err)
	}
	vllm, err := firewall.NewPromptGuard(firewall.PromptGuardOptions{URL: srv.URL, API: firewall.VLLM, Model: "pg"})
	if err != nil {
		b.Fatal(err)
	}
	scanners := []struct {
		name string
		s    firewall.Scanner
	}{{"regex", firewall.NewRegex()}, {"hidden_ascii", firewall.NewHiddenASCII()},
		{"promptguard-tei", tei}, {"promptguard-vllm", vllm}, {"alignment_check", judge}}
	trace := []firewall.Message{{Role: firewall.RoleUser, Content: "Read the file /data/notes.txt and summarize it."},
		{Role: firewall.RoleAssistant, ToolName: "read_file", ToolArgs: `{"path":"/data/notes.txt"}`}}
	for _, size := range benchSizes {
		text := strings.Repeat("the agent reads a file and reports what it holds. ", size.bytes/50+1)[:size.bytes]
		msg := firewall.Message{Role: firewall.RoleTool, ToolName: "read_file", Content: text}
		segs := len(promptguard.Segment(text, 510, promptguard.EstimateTokens))
		for _, sc := range scanners {
			b.Run(fmt.Sprintf("size=%s/scanner=%s", size.name, sc.name), func(b *testing.B) {
				ctx := context.Background()
				cpu0 := processCPU(b)
				for b.Loop() {
					d, err := sc.s.Scan(ctx, msg, trace)
					if err != nil || d.Action != firewall.Allow {
						b.Fatalf("clean text: %v %+v", err, d)
					}
				}
				// CPU time of the whole process per scan: the client plus the
				// in-process endpoint, so an upper bound on the client's own
				// work that other load on the machine does not inflate.
				b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
				if strings.HasPrefix(sc.name, "promptguard") {
					b.ReportMetric(float64(segs), "segments")
				}
			})
		}
	}
}
