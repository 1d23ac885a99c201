package mcpguard_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/internal/servers"
)

// The standalone benchmark measures what a user of `mcpguard run` gets: the
// proxy as a process of its own between a client and the Go filesystem
// server, next to the server direct and behind a byte relay (the floor of
// any stdio proxy), once as it is and once with the spare P that
// `mcpguard run` takes (relay+P). Every round sends one benign read_file to
// each session in rotating order, so that every row sees the same history
// before each measured call (on VMs, a session's latency depends on how
// long its processes slept); the figures are medians of per-round
// differences.
//
// TestStandalone runs a few rounds and checks that every row returned the
// file and that the proxies were measured; BenchmarkStandalone reports, per
// row: over-direct-ns, over-relay-ns and over-relay+P-ns (medians of
// per-round differences), p50-ns and p95-ns (the row's own latency),
// cpu-ns/call (the proxy's or the relay's CPU time per call, from
// /proc/<pid>/task/*/schedstat), and rss-kB (the proxy's resident memory,
// idle after the rounds); and the
// throughput of 64 calls in flight through C-app and through relay+P
// against the server direct (inflight64-ratio, calls/s of each), with the
// CPU per call of both in that mode (inflight64-cpu-ns/call): calls that
// arrive in bursts keep the proxy's threads awake, so this is its cost
// without the wake-ups and cold caches of one call at a time.
//
// MCPGUARD_STANDALONE_BASE=path/to/another/mcpguard adds that build's C0
// and C-app as rows base-C0 and base-C-app, and reports C0's and C-app's
// over-base-ns and cpu-over-base-ns/call: a change to the hot path
// measured against its parent in the same rounds.

func TestStandalone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mcpguard and runs it as a subprocess")
	}
	runStandalone(t, 5)
}

func BenchmarkStandalone(b *testing.B) { runStandalone(b, 0) }

// row is one session of the benchmark.
type row struct {
	name string
	sess *stdioSession
	cpu  int // the pid whose CPU is measured (0: none, for direct)
}

