//go:build linux

package policy_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/guard/internal/stagetest"
	"github.com/mcpguard/mcpguard/internal/testenv"
	"github.com/mcpguard/mcpguard/lab/servers"
)

// BenchmarkPolicy times one benign tools/call (read_file of a workspace
// file) through the C-app layers as configs.Build assembles them (L1
// policy with schema validation and symlink-resolving path check, L2
// argument content checks, L2 response checks), against a server stub that
// answers at once, and reports the median and p95 per call.
func BenchmarkPolicy(b *testing.B) { benchPolicy(b, nil, "read_file", "") }

// BenchmarkPolicyText is BenchmarkPolicy for a write_file of a paragraph
// of prose (about 1 KiB): free text, where the secret rules' short
// keywords ("key", "sk", "ey", "s.") occur in ordinary words.
func BenchmarkPolicyText(b *testing.B) {
	para := "The session keeps a key to the cache; they asked us to check the tasks. " +
		"Next steps: review the API docs, ask the team, update notes.txt and the README. "
	benchPolicy(b, nil, "write_file", strings.Repeat(para, 1024/len(para)+1))
}

// BenchmarkPolicyCold is BenchmarkPolicy with the CPU's private caches
// and TLB evicted before each call, untimed: in the proxy the layers run
// after the server and the client had the core, and there they cost
// several times what a warm loop shows. This is the figure to move when
// BenchmarkGuard's C-app overhead is the target; ns/op includes the
// eviction, p50-ns and cpu-ns/op do not.
func BenchmarkPolicyCold(b *testing.B) { benchPolicy(b, testenv.Evictor(), "read_file", "") }

// benchPolicy runs BenchmarkPolicy: a call of tool (read_file, or
// write_file with content) on a workspace file; evict, when not nil, runs
// before each call outside the measured time.
func benchPolicy(b *testing.B, evict func(), tool, content string) {
	dir := shortRunDir(b)
	ws := filepath.Join(dir, "ws")
	require.NoError(b, os.MkdirAll(filepath.Join(ws, "docs"), 0o755))
	require.NoError(b, os.WriteFile(filepath.Join(ws, "docs", "notes.txt"), []byte("hello"), 0o644))
	pol := filepath.Join(dir, "fs.json")
	require.NoError(b, os.WriteFile(pol, []byte(`{
	  "server": "filesystem",
	  "workdir": "${WS}",
	  "tools": {"read_file": {
	    "schema": {"type": "object", "properties": {"path": {"type": "string", "minLength": 1}}, "required": ["path"], "additionalProperties": false},
	    "args": {"path": {"kind": "path", "access": "read"}}},
	    "write_file": {
	    "schema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"], "additionalProperties": false},
	    "args": {"path": {"kind": "path", "access": "write"}, "content": {"kind": "text"}}}},
	  "filesystem": {"read": ["${WS}"], "write": ["${WS}"]},
	  "env": {"allow": ["PATH", "HOME"]}
	}`), 0o644))
	setup, err := configs.Build(configs.CApp, configs.Options{Server: "filesystem", PolicyFile: pol,
		Vars: map[string]string{"WS": ws, "HOME": dir, "TMP": dir}})
	require.NoError(b, err)
	result := json.RawMessage(`{"content":[{"type":"text","text":"hello, this is the content of notes.txt"}]}`)
	h := guard.Handler(func(context.Context, *guard.Request) *guard.Response {
		return &guard.Response{Result: result}
	})
	for i := len(setup.Stages) - 1; i >= 0; i-- {
		h = stagetest.Handler(setup.Stages[i], h)
	}
	call := map[string]string{"path": ws + "/docs/notes.txt"}
	if tool == "write_file" {
		call["content"] = content
	}
	args, err := json.Marshal(call)
	require.NoError(b, err)
	ctx := context.Background()
	req := &guard.Request{Method: "tools/call", Tool: tool, Arguments: args, Server: "filesystem", Config: configs.CApp}
	if r := h(ctx, req); r.Error != nil {
		b.Fatalf("benign call denied: %s", r.Error.Message)
	}
	b.ReportAllocs()
	// The layers run on the calling goroutine: pinned to its thread, the
	// thread's CPU time is the work done, even on a loaded machine where
	// wall-clock percentiles include time spent descheduled.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Warm, the thread's CPU time is read once around the loop (a system
	// call between calls would itself cool the caches); cold, around each
	// call, to leave the eviction out.
	var ns []float64
	var cpu time.Duration
	loop0 := threadCPU(b)
	for b.Loop() {
		var c0 time.Duration
		if evict != nil {
			evict()
			c0 = threadCPU(b)
		}
		t0 := time.Now()
		r := h(ctx, req)
		ns = append(ns, float64(time.Since(t0)))
		if evict != nil {
			cpu += threadCPU(b) - c0
		}
		if r.Error != nil {
			b.Fatal(r.Error.Message)
		}
	}
	if evict == nil {
		cpu = threadCPU(b) - loop0
	}
	n := len(ns)
	slices.Sort(ns)
	b.ReportMetric(ns[len(ns)/2], "p50-ns")
	b.ReportMetric(ns[len(ns)*95/100], "p95-ns")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/op")
}

