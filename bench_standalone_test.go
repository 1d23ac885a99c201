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
	"github.com/mcpguard/mcpguard/lab/servers"
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rows := standaloneRows(ctx, tb, fx)
	last := map[string]string{}
	call := func(i int) float64 {
		r := rows[i]
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
		return float64(d)
	}
	// Warm-up: every row, every code path.
	measureRounds(len(rows), times(50), call)

	cpu0 := make([]int64, len(rows))
	for i, r := range rows {
		cpu0[i] = cpuNS(r.cpu)
	}
	more := times(rounds)
	if b, ok := tb.(*testing.B); ok {
		more = b.Loop
	}
	lat := measureRounds(len(rows), more, call)
	if b, ok := tb.(*testing.B); ok {
		b.StopTimer()
	}
	// Every row answered the same call with the server's own bytes (each
	// session numbered its calls alike, so even the ids match).
	for _, r := range rows {
		if last[r.name] != last["direct"] {
			tb.Errorf("%s answered %q; direct answered %q", r.name, last[r.name], last["direct"])
		}
	}
	n := len(lat[0])
	cpu := make([]float64, len(rows))
	for i, r := range rows {
		cpu[i] = float64(cpuNS(r.cpu)-cpu0[i]) / float64(n)
	}
	reportStandaloneRows(tb, rows, lat, cpu)
	reportInflight(tb, fx, rows)
}

// standaloneRows builds mcpguard and the relay and starts a session per
// row: direct, relay, relay+P, C0, C-app, C-full-landlock (where Landlock
// runs) and, with MCPGUARD_STANDALONE_BASE, base-C0 and base-C-app. The
// sessions close when tb ends.
func standaloneRows(ctx context.Context, tb testing.TB, fx *fsFixture) []*row {
	mcpguard, relay := buildStandalone(ctx, tb)
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
		tb.Cleanup(s.close)
		r.sess = s
		if r.name != "direct" {
			r.cpu = s.cmd.Process.Pid
		}
	}
	return rows
}

// buildStandalone builds mcpguard and the relay (testdata/relay).
func buildStandalone(ctx context.Context, tb testing.TB) (mcpguard, relay string) {
	bin := tb.TempDir()
	root, err := servers.Root()
	if err != nil {
		tb.Fatal(err)
	}
	for _, pkg := range []string{"./cmd/mcpguard", "./testdata/relay"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	return filepath.Join(bin, "mcpguard"), filepath.Join(bin, "relay")
}

// reportStandaloneRows reports each row's latency, its medians over the
// direct call, the relays and its base build, and the proxy's CPU per call
// and memory.
func reportStandaloneRows(tb testing.TB, rows []*row, lat latencies, cpu []float64) {
	const direct, relay, relayP = 0, 1, 2
	for i, r := range rows {
		metrics := map[string]float64{
			"p50-ns": lat.quantile(i, 0.50),
			"p95-ns": lat.quantile(i, 0.95),
		}
		if i != direct {
			metrics["over-direct-ns"] = lat.over(i, direct)
		}
		if i > relay {
			metrics["over-relay-ns"] = lat.over(i, relay)
		}
		if i > relayP {
			metrics["over-relay+P-ns"] = lat.over(i, relayP)
		}
		if j := slices.IndexFunc(rows, func(b *row) bool { return b.name == "base-"+r.name }); j >= 0 {
			metrics["over-base-ns"] = lat.over(i, j)
			metrics["cpu-over-base-ns/call"] = cpu[i] - cpu[j]
		}
		if r.cpu != 0 {
			metrics["cpu-ns/call"] = cpu[i]
			metrics["rss-kB"] = float64(rssKB(r.cpu))
		}
		for _, unit := range slices.Sorted(maps.Keys(metrics)) {
			reportMetric(tb, metrics[unit], r.name+"-"+unit)
		}
		if r.cpu != 0 && cpu[i] <= 0 {
			tb.Errorf("%s: no CPU time measured for pid %d", r.name, r.cpu)
		}
	}
}

// reportInflight measures throughput with 64 calls in flight, C-app
// against direct, in turns, with the relay beside them as the floor; and
// the proxies' CPU per call when calls arrive in bursts.
func reportInflight(tb testing.TB, fx *fsFixture, rows []*row) {
	byName := map[string]*row{}
	for _, r := range rows {
		byName[r.name] = r
	}
	calls := 2000
	if _, isB := tb.(*testing.B); !isB {
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
		reportMetric(tb, v, name+"-inflight64-calls/s")
		if name == "direct" {
			continue
		}
		perCall := float64(cpuIn[name]) / float64(3*calls)
		reportMetric(tb, v/d, name+"-inflight64-ratio")
		reportMetric(tb, perCall, name+"-inflight64-cpu-ns/call")
		if perCall <= 0 {
			tb.Errorf("%s: no CPU time measured in flight", name)
		}
	}
}

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
