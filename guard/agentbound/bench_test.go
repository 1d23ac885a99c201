package agentbound

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/internal/testenv"
)

// BenchmarkChecker times the C-AB check of one benign read_file (the call
// BenchmarkGuard makes) against the filesystem manifest, warm and with the
// core's caches evicted before each call (untimed), and reports the median
// per call: the cold figure is what the check costs in the proxy.
func BenchmarkChecker(b *testing.B) {
	ws := b.TempDir()
	require.NoError(b, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("notes"), 0o644))
	m, err := Load("../../testdata/manifests/filesystem.json", map[string]string{"WS": ws})
	require.NoError(b, err)
	c := NewChecker(m)
	args := json.RawMessage(`{"path":"` + filepath.Join(ws, "notes.txt") + `"}`)
	for _, mode := range []struct {
		name  string
		evict func()
	}{{"warm", nil}, {"cold", testenv.Evictor()}} {
		b.Run(mode.name, func(b *testing.B) {
			b.ReportAllocs()
			var ns []float64
			for b.Loop() {
				if mode.evict != nil {
					mode.evict()
				}
				t0 := time.Now()
				d := c.Check("read_file", args)
				ns = append(ns, float64(time.Since(t0)))
				if d != nil {
					b.Fatalf("benign call denied: %s", d.Reason)
				}
			}
			slices.Sort(ns)
			b.ReportMetric(ns[len(ns)/2], "p50-ns")
		})
	}
}