// runStandalone runs the rows; rounds > 0 runs that many (a test),
// 0 runs b.Loop.
func runStandalone(tb testing.TB, rounds int) {
	fx := newFSFixture(tb)
	bin := tb.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, pkg := range []string{"./cmd/mcpguard", "./testdata/relay"} {
		root, err := servers.Root()
		if err != nil {
			tb.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	mcpguard, relay := filepath.Join(bin, "mcpguard"), filepath.Join(bin, "relay")
	vars := []string{"--var", "WS=" + fx.ws, "--var", "HOME=" + fx.home, "--var", "TMP=" + fx.tmp}
	policy := []string{"--policy", "testdata/policies/filesystem.json"}
	guarded := func(config string, extra ...string) []string {
		argv := append([]string{mcpguard, "run", "--config", config}, extra...)
		return append(append(argv, "--"), fx.argv...)
	}

	// relay+P is the relay with the spare P that `mcpguard run` gives itself
	// (cmd/mcpguard/procs.go), so that the floor has the same advantage.
	spare := fmt.Sprintf("GOMAXPROCS=%d", runtime.GOMAXPROCS(0)+1)
	rows := []*row{{name: "direct"}, {name: "relay"}, {name: "relay+P"}, {name: "C0"}, {name: "C-app"}, {name: "C-full-landlock"}}
	argvs := map[string][]string{
		"direct":          fx.argv,
		"relay":           append([]string{relay}, fx.argv...),
		"relay+P":         append([]string{"env", spare, relay}, fx.argv...),
		"C0":              guarded(configs.C0),
		"C-app":           guarded(configs.CApp, append(policy, vars...)...),
		"C-full-landlock": guarded(configs.CFullLandlock, append(policy, vars...)...),
	}
	if setup, err := configs.Build(configs.CFullLandlock, fx.options()); err != nil {
		if !errors.Is(err, configs.ErrUnavailable) {
			tb.Fatal(err)
		}
		tb.Logf("row C-full-landlock skipped: %v", err)
		rows = rows[:len(rows)-1]
	} else if setup.Sandbox != nil {
		setup.Sandbox.Close()
	}
	// A base build to compare with, in the same rounds: per-round
	// differences cancel the machine's drift, which separate runs of the
	// benchmark do not.
	if base := os.Getenv("MCPGUARD_STANDALONE_BASE"); base != "" {
		for _, name := range []string{"C0", "C-app"} {
			argv := slices.Clone(argvs[name])
			argv[0] = base
			argvs["base-"+name] = argv
			rows = append(rows, &row{name: "base-" + name})
		}
	}
	for _, r := range rows {
		s, err := startSession(ctx, argvs[r.name])
		if err != nil {
			tb.Fatalf("%s: %v", r.name, err)
		}
		defer s.close()
		r.sess = s
		if r.name != "direct" {
			r.cpu = s.cmd.Process.Pid
		}
	}
	last := map[string]string{}
	call := func(r *row) time.Duration {
		t0 := time.Now()
		resp, err := r.sess.call(fx.readFile)
		d := time.Since(t0)
		if err != nil {
			tb.Fatalf("%s: %v", r.name, err)
		}
		if !bytes.Contains(resp, []byte("a small file of notes")) || bytes.Contains(resp, []byte(`"error"`)) {
			tb.Fatalf("%s returned %s", r.name, resp)
		}
		last[r.name] = string(resp)
		return d
	}
	// Warm-up: every row, every code path.
	for range 50 {
		for _, r := range rows {
			call(r)
		}
	}

	lat := make([][]float64, len(rows))
	cpu0 := make([]int64, len(rows))
	for i, r := range rows {
		cpu0[i] = cpuNS(r.cpu)
	}
	n := 0
	round := func() {
		for k := range rows {
			i := (n + k) % len(rows)
			lat[i] = append(lat[i], float64(call(rows[i])))
		}
		n++
	}
	b, isB := tb.(*testing.B)
	if isB {
		for b.Loop() {
			round()
		}
		b.StopTimer()
	} else {
		for range rounds {
			round()
		}
	}
	// Every row answered the same call with the server's own bytes (each
	// session numbered its calls alike, so even the ids match).
	for _, r := range rows {
		if last[r.name] != last["direct"] {
			tb.Errorf("%s answered %q; direct answered %q", r.name, last[r.name], last["direct"])
		}
	}
	cpu := make([]float64, len(rows))
	for i, r := range rows {
		cpu[i] = float64(cpuNS(r.cpu)-cpu0[i]) / float64(n)
	}
	direct, relayIdx, relayP := 0, 1, 2
	for i, r := range rows {
		over := func(base int) float64 {
			d := make([]float64, n)
			for k := range n {
				d[k] = lat[i][k] - lat[base][k]
			}
			return median(sorted(d))
		}
		own := sorted(slices.Clone(lat[i]))
		metrics := map[string]float64{
			"p50-ns": median(own),
			"p95-ns": own[int(0.95*float64(len(own)-1))],
		}
		if i != direct {
			metrics["over-direct-ns"] = over(direct)
		}
		if i > relayIdx {
			metrics["over-relay-ns"] = over(relayIdx)
		}
		if i > relayP {
			metrics["over-relay+P-ns"] = over(relayP)
		}
		if j := slices.IndexFunc(rows, func(b *row) bool { return b.name == "base-"+r.name }); j >= 0 {
			metrics["over-base-ns"] = over(j)
			metrics["cpu-over-base-ns/call"] = cpu[i] - cpu[j]
		}
		if r.cpu != 0 {
			metrics["cpu-ns/call"] = cpu[i]
			metrics["rss-kB"] = float64(rssKB(r.cpu))
		}
		for _, unit := range slices.Sorted(maps.Keys(metrics)) {
			v := metrics[unit]
			if isB {
				b.ReportMetric(v, r.name+"-"+unit)
			} else {
				tb.Logf("%s %s %.0f", r.name, unit, v)
			}
		}
		if r.cpu != 0 && cpu[i] <= 0 {
			tb.Errorf("%s: no CPU time measured for pid %d", r.name, r.cpu)
		}
	}

	// Throughput: 64 calls in flight, C-app against direct, in turns, with
	// the relay beside them as the floor; and the proxies' CPU per call
	// when calls arrive in bursts.
	byName := map[string]*row{}
	for _, r := range rows {
		byName[r.name] = r
	}
	calls := 2000
	if !isB {
		calls = 200
	}
	flight := []string{"direct", "relay+P", "C-app"}
	rate := map[string][]float64{}
	cpuIn := map[string]int64{}
	for range 3 {
		for _, name := range flight {
			r := byName[name]
			c0 := cpuNS(r.cpu)
			rate[name] = append(rate[name], inflight(tb, r.sess, fx, 64, calls))
			cpuIn[name] += cpuNS(r.cpu) - c0
		}
	}
	d := median(sorted(rate["direct"]))
	for _, name := range flight {
		v := median(sorted(rate[name]))
		perCall := float64(cpuIn[name]) / float64(3*calls)
		switch {
		case name == "direct" && isB:
			b.ReportMetric(v, name+"-inflight64-calls/s")
		case name == "direct":
			tb.Logf("64 in flight: direct %.0f calls/s", v)
		case isB:
			b.ReportMetric(v, name+"-inflight64-calls/s")
			b.ReportMetric(v/d, name+"-inflight64-ratio")
			b.ReportMetric(perCall, name+"-inflight64-cpu-ns/call")
		default:
			tb.Logf("64 in flight: %s %.0f calls/s (%.2f of direct), %.0f ns CPU per call", name, v, v/d, perCall)
		}
		if name != "direct" && perCall <= 0 {
			tb.Errorf("%s: no CPU time measured in flight", name)
		}
	}
}

func sorted(v []float64) []float64 { slices.Sort(v); return v }

// inflight keeps depth calls in flight on s until calls were answered and
// returns the rate.
func inflight(tb testing.TB, s *stdioSession, fx *fsFixture, depth, calls int) float64 {
	sem := make(chan struct{}, depth)
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		for range calls {
			sem <- struct{}{}
			if err := s.send(fx.readFile); err != nil {
				errc <- err
				return
			}
		}
	}()
	for range calls {
		line, err := s.recv()
		if err != nil {
			tb.Fatal(err)
		}
		if !bytes.Contains(line, []byte("a small file of notes")) {
			tb.Fatalf("in flight: %s", line)
		}
		<-sem
	}
	select {
	case err := <-errc:
		tb.Fatal(err)
	default:
	}
	return float64(calls) / time.Since(start).Seconds()
}

// stdioSession is an MCP client of the plainest kind: it writes JSON-RPC
// lines to a process and reads its answers, so the client's own cost is
// the same for every row and small.
type stdioSession struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	mu     sync.Mutex
	id     int
	buf    []byte
	stderr *bytes.Buffer
}