// shortRunDir is a temporary directory whose path has no long run of
// letters and digits. b.TempDir's (/tmp/BenchmarkPolicy<random>/001)
// has one of 24 or more most of the time, and then the secret ruleset's
// prefilter lets a rule's regex run on every call: the figure would
// depend on the random name.
func shortRunDir(b *testing.B) string {
	dir, err := os.MkdirTemp("", "mcpguard.bench.")
	require.NoError(b, err)
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// threadCPU is the calling thread's user+system CPU time.
func threadCPU(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPolicyProxy times a benign read_file on the corpus's filesystem
// server through the real proxy with one no-op stage and with the C-app
// layers. Each iteration calls a C0 proxy (no layer: raw forwarding) and
// then the one under test, so that drift falls on both (paired);
// over-c0-p50-ns is the difference of their medians. For noop-stage it is
// what judging at all costs the proxy (the Request for the stages, the
// response phase on the server's read loop); C-app's minus noop-stage's
// is what L1+L2 cost in place, on the caches the server left.
func BenchmarkPolicyProxy(b *testing.B) {
	ws := b.TempDir()
	require.NoError(b, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("hello from the workspace"), 0o644))
	argv, err := servers.Command(context.Background(), "filesystem", b.TempDir())
	require.NoError(b, err)
	argv = append(argv, "--ws", ws)
	root, err := servers.Root()
	require.NoError(b, err)
	setup, err := configs.Build(configs.CApp, configs.Options{Server: "filesystem",
		PolicyFile: filepath.Join(root, "testdata/policies/filesystem.json"),
		Vars:       map[string]string{"WS": ws, "HOME": b.TempDir(), "TMP": b.TempDir()}})
	require.NoError(b, err)
	ctx := context.Background()
	open := func(b *testing.B, name string, stages []guard.Stage, prepare []func(*exec.Cmd) error) *guard.Session {
		s, err := guard.Open(ctx, &guard.Proxy{Command: argv, Server: "filesystem", Config: name,
			Stages: stages, Prepare: prepare, Grace: 500 * time.Millisecond})
		require.NoError(b, err)
		b.Cleanup(func() { s.Close() })
		return s
	}
	c0 := open(b, "C0", nil, nil)
	req := mcp.CallToolRequest{}
	req.Params.Name = "read_file"
	req.Params.Arguments = map[string]any{"path": filepath.Join(ws, "notes.txt")}
	for _, c := range []struct {
		name    string
		stages  []guard.Stage
		prepare []func(*exec.Cmd) error
	}{
		{"noop-stage", []guard.Stage{noopStage{}}, nil},
		{"C-app", setup.Stages, setup.Prepare},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := open(b, c.name, c.stages, c.prepare)
			sessions := []*guard.Session{c0, s}
			lat := make([][]float64, len(sessions))
			call := func(i int) {
				t0 := time.Now()
				if _, err := sessions[i].CallTool(ctx, req); err != nil {
					b.Fatal(err)
				}
				lat[i] = append(lat[i], float64(time.Since(t0)))
			}
			for range 50 { // warm-up, not kept
				call(0)
				call(1)
			}
			lat[0], lat[1] = lat[0][:0], lat[1][:0]
			for b.Loop() {
				call(0)
				call(1)
			}
			for _, l := range lat {
				slices.Sort(l)
			}
			p50 := func(l []float64) float64 { return l[(len(l)-1)/2] }
			b.ReportMetric(p50(lat[1]), "p50-ns")
			b.ReportMetric(lat[1][len(lat[1])*95/100], "p95-ns")
			b.ReportMetric(p50(lat[1])-p50(lat[0]), "over-c0-p50-ns")
		})
	}
}

// noopStage judges nothing and changes nothing.
type noopStage struct{}

func (noopStage) Request(context.Context, *guard.Request) *guard.Response { return nil }
func (noopStage) Response(_ context.Context, _ *guard.Request, r *guard.Response) *guard.Response {
	return r
}
