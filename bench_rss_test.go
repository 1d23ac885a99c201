package mcpguard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpguard/mcpguard/lab/servers"
)

// BenchmarkProxyRSS records what one large result costs a standalone
// `mcpguard run` in memory: the proxy's peak resident set (VmHWM) over its
// resident set after initialize, against the result's size, for each
// shape of result (one flat text, many small objects, deep nesting, one
// wide object) under C0 and C-app. Each iteration is a fresh session (the
// peak is the process's). Metrics: peak-MiB, over-idle-MiB, and x-size
// (over-idle / result size): the bound README states is on x-size.
//
//	go test -run '^$' -bench ProxyRSS -benchtime 1x .
func BenchmarkProxyRSS(b *testing.B) {
	bin := buildRSSBins(b)
	for _, config := range []string{"C0", "C-app"} {
		for _, shape := range []string{"flat", "objects", "nested", "wide"} {
			for _, mib := range []int{4, 24} {
				b.Run(fmt.Sprintf("config=%s/shape=%s/size=%dMiB", config, shape, mib), func(b *testing.B) {
					var peak, over, size float64
					for b.Loop() {
						m := rssOnce(b, bin, config, shape, mib<<20)
						peak, over, size = max(peak, m.peak), max(over, m.peak-m.idle), m.size
					}
					b.ReportMetric(peak/(1<<20), "peak-MiB")
					b.ReportMetric(over/(1<<20), "over-idle-MiB")
					b.ReportMetric(over/size, "x-size")
				})
			}
		}
	}
}

// TestProxyMemoryBound holds C-app to the bound README states, on the
// shapes that cost most: over its idle resident set, the proxy's peak
// stays under 8 times the result's size plus 64 MiB.
func TestProxyMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 3 x 24 MiB through the proxy")
	}
	bin := buildRSSBins(t)
	for _, shape := range []string{"objects", "wide", "flat"} {
		m := rssOnce(t, bin, "C-app", shape, 24<<20)
		bound := 8*m.size + 64<<20
		t.Logf("%s: result %.1f MiB, idle %.1f MiB, peak %.1f MiB (%.1fx over idle)", shape, m.size/(1<<20), m.idle/(1<<20), m.peak/(1<<20), (m.peak-m.idle)/m.size)
		if m.peak-m.idle > bound {
			t.Errorf("%s: the proxy grew by %.0f MiB for a %.0f MiB result (bound %.0f MiB)", shape, (m.peak-m.idle)/(1<<20), m.size/(1<<20), bound/(1<<20))
		}
	}
}

type rssBins struct{ mcpguard, server, policy string }

func buildRSSBins(tb testing.TB) rssBins {
	tb.Helper()
	root, err := servers.Root()
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	for _, pkg := range []string{"./cmd/mcpguard", "./testdata/bigresult"} {
		cmd := exec.Command("go", "build", "-o", dir, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	pol := filepath.Join(dir, "bigresult.json")
	p := `{"server":"bigresult","tools":{"big":{"schema":{"type":"object","properties":{"shape":{"type":"string"},"bytes":{"type":"integer"}},"additionalProperties":false}}},"env":{"allow":["PATH"]}}`
	if err := os.WriteFile(pol, []byte(p), 0o644); err != nil {
		tb.Fatal(err)
	}
	return rssBins{mcpguard: filepath.Join(dir, "mcpguard"), server: filepath.Join(dir, "bigresult"), policy: pol}
}

type rssMeasure struct{ idle, peak, size float64 }

// rssOnce runs one session: initialize, tools/list, one call of big; it
// returns the proxy's resident set after initialize and its peak.
func rssOnce(tb testing.TB, bin rssBins, config, shape string, n int) rssMeasure {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	argv := []string{bin.mcpguard, "run", "--config", config}
	if config != "C0" {
		argv = append(argv, "--policy", bin.policy)
	}
	s, err := startSession(ctx, append(argv, "--", bin.server))
	if err != nil {
		tb.Fatal(err)
	}
	defer s.close()
	pid := s.cmd.Process.Pid
	if _, err := s.call(`{"jsonrpc":"2.0","id":0,"method":"tools/list"}`); err != nil {
		tb.Fatal(err)
	}
	idle := float64(statusKB(pid, "VmRSS:")) * 1024
	args, _ := json.Marshal(map[string]any{"shape": shape, "bytes": n})
	if err := s.send(`{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"big","arguments":` + string(args) + `}}`); err != nil {
		tb.Fatal(err)
	}
	line, err := s.out.ReadBytes('\n')
	if err != nil {
		tb.Fatalf("%s %s: %v (stderr: %s)", config, shape, err, s.stderr)
	}
	if strings.Contains(string(line[:min(len(line), 200)]), `"error"`) {
		tb.Fatalf("%s %s: %s", config, shape, line[:min(len(line), 300)])
	}
	return rssMeasure{idle: idle, peak: float64(statusKB(pid, "VmHWM:")) * 1024, size: float64(len(line))}
}

// statusKB reads one field of /proc/pid/status in kB.
func statusKB(pid int, field string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}