func startSession(ctx context.Context, argv []string) (*stdioSession, error) {
	root, err := servers.Root()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = root
	s := &stdioSession{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = s.stderr
	if s.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s.out = bufio.NewReaderSize(out, 1<<20)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`
	if _, err := s.call(init); err != nil {
		s.close()
		return nil, fmt.Errorf("initialize: %w (stderr: %s)", err, s.stderr)
	}
	if err := s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return nil, err
	}
	return s, nil
}

// send writes one request, or the notification as it is; a request's
// template has "id":0, replaced by the next id.
func (s *stdioSession) send(msg string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = s.buf[:0]
	if i := strings.Index(msg, `"id":0,`); i >= 0 {
		s.id++
		s.buf = append(s.buf, msg[:i+5]...)
		s.buf = strconv.AppendInt(s.buf, int64(s.id), 10)
		s.buf = append(s.buf, msg[i+6:]...)
	} else {
		s.buf = append(s.buf, msg...)
	}
	s.buf = append(s.buf, '\n')
	_, err := s.in.Write(s.buf)
	return err
}

func (s *stdioSession) recv() ([]byte, error) {
	line, err := s.out.ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return line, nil
}

func (s *stdioSession) call(msg string) ([]byte, error) {
	if err := s.send(msg); err != nil {
		return nil, err
	}
	return s.recv()
}

func (s *stdioSession) close() {
	s.in.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// cpuNS is the CPU time of every thread of pid so far, from schedstat;
// 0 for pid 0.
func cpuNS(pid int) int64 {
	if pid == 0 {
		return 0
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			v, _ := strconv.ParseInt(f[0], 10, 64)
			sum += v
		}
	}
	return sum
}

// rssKB is pid's resident memory.
func rssKB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}
