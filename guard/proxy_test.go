package guard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/jsonrpc"
	"github.com/mcpguard/mcpguard/guard/validate"
)

// rawConn drives a proxy with hand-written JSON-RPC lines.
type rawConn struct {
	t      *testing.T
	in     *io.PipeWriter
	lines  chan []byte
	served chan error
	stderr *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startRaw(t *testing.T, mode string, stages ...guard.Stage) *rawConn {
	t.Helper()
	argv, env := serverCmd(t, mode)
	return startProxy(t, &guard.Proxy{Command: argv, Env: env, Stages: stages, Grace: 200 * time.Millisecond})
}

func startProxy(t *testing.T, p *guard.Proxy) *rawConn {
	t.Helper()
	cr, cw := io.Pipe()
	pr, pw := io.Pipe()
	c := &rawConn{t: t, in: cw, lines: make(chan []byte, 1024), served: make(chan error, 1), stderr: &syncBuffer{}}
	if p.Stderr == nil {
		p.Stderr = c.stderr
	}
	go func() {
		err := p.Serve(context.Background(), cr, pw)
		pw.Close()
		c.served <- err
	}()
	go func() {
		r := jsonrpc.NewReader(pr)
		for {
			line, err := r.Next()
			if err != nil {
				close(c.lines)
				return
			}
			c.lines <- append([]byte(nil), line...)
		}
	}()
	t.Cleanup(func() {
		cw.Close()
		select {
		case <-c.served:
		case <-time.After(10 * time.Second):
			t.Error("proxy did not stop after the client closed")
		}
	})
	return c
}

func (c *rawConn) send(line string) {
	c.t.Helper()
	_, err := io.WriteString(c.in, line+"\n")
	require.NoError(c.t, err)
}

func (c *rawConn) recv() map[string]any {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		require.True(c.t, ok, "proxy closed its output; stderr:\n%s", c.stderr.String())
		var m map[string]any
		require.NoError(c.t, json.Unmarshal(line, &m), "line %q", line)
		return m
	case <-time.After(20 * time.Second):
		c.t.Fatalf("no message from the proxy; stderr:\n%s", c.stderr.String())
	}
	return nil
}

func TestRawForwardKeepsIDsAndBytes(t *testing.T) {
	c := startRaw(t, "echo")
	for _, id := range []string{`1`, `"abc"`, `-5`, `1.5e3`} {
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"x","params":{"a":[1,2,{"b":"é"}]}}`)
		m := c.recv()
		want := map[string]any{}
		require.NoError(t, json.Unmarshal([]byte(id), new(any)))
		var wantID any
		json.Unmarshal([]byte(id), &wantID)
		assert.Equal(t, wantID, m["id"])
		want["echo"] = map[string]any{"a": []any{1.0, 2.0, map[string]any{"b": "é"}}}
		assert.Equal(t, want, m["result"])
	}
}

func TestMalformedClientMessages(t *testing.T) {
	t.Run("raw", func(t *testing.T) { testMalformed(t, startRaw(t, "echo")) })
	t.Run("judged", func(t *testing.T) {
		testMalformed(t, startRaw(t, "echo", noop{}))
	})
}

func testMalformed(t *testing.T, c *rawConn) {
	cases := []struct {
		line string
		code float64
		id   any
	}{
		{`this is not json`, jsonrpc.CodeParseError, nil},
		{`{"jsonrpc":"2.0","id":1,"method":`, jsonrpc.CodeParseError, nil},
		{`[1,2,3]`, jsonrpc.CodeInvalidRequest, nil},
		{`42`, jsonrpc.CodeInvalidRequest, nil},
		{"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"x\",\"params\":\"\xff\"}", jsonrpc.CodeParseError, 2.0},
		{`{"id":3,"method":"x"}`, jsonrpc.CodeInvalidRequest, 3.0},
		{`{"jsonrpc":"2.0","id":{"o":1},"method":"x"}`, jsonrpc.CodeInvalidRequest, nil},
		{`{"jsonrpc":"2.0","id":4}`, jsonrpc.CodeInvalidRequest, 4.0},
	}
	for _, tc := range cases {
		c.send(tc.line)
		m := c.recv()
		errObj, ok := m["error"].(map[string]any)
		require.True(t, ok, "no error for %q: %v", tc.line, m)
		assert.Equal(t, tc.code, errObj["code"], "code for %q", tc.line)
		assert.Equal(t, tc.id, m["id"], "id for %q", tc.line)
		assert.Contains(t, errObj["message"], "mcpguard: ")
		// The proxy keeps serving.
		c.send(`{"jsonrpc":"2.0","id":"after","method":"ok"}`)
		assert.Equal(t, "after", c.recv()["id"])
	}
}

func TestMalformedServerMessages(t *testing.T) {
	c := startRaw(t, "badserver")
	c.send(`{"jsonrpc":"2.0","id":9,"method":"x"}`)
	// The invalid UTF-8 response is not relayed, but the request is not lost:
	// it gets an error, and the notification after the garbage still passes.
	got := map[string]map[string]any{}
	for range 2 {
		m := c.recv()
		if _, ok := m["id"]; ok {
			got["response"] = m
		} else {
			got["notification"] = m
		}
	}
	require.Contains(t, got, "response")
	assert.Equal(t, 9.0, got["response"]["id"])
	assert.Equal(t, float64(jsonrpc.CodeInternalError), got["response"]["error"].(map[string]any)["code"])
	assert.Equal(t, "notifications/message", got["notification"]["method"])
	assert.Contains(t, c.stderr.String(), "server sent an invalid message")
}

func TestNotificationsBothWays(t *testing.T) {
	c := startRaw(t, "echo")
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`) // no answer expected
	c.send(`{"jsonrpc":"2.0","id":1,"method":"notify-first"}`)
	n := c.recv()
	assert.Equal(t, "notifications/progress", n["method"])
	assert.Equal(t, 1.0, c.recv()["id"])
}

