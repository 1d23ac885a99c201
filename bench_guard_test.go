package mcpguard_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/configs"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
	"github.com/mcpguard/mcpguard/servers"
)

// BenchmarkGuard is the latency table: one benign read_file of a small file
// through the Go filesystem server, kept warm, called through every config
// that can run here. Each iteration of a sub-benchmark makes the same call
// three ways, one after the other: directly to a server of its own, through
// a C0 proxy, and through the config under test, so that machine drift and
// background load fall on all three alike (paired measurement). A
// sub-benchmark reports the config's latency distribution (p50-ns, p95-ns,
// p99-ns), what it adds to the median of the direct call (overhead-p50-ns)
// and of the C0 call (over-c0-p50-ns) measured in the same loop, and the
// allocations of one call (allocs/call, B/call, client and proxy sides);
// ns/op covers the three calls. Configs that cannot run here (L3
// on a kernel that refuses BPF LSM) are skipped with the reason. The last
// row, noop-layer, is a reference, not a config: a chain of one layer that
// only calls next, i.e. what running a chain at all costs (each message
// decoded whole, the request run on a worker), apart from any layer's work.
func BenchmarkGuard(b *testing.B) {
	fx := newFSFixture(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	direct, err := client.NewStdioMCPClient(fx.argv[0], nil, fx.argv[1:]...)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	if _, err := direct.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: guard.ProtocolVersion,
		ClientInfo:      mcp.Implementation{Name: "bench", Version: "1"},
	}}); err != nil {
		b.Fatal(err)
	}
	c0, err := guard.Open(ctx, &guard.Proxy{Command: fx.argv, Server: "filesystem", Config: configs.C0})
	if err != nil {
		b.Fatal(err)
	}
	defer c0.Close()

	// paired measures p in the three-way loop and reports what it adds.
	paired := func(b *testing.B, p *guard.Proxy) {
		s, err := guard.Open(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		lat := benchCalls(b, fx.req, direct, c0.Client, s.Client)
		reportLatency(b, lat[2])
		b.ReportMetric(median(lat[2])-median(lat[0]), "overhead-p50-ns")
		b.ReportMetric(median(lat[2])-median(lat[1]), "over-c0-p50-ns")
	}
	b.Run("direct", func(b *testing.B) {
		lat := benchCalls(b, fx.req, direct)
		reportLatency(b, lat[0])
	})
	for _, name := range configs.Names() {
		b.Run(name, func(b *testing.B) {
			if name == configs.C0 {
				lat := benchCalls(b, fx.req, direct, c0.Client)
				reportLatency(b, lat[1])
				b.ReportMetric(median(lat[1])-median(lat[0]), "overhead-p50-ns")
				return
			}
			setup, err := configs.Build(name, fx.options())
			if errors.Is(err, configs.ErrUnavailable) {
				b.Skipf("config %s cannot run here: %v", name, err)
			}
			if err != nil {
				b.Fatal(err)
			}
			paired(b, &guard.Proxy{
				Command: fx.argv, Server: "filesystem", Config: name,
				Layers: setup.Layers, Prepare: setup.Prepare, Sandbox: setup.Sandbox,
			})
		})
	}
	b.Run("noop-layer", func(b *testing.B) {
		noop := func(next guard.Handler) guard.Handler { return next }
		paired(b, &guard.Proxy{Command: fx.argv, Server: "filesystem", Config: "noop-layer",
			Layers: []guard.Middleware{noop}})
	})
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

// benchCalls makes req through each client in turn, once per b.Loop
// iteration, after a warm-up, and returns each client's latencies, sorted.
func benchCalls(b *testing.B, req mcp.CallToolRequest, clients ...*client.Client) [][]float64 {
	ctx := context.Background()
	call := func(c *client.Client) {
		res, err := c.CallTool(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if res.IsError {
			b.Fatalf("read_file failed: %v", res.Content)
		}
	}
	for range 50 {
		for _, c := range clients {
			call(c)
		}
	}
	lat := make([][]float64, len(clients))
	for b.Loop() {
		for i, c := range clients {
			t0 := time.Now()
			call(c)
			lat[i] = append(lat[i], float64(time.Since(t0).Nanoseconds()))
		}
	}
	b.StopTimer()
	for _, l := range lat {
		slices.Sort(l)
	}
	// Allocations of one call through the last client (the config under
	// test), client and proxy sides together: ns/op's allocs would mix
	// the three clients.
	last := clients[len(clients)-1]
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	const n = 200
	for range n {
		call(last)
	}
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/n, "allocs/call")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/n, "B/call")
	return lat
}

// reportLatency reports the p50, p95 and p99 of sorted latencies.
func reportLatency(b *testing.B, lat []float64) {
	q := func(p float64) float64 { return lat[int(p*float64(len(lat)-1))] }
	b.ReportMetric(q(0.50), "p50-ns")
	b.ReportMetric(q(0.95), "p95-ns")
	b.ReportMetric(q(0.99), "p99-ns")
}

func median(sorted []float64) float64 { return sorted[(len(sorted)-1)/2] }
