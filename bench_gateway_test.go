package mcpguard_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpguard/mcpguard/lab/servers"
)

// The gateway benchmark measures what a client that connects by URL gets:
// one benign read_file on the Go filesystem server per row per round, in
// rotating rounds (bench_rounds_test.go), against the same server direct
// over stdio and behind `mcpguard run` (stdio), behind the gateway
// (`mcpguard gateway`, C0 and C-app) and, when scripts/deps.sh installed
// them (testdata/peers), behind the stdio-to-HTTP bridges users pick
// instead: supergateway 4.0.0 (--stateful: a server per session) and
// mcp-proxy 6.7.19 (one server for all its sessions). Every HTTP row is
// driven by the same plain Go client: one kept-alive connection per
// session, a POST that takes JSON or SSE.
//
// BenchmarkGateway reports, per row: over-direct-ns (the median of
// per-round differences against direct), p50-ns and p95-ns; cpu-ns/call,
// the bridge process's CPU per call in the rounds (schedstat; the node
// bridges' own process, not the server behind them); rss-kB, its resident
// memory idle after the rounds with one session open; and
// sessions64-ratio, the calls/s of 64 sessions each keeping one call going
// against 64 direct stdio sessions (sessions64-calls/s), three turns per
// row, alternated. The gateway rows add cpu-over-run, their CPU per call
// over `run`'s under the same config, and the C0 gateway init-cold-ns and
// init-warm-ns: a new session's initialize when its server starts then,
// and when it comes from a warm pool (gateway.json "warm").
//
// The http-floor row is the floor of any stdio-to-HTTP bridge built on
// net/http (testdata/httprelay: the body to the server's stdin, its next
// line back, nothing parsed; one session); every HTTP row reports
// over-floor-ns and cpu-over-floor-ns/call against it.
//
// Goals (issue 35): over-direct <= 150 µs, sessions64-ratio >= 0.7,
// cpu-over-run <= 1.5, and the peers behind on every row.
//
// MCPGUARD_GATEWAY_PROFILE=dir writes each gateway's CPU profile there
// (<row>.prof, `go tool pprof`).
//
// TestGatewayBench runs a few rounds of the mcpguard rows and checks that
// every row returned the server's answer and had its CPU measured.

func TestGatewayBench(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mcpguard and runs it as a subprocess")
	}
	runGatewayBench(t, gatewayBench{rounds: 5, sessions: 4, calls: 40})
}

func BenchmarkGateway(b *testing.B) {
	runGatewayBench(b, gatewayBench{sessions: 64, calls: 64 * 40, peers: true})
}

type gatewayBench struct {
	rounds   int  // latency rounds (0: b.Loop)
	sessions int  // for the throughput turns
	calls    int  // per throughput turn
	peers    bool // add supergateway and mcp-proxy when installed
}

// caller is one session of a row: it makes a call (a request template
// with "id":0, numbered by the session) and returns the response.
type caller interface {
	call(msg string) ([]byte, error)
	close()
}

// benchRow is one row: how to open a session on it, and the process whose
// CPU and memory are the bridge's (0 for direct).
type benchRow struct {
	name   string
	pid    int
	single bool // serves one session: no throughput turns
	http   bool // a Streamable HTTP bridge
	open   func() (caller, error)
	lat    caller   // the session of the latency rounds
	more   []caller // the others of the throughput turns
}

// bridgeBench is what the rows are built from.
type bridgeBench struct {
	tb        testing.TB
	ctx       context.Context
	fx        *fsFixture
	mcpguard  string
	httprelay string
	policy    string
	vars      []string
	stops     []func()
}

