package policy_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/configs"
)

// BenchmarkPolicy times one benign tools/call (read_file of a workspace
// file) through the C-app layers as configs.Build assembles them (L1
// policy with schema validation and symlink-resolving path check, L2
// argument content checks, L2 response checks), against a server stub that
// answers at once, and reports the median and p95 per call.
func BenchmarkPolicy(b *testing.B) {
	dir := b.TempDir()
	ws := filepath.Join(dir, "ws")
	require.NoError(b, os.MkdirAll(filepath.Join(ws, "docs"), 0o755))
	require.NoError(b, os.WriteFile(filepath.Join(ws, "docs", "notes.txt"), []byte("hello"), 0o644))
	pol := filepath.Join(dir, "fs.json")
	require.NoError(b, os.WriteFile(pol, []byte(`{
	  "server": "filesystem",
	  "workdir": "${WS}",
	  "tools": {"read_file": {
	    "schema": {"type": "object", "properties": {"path": {"type": "string", "minLength": 1}}, "required": ["path"], "additionalProperties": false},
	    "args": {"path": {"kind": "path", "access": "read"}}}},
	  "filesystem": {"read": ["${WS}"], "write": ["${WS}"]},
	  "env": {"allow": ["PATH", "HOME"]}
	}`), 0o644))
	setup, err := configs.Build(configs.CApp, configs.Options{Server: "filesystem", PolicyFile: pol,
		Vars: map[string]string{"WS": ws, "HOME": dir, "TMP": dir}})
	require.NoError(b, err)
	result := json.RawMessage(`{"content":[{"type":"text","text":"hello, this is the content of notes.txt"}]}`)
	h := guard.Chain(func(context.Context, *guard.Request) *guard.Response {
		return &guard.Response{Result: result}
	}, setup.Layers...)
	args := json.RawMessage(`{"path":"` + ws + `/docs/notes.txt"}`)
	ctx := context.Background()
	req := &guard.Request{Method: "tools/call", Tool: "read_file", Arguments: args, Server: "filesystem", Config: configs.CApp}
	if r := h(ctx, req); r.Error != nil {
		b.Fatalf("benign call denied: %s", r.Error.Message)
	}
	b.ReportAllocs()
	var ns []float64
	for b.Loop() {
		t0 := time.Now()
		r := h(ctx, req)
		ns = append(ns, float64(time.Since(t0)))
		if r.Error != nil {
			b.Fatal(r.Error.Message)
		}
	}
	slices.Sort(ns)
	b.ReportMetric(ns[len(ns)/2], "p50-ns")
	b.ReportMetric(ns[len(ns)*95/100], "p95-ns")
}
