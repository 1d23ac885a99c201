package gateway_test

import (
	"bufio"
	"context"

	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/gateway"
	"github.com/mcpguard/mcpguard/guard"
)

// stdioSession is the raw test server behind an in-process guard.Proxy on
// pipes: what `mcpguard run` does between its stdin and stdout.
type stdioSession struct {
	w    io.WriteCloser
	r    *bufio.Reader
	done chan error
}

func startStdio(b *testing.B) *stdioSession {
	cfg := testServerConfig(b, "raw")
	p := &guard.Proxy{Command: cfg.Command, Env: append(slices.Clip(os.Environ()), cfg.Env...), Config: "C0", Stderr: io.Discard}
	cr, cw := io.Pipe()
	pr, pw := io.Pipe()
	s := &stdioSession{w: cw, r: bufio.NewReader(pr), done: make(chan error, 1)}
	go func() { s.done <- p.Serve(context.Background(), cr, pw); pw.Close() }()
	b.Cleanup(func() { cw.Close(); pr.Close(); <-s.done })
	s.call(b, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	return s
}

func (s *stdioSession) call(b *testing.B, line string) string {
	_, err := io.WriteString(s.w, line+"\n")
	require.NoError(b, err)
	resp, err := s.r.ReadString('\n')
	require.NoError(b, err)
	return resp
}

// BenchmarkAddedLatency times one tools/call through the gateway (HTTP on
// loopback, JSON response, a kept-alive connection) and one through the
// stdio proxy, alternately in each round, to the same kind of server. It
// reports each path's p50/p99 and what the HTTP side adds.
func BenchmarkAddedLatency(b *testing.B) {
	_, srv := startGateway(b, rawConfig(b))
	url := srv.URL + "/servers/raw/mcp"
	client := &http.Client{}
	ctx := context.Background()
	sid, err := initSession(ctx, client, url)
	require.NoError(b, err)
	st := startStdio(b)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`

	var httpD, stdioD, diff []time.Duration
	for b.Loop() {
		t0 := time.Now()
		resp := st.call(b, body)
		t1 := time.Now()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		req.Header.Set(gateway.HeaderSession, sid)
		hr, err := client.Do(req)
		require.NoError(b, err)
		hb, err := io.ReadAll(hr.Body)
		hr.Body.Close()
		t2 := time.Now()
		require.NoError(b, err)
		if !strings.Contains(resp, "done x") || !strings.Contains(string(hb), "done x") {
			b.Fatalf("unexpected answers: %q / %q", resp, hb)
		}
		stdioD = append(stdioD, t1.Sub(t0))
		httpD = append(httpD, t2.Sub(t1))
		diff = append(diff, t2.Sub(t1)-t1.Sub(t0))
	}
	pct := func(d []time.Duration, p float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(p*float64(len(s))))])
	}
	b.ReportMetric(pct(stdioD, 0.50), "stdio-p50-ns")
	b.ReportMetric(pct(stdioD, 0.99), "stdio-p99-ns")
	b.ReportMetric(pct(httpD, 0.50), "http-p50-ns")
	b.ReportMetric(pct(httpD, 0.99), "http-p99-ns")
	b.ReportMetric(pct(diff, 0.50), "added-p50-ns")
	b.ReportMetric(pct(httpD, 0.99)-pct(stdioD, 0.99), "added-p99-ns")
}

// BenchmarkSession times a session's life through the gateway (initialize,
// which starts a server process, then DELETE, which stops it), and reports
// the gateway's own memory per open session (its heap and goroutines with
// 20 sessions open; the server processes' memory is not in it).
func BenchmarkSession(b *testing.B) {
	const open = 20
	cfg := rawConfig(b)
	cfg.Limits.MaxSessions = open + 1
	g, srv := startGateway(b, cfg)
	url := srv.URL + "/servers/raw/mcp"
	client := &http.Client{}
	ctx := context.Background()
	del := func(sid string) {
		req, _ := http.NewRequest(http.MethodDelete, url, nil)
		req.Header.Set(gateway.HeaderSession, sid)
		resp, err := client.Do(req)
		require.NoError(b, err)
		resp.Body.Close()
	}

	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	h0, g0 := heap(), runtime.NumGoroutine()
	var sids []string
	for range open {
		sid, err := initSession(ctx, client, url)
		require.NoError(b, err)
		sids = append(sids, sid)
	}
	h1, g1 := heap(), runtime.NumGoroutine()
	for _, sid := range sids {
		del(sid)
	}
	require.Eventually(b, func() bool { return g.Sessions() == 0 }, 30*time.Second, 10*time.Millisecond)

	for b.Loop() {
		sid, err := initSession(ctx, client, url)
		require.NoError(b, err)
		del(sid)
	}
	b.ReportMetric(float64(int64(h1)-int64(h0))/open, "heap-B/session")
	b.ReportMetric(float64(g1-g0)/open, "goroutines/session")
}
