package mcpguard_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/configs"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
	"github.com/mcpguard/mcpguard/lab/servers"
)

// BenchmarkGuard is the in-process latency table: one benign read_file of
// a small file through the Go filesystem server, kept warm, called through
// every config that can run here, with guard.Proxy in this process and an
// mcp-go client. Every session is open at once and each iteration (a
// round) makes the call once through each, in rotating order, so that
// every row sees the same history before each measured call (on VMs a
// session's latency depends on how long its processes slept) and machine
// drift falls on all alike; ns/op covers the round. Each row's
// sub-benchmark runs its own rounds and reports that row's latency
// (p50-ns, p95-ns, p99-ns), the medians of per-round differences against
// the direct call (overhead-p50-ns) and the C0 proxy (over-c0-p50-ns), and
// the allocations of one call (allocs/call, B/call, client and proxy sides
// together, measured after the loop). Configs that cannot run here (L3 on a kernel that refuses BPF
// LSM) are left out with the reason. One row is a reference, not a
// config: noop-stage, a Stage that changes nothing (the fast path's cost).
// The standalone benchmark (BenchmarkStandalone) measures what users of
// `mcpguard run` get; this one isolates the proxy from process start-up
// and pipes between processes.
func BenchmarkGuard(b *testing.B) { runGuard(b) }

// TestGuardRows runs every row of BenchmarkGuard a few times and checks
// that each answered the call with the file.
func TestGuardRows(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server per config")
	}
	runGuard(t)
}

type guardRow struct {
	name string
	c    *client.Client
}

func runGuard(tb testing.TB) {
	fx := newFSFixture(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	rows := openGuardRows(ctx, tb, fx)
	call := func(i int) float64 { return rows[i].call(ctx, tb, fx) }
	// Warm-up: every row, every code path.
	measureRounds(len(rows), times(50), call)
	b, isB := tb.(*testing.B)
	if !isB {
		measureRounds(len(rows), times(5), call)
		return
	}
	c0 := slices.IndexFunc(rows, func(r *guardRow) bool { return r.name == configs.C0 })
	// One sub-benchmark per row, each running the rounds of every row (so
	// ns/op covers one call through each) and reporting its own row.
	for i, r := range rows {
		b.Run(r.name, func(b *testing.B) {
			lat := measureRounds(len(rows), b.Loop, call)
			b.StopTimer()
			b.ReportMetric(lat.quantile(i, 0.50), "p50-ns")
			b.ReportMetric(lat.quantile(i, 0.95), "p95-ns")
			b.ReportMetric(lat.quantile(i, 0.99), "p99-ns")
			if i != 0 {
				b.ReportMetric(lat.over(i, 0), "overhead-p50-ns")
			}
			if i != 0 && i != c0 {
				b.ReportMetric(lat.over(i, c0), "over-c0-p50-ns")
			}
			reportAllocs(b, func() { call(i) })
		})
	}
}

// openGuardRows opens the rows: the server direct, then a guard.Proxy
// session per config that can run here, then noop-stage.
func openGuardRows(ctx context.Context, tb testing.TB, fx *fsFixture) []*guardRow {
	direct, err := client.NewStdioMCPClient(fx.argv[0], nil, fx.argv[1:]...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { direct.Close() })
	if _, err := direct.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: guard.ProtocolVersion,
		ClientInfo:      mcp.Implementation{Name: "bench", Version: "1"},
	}}); err != nil {
		tb.Fatal(err)
	}
	rows := []*guardRow{{name: "direct", c: direct}}
	open := func(name string, p *guard.Proxy) {
		s, err := guard.Open(ctx, p)
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		tb.Cleanup(func() { s.Close() })
		rows = append(rows, &guardRow{name: name, c: s.Client})
	}
	for _, name := range configs.Names() {
		setup, err := configs.Build(name, fx.options())
		if errors.Is(err, configs.ErrUnavailable) {
			tb.Logf("config %s cannot run here: %v", name, err)
			continue
		}
		if err != nil {
			tb.Fatal(err)
		}
		open(name, &guard.Proxy{
			Command: fx.argv, Server: "filesystem", Config: name,
			Stages: setup.Stages, ServerHooks: setup.ServerHooks,
			Prepare: setup.Prepare, Sandbox: setup.Sandbox,
		})
	}
	open("noop-stage", &guard.Proxy{Command: fx.argv, Server: "filesystem", Config: "noop-stage",
		Stages: []guard.Stage{noopStage{}}})
	return rows
}

// call makes the fixture's read_file through the row, checks that the file
// came back, and returns the latency in ns.
func (r *guardRow) call(ctx context.Context, tb testing.TB, fx *fsFixture) float64 {
	t0 := time.Now()
	res, err := r.c.CallTool(ctx, fx.req)
	d := time.Since(t0)
	if err != nil {
		tb.Fatalf("%s: %v", r.name, err)
	}
	if res.IsError || len(res.Content) == 0 {
		tb.Fatalf("%s: read_file failed: %v", r.name, res.Content)
	}
	if tc, ok := res.Content[0].(mcp.TextContent); !ok || !strings.Contains(tc.Text, "a small file of notes") {
		tb.Fatalf("%s: read_file returned %v", r.name, res.Content)
	}
	return float64(d.Nanoseconds())
}

// reportAllocs reports the allocations of one call, client and proxy
// sides together (the whole process's), over 100 calls.
func reportAllocs(b *testing.B, call func()) {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	const calls = 100
	for range calls {
		call()
	}
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/calls, "allocs/call")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/calls, "B/call")
}

// noopStage is a Stage that changes nothing.
type noopStage struct{}

func (noopStage) Request(context.Context, *guard.Request) *guard.Response { return nil }
func (noopStage) Response(_ context.Context, _ *guard.Request, r *guard.Response) *guard.Response {
	return r
}

// fsFixture is a workspace with a small file and the filesystem server built.
type fsFixture struct {
	ws, tmp, home string
	argv          []string
	req           mcp.CallToolRequest
	// readFile is the same call as a JSON-RPC line, with "id":0 for the
	// caller to number.
	readFile string
}

func newFSFixture(tb testing.TB) *fsFixture {
	tb.Helper()
	fx := &fsFixture{ws: tb.TempDir(), tmp: tb.TempDir(), home: tb.TempDir()}
	if err := os.WriteFile(filepath.Join(fx.ws, "notes.txt"), []byte("a small file of notes\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	bin := tb.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := servers.Build(ctx, bin, "filesystem"); err != nil {
		tb.Fatal(err)
	}
	argv, err := servers.Command(ctx, "filesystem", bin)
	if err != nil {
		tb.Fatal(err)
	}
	fx.argv = append(argv, "--ws", fx.ws)
	fx.req.Params.Name = "read_file"
	fx.req.Params.Arguments = map[string]any{"path": filepath.Join(fx.ws, "notes.txt")}
	path, _ := json.Marshal(filepath.Join(fx.ws, "notes.txt"))
	fx.readFile = `{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"read_file","arguments":{"path":` + string(path) + `}}}`
	return fx
}

func (fx *fsFixture) options() configs.Options {
	return configs.Options{
		Server:       "filesystem",
		PolicyFile:   "testdata/policies/filesystem.json",
		ManifestFile: "testdata/manifests/filesystem.json",
		Vars:         map[string]string{"WS": fx.ws, "HOME": fx.home, "TMP": fx.tmp},
	}
}