// noop judges nothing and changes nothing: every request takes the fast
// path with a Request for the stages.
type noop struct{}

func (noop) Request(context.Context, *guard.Request) *guard.Response { return nil }
func (noop) Response(_ context.Context, _ *guard.Request, r *guard.Response) *guard.Response {
	return r
}

// waitsFor makes every tools/call wait (the slow path); with own set, the
// wait sends a request of its own first, and checks its answer.
type waitsFor struct {
	noop
	own bool
	n   *int64
}

func (w waitsFor) Wait(_ context.Context, req *guard.Request) func(context.Context, guard.Handler) {
	if req.Method != "tools/call" {
		return nil
	}
	return func(ctx context.Context, send guard.Handler) {
		if !w.own {
			return
		}
		id := fmt.Sprintf(`"own-%s"`, req.ID)
		if r := send(ctx, &guard.Request{Method: "tools/list", ID: json.RawMessage(id)}); r != nil && r.Error == nil {
			atomic.AddInt64(w.n, 1)
		}
	}
}

// Stages of every shape: none (raw forwarding), the fast path, the slow
// path, and the slow path with a request of the stage's own.
func stageShapes() map[string][]guard.Stage {
	return map[string][]guard.Stage{
		"none":          nil,
		"noop":          {noop{}},
		"wait":          {waitsFor{}},
		"wait-own":      {waitsFor{own: true, n: new(int64)}},
		"noop-then-own": {noop{}, waitsFor{own: true, n: new(int64)}},
	}
}

// Every request gets exactly one answer, with its own id, with 64 in flight.
func TestConcurrentRequestsAnsweredOnce(t *testing.T) {
	for name, stages := range stageShapes() {
		t.Run(name, func(t *testing.T) {
			c := startRaw(t, "echo", stages...)
			const n = 64
			go func() {
				for i := range n {
					c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t","arguments":{"i":%d}}}`, i, i))
				}
			}()
			seen := map[int]int{}
			for range n {
				m := c.recv()
				id := int(m["id"].(float64))
				seen[id]++
				args := m["result"].(map[string]any)["echo"].(map[string]any)["arguments"].(map[string]any)
				assert.Equal(t, float64(id), args["i"], "response carries its own request's data")
			}
			for i := range n {
				assert.Equal(t, 1, seen[i], "id %d", i)
			}
			for _, st := range stages {
				if w, ok := st.(waitsFor); ok && w.own {
					assert.Equal(t, int64(n), atomic.LoadInt64(w.n), "each wait got the answer to its own request")
				}
			}
			select {
			case extra := <-c.lines:
				t.Fatalf("extra message: %s", extra)
			case <-time.After(100 * time.Millisecond):
			}
		})
	}
}