func runGatewayBench(tb testing.TB, o gatewayBench) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	env := newBridgeBench(tb, ctx)
	defer env.close()
	rows := env.rows(o.peers)
	for _, r := range rows {
		c, err := r.open()
		if err != nil {
			tb.Fatalf("%s: %v", r.name, err)
		}
		r.lat = c
	}
	defer func() {
		for _, r := range rows {
			for _, c := range append(r.more, r.lat) {
				if c != nil {
					c.close()
				}
			}
		}
	}()
	check := func(r *benchRow, resp []byte, err error) {
		if err != nil {
			tb.Fatalf("%s: %v", r.name, err)
		}
		if !bytes.Contains(resp, []byte("a small file of notes")) || bytes.Contains(resp, []byte(`"error"`)) {
			tb.Fatalf("%s returned %s", r.name, resp)
		}
	}
	call := func(i int) float64 {
		r := rows[i]
		t0 := time.Now()
		resp, err := r.lat.call(env.fx.readFile)
		d := time.Since(t0)
		check(r, resp, err)
		return float64(d)
	}
	for range 50 { // warm-up: every row, every code path
		for i := range rows {
			call(i)
		}
	}
	cpu0 := make([]int64, len(rows))
	for i, r := range rows {
		cpu0[i] = cpuNS(r.pid)
	}
	more := times(o.rounds)
	if b, ok := tb.(*testing.B); ok {
		more = b.Loop
	}
	lat := measureRounds(len(rows), more, call)
	if b, ok := tb.(*testing.B); ok {
		b.StopTimer()
	}
	n := len(lat[0])
	cpu := make([]float64, len(rows))
	for i, r := range rows {
		cpu[i] = float64(cpuNS(r.pid)-cpu0[i]) / float64(n)
		if r.pid != 0 && cpu[i] <= 0 {
			tb.Errorf("%s: no CPU time measured for pid %d", r.name, r.pid)
		}
	}
	for i, r := range rows {
		report := func(v float64, unit string) { reportMetric(tb, v, r.name+"-"+unit) }
		report(lat.quantile(i, 0.5), "p50-ns")
		report(lat.quantile(i, 0.95), "p95-ns")
		if i > 0 {
			report(lat.over(i, 0), "over-direct-ns")
		}
		if r.pid != 0 {
			report(cpu[i], "cpu-ns/call")
			report(float64(rssKB(r.pid)), "rss-kB")
		}
		if run := rowIndex(rows, strings.Replace(r.name, "gateway", "run", 1)); strings.HasPrefix(r.name, "gateway") && run >= 0 {
			report(cpu[i]/cpu[run], "cpu-over-run")
		}
		if floor := rowIndex(rows, "http-floor"); r.http && floor >= 0 && i != floor {
			report(lat.over(i, floor), "over-floor-ns")
			report(cpu[i]-cpu[floor], "cpu-over-floor-ns/call")
		}
	}
	env.throughput(rows, o)
	env.sessionStart(o)
}

func rowIndex(rows []*benchRow, name string) int {
	for i, r := range rows {
		if r.name == name {
			return i
		}
	}
	return -1
}

