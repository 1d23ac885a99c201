package mcpguard_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
// through the Go filesystem server, kept warm, called directly and through
// every config that can run here. Each sub-benchmark reports the latency
// distribution (p50-ns, p95-ns, p99-ns) and, measured in the same process,
// what the config adds to the direct call's median (overhead-p50-ns). Configs
// that cannot run here (L3 on a kernel that refuses BPF LSM) are skipped
// with the reason.
func BenchmarkGuard(b *testing.B) {
	fx := newFSFixture(b)
	var direct float64
	b.Run("direct", func(b *testing.B) {
		c, err := client.NewStdioMCPClient(fx.argv[0], nil, fx.argv[1:]...)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
			ProtocolVersion: guard.ProtocolVersion,
			ClientInfo:      mcp.Implementation{Name: "bench", Version: "1"},
		}}); err != nil {
			b.Fatal(err)
		}
		direct = benchCalls(b, c, fx.req)[0]
	})
	for _, name := range configs.Names() {
		b.Run(name, func(b *testing.B) {
			setup, err := configs.Build(name, fx.options())
			if errors.Is(err, configs.ErrUnavailable) {
				b.Skipf("config %s cannot run here: %v", name, err)
			}
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := guard.Open(ctx, &guard.Proxy{
				Command: fx.argv, Server: "filesystem", Config: name,
				Layers: setup.Layers, Prepare: setup.Prepare, Sandbox: setup.Sandbox,
			})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			p := benchCalls(b, s.Client, fx.req)
			if direct > 0 {
				b.ReportMetric(p[0]-direct, "overhead-p50-ns")
			}
		})
	}
}

// fsFixture is a workspace with a small file and the filesystem server built.
type fsFixture struct {
	ws, tmp, home string
	argv          []string
	req           mcp.CallToolRequest
}

func newFSFixture(tb testing.TB) *fsFixture {
	tb.Helper()
	fx := &fsFixture{ws: tb.TempDir(), tmp: tb.TempDir(), home: tb.TempDir()}
	if err := os.WriteFile(filepath.Join(fx.ws, "notes.txt"), []byte("a small file of notes\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(os.TempDir(), "mcpguard-bench-bin")
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

// benchCalls times req through c in a b.Loop, after a warm-up, and reports
// the p50, p95 and p99 latencies; it returns them in that order.
func benchCalls(b *testing.B, c *client.Client, req mcp.CallToolRequest) []float64 {
	ctx := context.Background()
	call := func() {
		res, err := c.CallTool(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if res.IsError {
			b.Fatalf("read_file failed: %v", res.Content)
		}
	}
	for range 50 {
		call()
	}
	b.ReportAllocs()
	lat := make([]time.Duration, 0, 1<<14)
	for b.Loop() {
		t0 := time.Now()
		call()
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) }
	out := []float64{q(0.50), q(0.95), q(0.99)}
	b.ReportMetric(out[0], "p50-ns")
	b.ReportMetric(out[1], "p95-ns")
	b.ReportMetric(out[2], "p99-ns")
	return out
}