// A client's cancellation forgets the request: the client gets no answer
// for it, not even when the server ends later, and it gets no response
// phase.
func TestCancelledRequestForgotten(t *testing.T) {
	g := &gate{started: make(chan struct{}, 1), release: make(chan struct{})}
	c := startRaw(t, "echo", g)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"hang"}`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"after"}`)
	assert.Equal(t, 2.0, c.recv()["id"], "the next request is served")
	c.in.Close()
	for line := range c.lines {
		t.Errorf("a message after the cancel: %s", line)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	assert.Equal(t, []string{"request 1", "request 2", "response 2"}, g.log)
}

// A client that closes its side after its requests (`printf REQUESTS |
// mcpguard run`) still reads the answers: the server sees EOF only once
// they came, even a server that drops running calls at EOF; a request the
// server never answers gets an error after the grace period. Both on the
// raw path (no stages) and through a stage.
func TestClientEOFWaitsForAnswers(t *testing.T) {
	for _, stages := range [][]guard.Stage{nil, {pauseID3{}}} {
		argv, env := serverCmd(t, "echo")
		c := startProxy(t, &guard.Proxy{Command: argv, Env: env, Stages: stages, Grace: 2 * time.Second})
		c.send(`{"jsonrpc":"2.0","id":1,"method":"late"}`)
		c.send(`{"jsonrpc":"2.0","id":2,"method":"hang"}`)
		c.send(`{"jsonrpc":"2.0","id":3,"method":"late"}`)
		c.in.Close()
		got := map[float64]map[string]any{}
		for line := range c.lines {
			var m map[string]any
			require.NoError(t, json.Unmarshal(line, &m))
			id, _ := m["id"].(float64)
			assert.NotContains(t, got, id, "answered twice: %s", line)
			got[id] = m
		}
		require.Len(t, got, 3, "every request answered, stages %d", len(stages))
		for _, id := range []float64{1, 3} {
			assert.Equal(t, map[string]any{"late": true}, got[id]["result"], "id %v", id)
		}
		assert.Contains(t, got[2], "error", "the request the server never answered")
	}
}

// pauseID3 holds request 3 in a Waiter's wait (the slow path) for 200 ms.
type pauseID3 struct{}

func (pauseID3) Wait(_ context.Context, req *guard.Request) func(context.Context, guard.Handler) {
	if string(req.ID) != "3" {
		return nil
	}
	return func(ctx context.Context, _ guard.Handler) {
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

func (pauseID3) Request(context.Context, *guard.Request) *guard.Response { return nil }
func (pauseID3) Response(_ context.Context, _ *guard.Request, r *guard.Response) *guard.Response {
	return r
}

func TestServerCrashAnswersPending(t *testing.T) {
	c := startRaw(t, "echo")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"boom"}`)
	m := c.recv()
	assert.Equal(t, 1.0, m["id"])
	e := m["error"].(map[string]any)
	assert.Equal(t, float64(jsonrpc.CodeServerExited), e["code"])
	assert.Contains(t, e["message"], "exit status 7")
	select {
	case err := <-c.served:
		require.ErrorIs(t, err, guard.ErrServerExited)
		assert.Contains(t, err.Error(), "exit status 7")
		c.served <- err // for Cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the server died")
	}
}

// sleeper makes every tools/call wait a millisecond on the slow path.
type sleeper struct{ noop }

func (sleeper) Wait(_ context.Context, req *guard.Request) func(context.Context, guard.Handler) {
	if req.Method != "tools/call" {
		return nil
	}
	return func(context.Context, guard.Handler) { time.Sleep(time.Millisecond) }
}

// Requests that keep coming through a layer while the server dies: each
// is answered at most once (a result, or the server's exit), Serve returns,
// and the race detector sees the request count settle before Serve waits
// on it.
func TestServerCrashDuringLayeredFlood(t *testing.T) {
	c := startRaw(t, "echo", sleeper{})
	go func() {
		for i := range 200 {
			method := "tools/call"
			if i == 20 {
				method = "boom"
			}
			if _, err := io.WriteString(c.in, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"name":"t","arguments":{}}}`+"\n", i, method)); err != nil {
				return // the session is over
			}
		}
	}()
	seen := map[float64]int{}
	exited := 0
	for line := range c.lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m), "line %q", line)
		id := m["id"].(float64)
		seen[id]++
		assert.Equal(t, 1, seen[id], "id %v answered twice", id)
		if e, ok := m["error"].(map[string]any); ok {
			assert.Equal(t, float64(jsonrpc.CodeServerExited), e["code"], "id %v: %v", id, e)
			exited++
		} else {
			assert.Less(t, id, 20.0, "a result for a request after the crash")
		}
	}
	assert.Positive(t, exited, "the crashing request is answered with the server's exit")
	err := <-c.served
	require.ErrorIs(t, err, guard.ErrServerExited)
	c.served <- err // for Cleanup
}