func newBridgeBench(tb testing.TB, ctx context.Context) *bridgeBench {
	root, err := servers.Root()
	if err != nil {
		tb.Fatal(err)
	}
	bin := tb.TempDir()
	for _, pkg := range []string{"./cmd/mcpguard", "./testdata/httprelay"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	fx := newFSFixture(tb)
	return &bridgeBench{tb: tb, ctx: ctx, fx: fx, mcpguard: filepath.Join(bin, "mcpguard"), httprelay: filepath.Join(bin, "httprelay"),
		policy: filepath.Join(root, "testdata/policies/filesystem.json"),
		vars:   []string{"WS=" + fx.ws, "HOME=" + fx.home, "TMP=" + fx.tmp}}
}

func (e *bridgeBench) close() {
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
}

// rows are the benchmark's rows, direct first.
func (e *bridgeBench) rows(peers bool) []*benchRow {
	var runApp []string
	for _, v := range e.vars {
		runApp = append(runApp, "--var", v)
	}
	runApp = append([]string{"--config", "C-app", "--policy", e.policy}, runApp...)
	rows := []*benchRow{
		e.stdioRow("direct", e.fx.argv, false),
		e.stdioRow("run-C0", append([]string{e.mcpguard, "run", "--config", "C0", "--"}, e.fx.argv...), true),
		e.stdioRow("run-C-app", append(append([]string{e.mcpguard, "run"}, runApp...), append([]string{"--"}, e.fx.argv...)...), true),
		e.gatewayRow("gateway-C0", "C0", 0),
		e.gatewayRow("gateway-C-app", "C-app", 0),
		e.floorRow(),
	}
	if !peers {
		return rows
	}
	peerDir := filepath.Join(filepath.Dir(e.policy), "..", "peers", "node_modules")
	node, err := exec.LookPath("node")
	if err != nil {
		e.tb.Logf("peers not measured: %v", err)
		return rows
	}
	if sg := filepath.Join(peerDir, "supergateway/dist/index.js"); exists(sg) {
		addr := freeBenchAddr(e.tb)
		_, port, _ := net.SplitHostPort(addr)
		rows = append(rows, e.httpRow("supergateway", "http://"+addr+"/mcp",
			[]string{node, sg, "--stdio", shellJoin(e.fx.argv), "--outputTransport", "streamableHttp", "--stateful",
				"--port", port, "--logLevel", "none"}))
	} else {
		e.tb.Logf("supergateway not measured: run scripts/deps.sh (testdata/peers)")
	}
	if mp := filepath.Join(peerDir, "mcp-proxy/dist/bin/mcp-proxy.mjs"); exists(mp) {
		addr := freeBenchAddr(e.tb)
		_, port, _ := net.SplitHostPort(addr)
		rows = append(rows, e.httpRow("mcp-proxy", "http://"+addr+"/mcp",
			append([]string{node, mp, "--port", port, "--host", "127.0.0.1", "--server", "stream", "--"}, e.fx.argv...)))
	} else {
		e.tb.Logf("mcp-proxy not measured: run scripts/deps.sh (testdata/peers)")
	}
	return rows
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// shellJoin quotes argv for a shell (supergateway runs its --stdio command
// through one).
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// stdioRow is a row whose sessions are processes on stdio: the server
// direct, or `mcpguard run` (whose pid is the bridge's, for the latency
// session).
func (e *bridgeBench) stdioRow(name string, argv []string, bridge bool) *benchRow {
	r := &benchRow{name: name}
	r.open = func() (caller, error) {
		s, err := startSession(e.ctx, argv)
		if err != nil {
			return nil, err
		}
		if bridge && r.pid == 0 {
			r.pid = s.cmd.Process.Pid
		}
		return s, nil
	}
	return r
}

// gatewayRow runs `mcpguard gateway` with the filesystem server under
// config (warm sessions kept started when warm > 0).
func (e *bridgeBench) gatewayRow(name, config string, warm int) *benchRow {
	vars := map[string]string{}
	for _, v := range e.vars {
		k, val, _ := strings.Cut(v, "=")
		vars[k] = val
	}
	sc := map[string]any{"config": config, "command": e.fx.argv, "vars": vars, "warm": warm}
	if config != "C0" {
		sc["policy"] = e.policy
	}
	cfg, _ := json.Marshal(map[string]any{"servers": map[string]any{"fs": sc}, "limits": map[string]any{"max_sessions": 512}})
	file := filepath.Join(e.tb.TempDir(), "gateway.json")
	if err := os.WriteFile(file, cfg, 0o600); err != nil {
		e.tb.Fatal(err)
	}
	addr := freeBenchAddr(e.tb)
	argv := []string{e.mcpguard, "gateway", "--config", file, "--listen", addr}
	if dir := os.Getenv("MCPGUARD_GATEWAY_PROFILE"); dir != "" {
		argv = append(argv, "--cpuprofile", filepath.Join(dir, name+".prof"))
	}
	return e.httpRow(name, "http://"+addr+"/servers/fs/mcp", argv)
}

// floorRow is the floor of a net/http bridge (testdata/httprelay): one
// session, bytes relayed without a look.
func (e *bridgeBench) floorRow() *benchRow {
	addr := freeBenchAddr(e.tb)
	r := e.httpRow("http-floor", "http://"+addr+"/mcp", append([]string{e.httprelay, addr}, e.fx.argv...))
	r.single = true
	return r
}

// httpRow starts a bridge process serving Streamable HTTP at url.
func (e *bridgeBench) httpRow(name, url string, argv []string) *benchRow {
	cmd := exec.CommandContext(e.ctx, argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		e.tb.Fatalf("%s: %v", name, err)
	}
	e.stops = append(e.stops, func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	r := &benchRow{name: name, pid: cmd.Process.Pid, http: true}
	r.open = func() (caller, error) { return openHTTP(e.ctx, url) }
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := r.open()
		if err == nil {
			c.close()
			return r
		}
		if time.Now().After(deadline) {
			e.tb.Fatalf("%s did not serve %s: %v\n%s", name, url, err, stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freeBenchAddr(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// throughput opens sessions-1 more sessions per row and runs, three times
// per row in alternation, calls over all of them with one call in flight
// per session; it reports each row's calls/s against direct's.
func (e *bridgeBench) throughput(all []*benchRow, o gatewayBench) {
	var rows []*benchRow
	for _, r := range all {
		if !r.single {
			rows = append(rows, r)
		}
	}
	for _, r := range rows {
		for range o.sessions - 1 {
			c, err := r.open()
			if err != nil {
				e.tb.Fatalf("%s: open session: %v", r.name, err)
			}
			r.more = append(r.more, c)
		}
	}
	rates := make([][]float64, len(rows))
	for range 3 {
		for i, r := range rows {
			rates[i] = append(rates[i], e.turn(r, o.calls))
		}
	}
	d := median(sorted(rates[0]))
	for i, r := range rows {
		v := median(sorted(rates[i]))
		reportMetric(e.tb, v, r.name+"-sessions"+strconv.Itoa(o.sessions)+"-calls/s")
		if i > 0 {
			reportMetric(e.tb, v/d, r.name+"-sessions"+strconv.Itoa(o.sessions)+"-ratio")
		}
	}
}

// turn makes calls calls over r's sessions, each keeping one in flight,
// and returns the rate.
func (e *bridgeBench) turn(r *benchRow, calls int) float64 {
	var left atomic.Int64
	left.Store(int64(calls))
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for _, c := range append([]caller{r.lat}, r.more...) {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				resp, err := c.call(e.fx.readFile)
				if err == nil && !bytes.Contains(resp, []byte("a small file of notes")) {
					err = fmt.Errorf("answered %s", resp)
				}
				if err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		e.tb.Fatalf("%s: %v", r.name, err)
	}
	return float64(calls) / time.Since(start).Seconds()
}

// sessionStart times a new session's initialize on a C0 gateway whose
// server starts with it, and on one that keeps two warm.
func (e *bridgeBench) sessionStart(o gatewayBench) {
	n := 9
	if o.rounds > 0 {
		n = 3
	}
	for _, warm := range []int{0, 2} {
		r := e.gatewayRow("gateway-init", "C0", warm)
		var d []float64
		for range n {
			time.Sleep(300 * time.Millisecond) // the pool refills
			t0 := time.Now()
			c, err := r.open()
			if err != nil {
				e.tb.Fatal(err)
			}
			d = append(d, float64(time.Since(t0)))
			c.close()
		}
		unit := "gateway-C0-init-cold-ns"
		if warm > 0 {
			unit = "gateway-C0-init-warm-ns"
		}
		reportMetric(e.tb, median(sorted(d)), unit)
	}
}

// httpCaller is a Streamable HTTP client session of the plainest kind:
// requests written by hand on one kept-alive connection and read back with
// http.ReadResponse, on the caller's goroutine (net/http's Transport would
// add two goroutines and their hand-offs to every row).
type httpCaller struct {
	ctx     context.Context
	addr    string // host:port
	path    string
	conn    net.Conn
	br      *bufio.Reader
	sid     string
	version string
	id      int
	body    []byte
	req     []byte
}

func openHTTP(ctx context.Context, url string) (*httpCaller, error) {
	rest, ok := strings.CutPrefix(url, "http://")
	addr, path, _ := strings.Cut(rest, "/")
	if !ok || addr == "" {
		return nil, fmt.Errorf("not an http URL: %s", url)
	}
	h := &httpCaller{ctx: ctx, addr: addr, path: "/" + path}
	resp, err := h.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	if err != nil {
		h.close()
		return nil, err
	}
	var m struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal(resp, &m); err != nil || m.Result.ProtocolVersion == "" || h.sid == "" {
		h.close()
		return nil, fmt.Errorf("initialize: %s", resp)
	}
	h.version = m.Result.ProtocolVersion
	if _, err := h.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

func (h *httpCaller) call(msg string) ([]byte, error) { return h.post(msg) }

// roundTrip sends one request and reads its response's head; a kept-alive
// connection the server closed meanwhile is replaced and the request sent
// again (nothing of it was read).
func (h *httpCaller) roundTrip(method string, body []byte) (*http.Response, error) {
	h.req = fmt.Appendf(h.req[:0], "%s %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json, text/event-stream\r\n", method, h.path, h.addr)
	if len(body) > 0 {
		h.req = fmt.Appendf(h.req, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	if h.sid != "" {
		h.req = fmt.Appendf(h.req, "Mcp-Session-Id: %s\r\n", h.sid)
	}
	if h.version != "" {
		h.req = fmt.Appendf(h.req, "Mcp-Protocol-Version: %s\r\n", h.version)
	}
	h.req = append(append(h.req, "\r\n"...), body...)
	for attempt := 0; ; attempt++ {
		if h.conn == nil {
			c, err := (&net.Dialer{}).DialContext(h.ctx, "tcp", h.addr)
			if err != nil {
				return nil, err
			}
			h.conn, h.br = c, bufio.NewReaderSize(c, 64<<10)
		}
		_, err := h.conn.Write(h.req)
		var resp *http.Response
		if err == nil {
			resp, err = http.ReadResponse(h.br, nil)
		}
		if err == nil {
			return resp, nil
		}
		h.conn.Close()
		h.conn = nil
		if attempt > 0 || h.br.Buffered() > 0 {
			return nil, err
		}
	}
}

// post sends msg (a request's "id":0 numbered) and returns the response:
// the JSON body, or the SSE event that carries the request's id.
func (h *httpCaller) post(msg string) ([]byte, error) {
	h.body = h.body[:0]
	want := ""
	if i := strings.Index(msg, `"id":0,`); i >= 0 {
		h.id++
		h.body = append(h.body, msg[:i+5]...)
		h.body = strconv.AppendInt(h.body, int64(h.id), 10)
		h.body = append(h.body, msg[i+6:]...)
		want = `"id":` + strconv.Itoa(h.id)
	} else {
		h.body = append(h.body, msg...)
	}
	resp, err := h.roundTrip(http.MethodPost, h.body)
	if err != nil {
		return nil, err
	}
	defer h.done(resp)
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" && h.sid == "" {
		h.sid = sid
	}
	switch {
	case resp.StatusCode == http.StatusAccepted:
		return nil, nil
	case resp.StatusCode != http.StatusOK:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("POST: %s: %s", resp.Status, b)
	case !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		return io.ReadAll(resp.Body)
	}
	var found []byte
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok && found == nil {
			d = bytes.TrimSpace(d)
			if bytes.Contains(d, []byte(want)) && (bytes.Contains(d, []byte(`"result"`)) || bytes.Contains(d, []byte(`"error"`))) {
				found = bytes.Clone(d)
			}
		}
	}
	if found == nil {
		return nil, fmt.Errorf("no response to %s on the stream: %v", want, sc.Err())
	}
	return found, nil
}

// done reads what is left of resp so that the connection can carry the
// next request, or drops the connection the server is closing.
func (h *httpCaller) done(resp *http.Response) {
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close && h.conn != nil {
		h.conn.Close()
		h.conn = nil
	}
}

func (h *httpCaller) close() {
	if h.sid != "" {
		if resp, err := h.roundTrip(http.MethodDelete, nil); err == nil {
			h.done(resp)
		}
	}
	if h.conn != nil {
		h.conn.Close()
		h.conn = nil
	}
}