// A daemon that keeps the server's stdout open must not keep the session
// alive after the server exited.
func TestServerExitWithDaemonHoldingStdout(t *testing.T) {
	c := startRaw(t, "echo")
	start := time.Now()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"daemon-then-exit"}`)
	m := c.recv()
	assert.Equal(t, float64(jsonrpc.CodeServerExited), m["error"].(map[string]any)["code"])
	select {
	case err := <-c.served:
		require.ErrorIs(t, err, guard.ErrServerExited)
		c.served <- err
	case <-time.After(15 * time.Second):
		t.Fatal("Serve waited for the daemon holding the server's stdout")
	}
	assert.Less(t, time.Since(start), 10*time.Second)
	var pid int
	if _, err := fmt.Sscanf(c.stderr.String()[strings.Index(c.stderr.String(), "daemon pid"):], "daemon pid %d", &pid); err == nil {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}
}

func TestHugeMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 200 MB; skipped in -short")
	}
	c := startRaw(t, "echo")
	size := 100 << 20
	if raceEnabled {
		size = 8 << 20
		t.Logf("race detector on: %d MB instead of 100 MB", size>>20)
	}
	payload := strings.Repeat("x", size)
	go c.send(`{"jsonrpc":"2.0","id":1,"method":"x","params":"` + payload + `"}`)
	select {
	case line := <-c.lines:
		require.Len(t, line, len(`{"jsonrpc":"2.0","id":1,"result":{"echo":""}}`)+len(payload))
		assert.True(t, bytes.Contains(line[:40], []byte(`"id":1`)))
	case <-time.After(60 * time.Second):
		t.Fatal("100 MB message did not come back")
	}
	payload = ""
	// Memory is bounded by the message in flight: after it, nothing big stays.
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	assert.Less(t, ms.HeapInuse, uint64(64<<20), "heap after a 100 MB message went through")
}

func TestTooLargeMessageRejected(t *testing.T) {
	argv, env := serverCmd(t, "echo")
	c := startProxy(t, &guard.Proxy{Command: argv, Env: env, MaxMessage: 1 << 20})
	c.send(`{"jsonrpc":"2.0","id":5,"method":"x","params":"` + strings.Repeat("y", 2<<20) + `"}`)
	m := c.recv()
	assert.Equal(t, 5.0, m["id"])
	assert.Equal(t, float64(jsonrpc.CodeTooLarge), m["error"].(map[string]any)["code"])
	c.send(`{"jsonrpc":"2.0","id":6,"method":"x"}`)
	assert.Equal(t, 6.0, c.recv()["id"])
}

func TestStubbornServerIsKilled(t *testing.T) {
	argv, env := serverCmd(t, "stubborn")
	var pid int
	stderr := &syncBuffer{}
	p := &guard.Proxy{Command: argv, Env: env, Grace: 100 * time.Millisecond, Stderr: stderr, OnStart: func(p int) { pid = p }}
	cr, cw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.Serve(context.Background(), cr, io.Discard) }()
	// Only once it ignores SIGTERM is the server stubborn.
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "ready") }, 20*time.Second, 10*time.Millisecond)
	start := time.Now()
	cw.Close()
	select {
	case err := <-done:
		require.NoError(t, err, "client-initiated shutdown is not an error")
	case <-time.After(10 * time.Second):
		t.Fatal("stubborn server outlived SIGKILL")
	}
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "EOF and SIGTERM each got their grace period")
	assertGone(t, pid)
}

func assertGone(t *testing.T, pid int) {
	t.Helper()
	require.NotZero(t, pid)
	// Reaped (no zombie) and killed: kill(pid, 0) fails with ESRCH.
	require.Eventually(t, func() bool {
		return processGone(pid)
	}, 5*time.Second, 10*time.Millisecond, "process %d still exists", pid)
}

// newClient connects an mcp-go client through a C0 proxy to the mcp-go test server.
func newSession(t *testing.T, stages []guard.Stage, opts ...client.ClientOption) (*guard.Session, *int) {
	t.Helper()
	argv, env := serverCmd(t, "mcp")
	pid := new(int)
	stderr := &syncBuffer{}
	p := &guard.Proxy{Command: argv, Env: env, Stages: stages, Stderr: stderr, Grace: time.Second, OnStart: func(p int) { *pid = p }}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := guard.Open(ctx, p, opts...)
	require.NoError(t, err, "stderr: %s", stderr.String())
	return s, pid
}

// A server that changes a tool mid-session and announces it gets no call
// to the changed tool from a client that keeps its old list: the proxy
// counts the server's notifications/tools/list_changed for the layers, and
// L2 lists the tools again before the next call and denies the rug pull.
// Without L2, the same call reaches the changed tool.
func TestAnnouncedRugPullWithoutClientList(t *testing.T) {
	// L2 waits for its own list on the proxy's slow path (a Waiter).
	for _, guarded := range []bool{false, true} {
		t.Run(fmt.Sprintf("L2=%v", guarded), func(t *testing.T) {
			var stages []guard.Stage
			if guarded {
				stages = append(stages, validate.Stage(validate.Options{}))
			}
			argv, env := serverCmd(t, "rugpull")
			stderr := &syncBuffer{}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := guard.Open(ctx, &guard.Proxy{Command: argv, Env: env, Stages: stages, Stderr: stderr, Grace: time.Second})
			require.NoError(t, err, "stderr: %s", stderr.String())
			defer s.Close()
			changed := make(chan struct{}, 4)
			s.OnNotification(func(n mcp.JSONRPCNotification) {
				if n.Method == guard.ToolsListChanged {
					changed <- struct{}{}
				}
			})
			tools, err := s.ListTools(ctx, mcp.ListToolsRequest{})
			require.NoError(t, err)
			require.Len(t, tools.Tools, 2)
			assert.Equal(t, "contents", callText(t, s.Client, "read_file", map[string]any{"path": "a"}))
			assert.Equal(t, "updated", callText(t, s.Client, "update", nil))
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatal("the server's tools/list_changed did not reach the client")
			}
			req := mcp.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = "read_file", map[string]any{"path": "a"}
			_, err = s.CallTool(ctx, req)
			if !guarded {
				require.NoError(t, err, "without L2 the changed tool is called")
				return
			}
			msg, denied := guard.IsDenied(err)
			require.True(t, denied, "the changed tool is denied: %v", err)
			assert.Contains(t, msg, validate.RuleRugPull)
		})
	}
}

type sampler struct{}

func (sampler) CreateMessage(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("4")}, Model: "test"}, nil
}

type rooter struct{}

func (rooter) ListRoots(ctx context.Context, req mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file:///data", Name: "data"}}}, nil
}

func callText(t *testing.T, c *client.Client, tool string, args map[string]any) string {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, req)
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	return res.Content[0].(mcp.TextContent).Text
}

// An mcp-go client and an mcp-go server round-trip everything through the proxy.
func TestMCPGoRoundTrip(t *testing.T) {
	for _, layered := range []bool{false, true} {
		t.Run(fmt.Sprintf("layers=%v", layered), func(t *testing.T) {
			var stages []guard.Stage
			if layered {
				stages = append(stages, noop{}, waitsFor{own: true, n: new(int64)})
			}
			s, pid := newSession(t, stages, client.WithSamplingHandler(sampler{}), client.WithRootsHandler(rooter{}))
			assert.Equal(t, "guard-test", s.Init.ServerInfo.Name)
			ctx := context.Background()

			tools, err := s.ListTools(ctx, mcp.ListToolsRequest{})
			require.NoError(t, err)
			assert.Len(t, tools.Tools, 7)
			assert.Equal(t, "héllo", callText(t, s.Client, "echo", map[string]any{"text": "héllo"}))

			notes := make(chan mcp.JSONRPCNotification, 4)
			s.OnNotification(func(n mcp.JSONRPCNotification) { notes <- n })
			assert.Equal(t, "notified", callText(t, s.Client, "notify", nil))
			select {
			case n := <-notes:
				assert.Equal(t, "notifications/message", n.Method)
			case <-time.After(5 * time.Second):
				t.Fatal("server notification did not reach the client")
			}

			assert.Equal(t, "llm said 4", callText(t, s.Client, "ask", nil), "sampling: server-to-client request")
			assert.Equal(t, "file:///data", callText(t, s.Client, "roots", nil), "roots: server-to-client request")

			res, err := s.ListResources(ctx, mcp.ListResourcesRequest{})
			require.NoError(t, err)
			require.Len(t, res.Resources, 1)
			rr, err := s.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "test://greeting"}})
			require.NoError(t, err)
			assert.Equal(t, "hello", rr.Contents[0].(mcp.TextResourceContents).Text)

			pr, err := s.GetPrompt(ctx, mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "ada"}}})
			require.NoError(t, err)
			assert.Equal(t, "hello ada", pr.Messages[0].Content.(mcp.TextContent).Text)

			require.NoError(t, s.Ping(ctx))
			require.NoError(t, s.Close())
			assertGone(t, *pid)
		})
	}
}

// A hanging call is cancelled by the client; the proxy keeps serving.
func TestHangingCallCancelled(t *testing.T) {
	s, _ := newSession(t, nil)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "sleep", map[string]any{"ms": 60000}
	_, err := s.CallTool(ctx, req)
	require.Error(t, err)
	assert.Equal(t, "ok", callText(t, s.Client, "echo", map[string]any{"text": "ok"}))
}

// The client disconnects with a call in flight and a child running: the
// server and its process group are gone afterwards.
func TestClientDisconnectStopsServerTree(t *testing.T) {
	s, pid := newSession(t, nil)
	child, err := strconv.Atoi(callText(t, s.Client, "spawn", nil))
	require.NoError(t, err)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "sleep", map[string]any{"ms": 60000}
		s.CallTool(context.Background(), req)
	}()
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, s.Close())
	assertGone(t, *pid)
	assertGone(t, child)
}

func TestCrashMidCallThroughClient(t *testing.T) {
	s, pid := newSession(t, nil)
	req := mcp.CallToolRequest{}
	req.Params.Name = "crash"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.CallTool(ctx, req)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "server exited")
	assert.ErrorIs(t, s.Close(), guard.ErrServerExited)
	assertGone(t, *pid)
}

func TestServerThatCannotStart(t *testing.T) {
	p := &guard.Proxy{Command: []string{"/nonexistent/server"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := guard.Open(ctx, p)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "start server")
}

func TestMain_noLeakedFDs(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc")
	}
	count := func() int { e, _ := os.ReadDir("/proc/self/fd"); return len(e) }
	before := count()
	for range 5 {
		s, _ := newSession(t, nil)
		require.NoError(t, s.Close())
	}
	// Allow a little slack for the runtime's own descriptors.
	assert.LessOrEqual(t, count(), before+2, "file descriptors leak per session")
}
