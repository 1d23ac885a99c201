package guard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// recvRaw returns the next line from the proxy as sent.
func (c *rawConn) recvRaw() []byte {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		require.True(c.t, ok, "proxy closed its output; stderr:\n%s", c.stderr.String())
		return line
	case <-time.After(20 * time.Second):
		c.t.Fatalf("no message from the proxy; stderr:\n%s", c.stderr.String())
	}
	return nil
}

func (c *rawConn) noMore() {
	c.t.Helper()
	select {
	case extra := <-c.lines:
		c.t.Fatalf("extra message: %s", extra)
	case <-time.After(150 * time.Millisecond):
	}
}

// denyAll is a Stage that refuses every request and counts what it saw.
type denyAll struct{ seen []string }

func (d *denyAll) Request(_ context.Context, req *guard.Request) *guard.Response {
	d.seen = append(d.seen, req.Method)
	return guard.Deny("test", "all", "nothing passes")
}

func (d *denyAll) Response(_ context.Context, _ *guard.Request, resp *guard.Response) *guard.Response {
	return resp
}

// A message with "id": null is a request: servers answer it, so the layers
// judge it, and the answer goes to id null.
func TestNullIDIsJudged(t *testing.T) {
	d := &denyAll{}
	argv, env := serverCmd(t, "echo")
	c := startProxy(t, &guard.Proxy{Command: argv, Env: env, Stages: []guard.Stage{d}, Grace: 200 * time.Millisecond})
	c.send(`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t","arguments":{}}}`)
	m := c.recv()
	assert.Nil(t, m["id"])
	assert.Equal(t, float64(jsonrpc.CodeDenied), m["error"].(map[string]any)["code"])
	assert.Equal(t, []string{"tools/call"}, d.seen)
	c.noMore()
}

// The guard and the server must read one message: duplicate keys and keys
// that differ only in case are refused with -32600, to the request's id,
// and the server never sees them; the session goes on.
func TestAmbiguousMessagesRefused(t *testing.T) {
	for name, stages := range map[string][]guard.Stage{"raw": nil, "judged": {noop{}}, "waited": {waitsFor{}}} {
		t.Run(name, func(t *testing.T) {
			c := startRaw(t, "echo", stages...)
			for _, line := range []string{
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"ping","params":{"name":"t"}}`,
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"ping","params":{"name":"t"}}`,
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"path":"/a","path":"/etc/shadow"}}}`,
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","Arguments":{"path":"/etc/shadow"}}}`,
				`{"jsonrpc":"2.0","id":1,"\u006dethod":"x","method":"tools/call"}`,
			} {
				c.send(line)
				m := c.recv()
				require.Contains(t, m, "error", "%s: %v", line, m)
				assert.Equal(t, 1.0, m["id"], line)
				e := m["error"].(map[string]any)
				assert.Equal(t, float64(jsonrpc.CodeInvalidRequest), e["code"], line)
				assert.Regexp(t, "duplicate key|differs only in case", e["message"], line)
				c.send(`{"jsonrpc":"2.0","id":"after","method":"ok"}`)
				assert.Equal(t, "after", c.recv()["id"])
			}
		})
	}
}

// A server that writes ids another way (1 as 10e-1, "Ab" as "\u0041b",
// 1e400 as 10e399) still has each answer routed to its request, exactly
// once, and the client gets its own id bytes back.
func TestReencodedIDsRouted(t *testing.T) {
	for name, stages := range map[string][]guard.Stage{"raw": nil, "judged": {noop{}}, "waited": {waitsFor{}}} {
		t.Run(name, func(t *testing.T) {
			c := startRaw(t, "reencode", stages...)
			for _, id := range []string{`1`, `"Ab"`, `1e400`, `-2.5`, `"é"`} {
				c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"x","params":{}}`)
				line := c.recvRaw()
				assert.Contains(t, string(line), `"id":`+id+`,`, "the client's own id bytes")
				assert.Contains(t, string(line), `"result"`)
			}
			c.noMore()
		})
	}
}

// recorder is a Stage on the fast path: it rewrites the arguments of one
// tool, denies another, and replaces the result of a third.
type recorder struct{}

type stateKey struct{}

func (recorder) Request(_ context.Context, req *guard.Request) *guard.Response {
	switch req.Tool {
	case "deny":
		return guard.Deny("test", "deny", "denied by name")
	case "rewrite":
		req.Arguments = json.RawMessage(`{"path":"/judged"}`)
	}
	req.SetState(stateKey{}, req.Tool)
	return nil
}

func (recorder) Response(_ context.Context, req *guard.Request, resp *guard.Response) *guard.Response {
	if req.State(stateKey{}) == "replace" {
		return &guard.Response{Result: json.RawMessage(`{"replaced":true}`)}
	}
	return resp
}

func TestStagesFastPath(t *testing.T) {
	argv, env := serverCmd(t, "echo")
	c := startProxy(t, &guard.Proxy{Command: argv, Env: env, Stages: []guard.Stage{recorder{}}, Grace: 200 * time.Millisecond})
	call := func(id int, tool string) map[string]any {
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"path":"/asked"}}}`, id, tool))
		m := c.recv()
		assert.Equal(t, float64(id), m["id"])
		return m
	}
	m := call(1, "pass")
	assert.Equal(t, "/asked", m["result"].(map[string]any)["echo"].(map[string]any)["arguments"].(map[string]any)["path"])
	m = call(2, "rewrite")
	assert.Equal(t, "/judged", m["result"].(map[string]any)["echo"].(map[string]any)["arguments"].(map[string]any)["path"], "the server gets what was judged")
	m = call(3, "deny")
	assert.Equal(t, float64(jsonrpc.CodeDenied), m["error"].(map[string]any)["code"])
	m = call(4, "replace")
	assert.Equal(t, map[string]any{"replaced": true}, m["result"])
	c.noMore()
}

// lister is a Stage that must wait: before each tools/call it sends a
// tools/list of its own through send, on the slow path.
type lister struct{ got chan string }

func (l *lister) Wait(_ context.Context, req *guard.Request) func(context.Context, guard.Handler) {
	if req.Method != "tools/call" {
		return nil
	}
	return func(ctx context.Context, send guard.Handler) {
		r := send(ctx, &guard.Request{Method: "tools/list", ID: json.RawMessage(`"lister-1"`)})
		l.got <- string(r.Result)
	}
}

func (l *lister) Request(context.Context, *guard.Request) *guard.Response { return nil }

func (l *lister) Response(_ context.Context, _ *guard.Request, resp *guard.Response) *guard.Response {
	return resp
}

func TestWaiterSlowPath(t *testing.T) {
	l := &lister{got: make(chan string, 1)}
	argv, env := serverCmd(t, "echo")
	c := startProxy(t, &guard.Proxy{Command: argv, Env: env, Stages: []guard.Stage{l}, Grace: 200 * time.Millisecond})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{}}}`)
	assert.Equal(t, 1.0, c.recv()["id"])
	assert.Equal(t, `{"echo":null}`, <-l.got, "the stage got the answer to its own request")
	c.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	assert.Equal(t, 2.0, c.recv()["id"])
	c.noMore()
}

// Server hooks see what the server sends on its own and may rewrite or
// drop it.
func TestServerHooks(t *testing.T) {
	for _, tc := range []struct {
		name string
		hook guard.ServerHook
		want string // the notification's params as the client gets them; "" for none
	}{
		{"pass", func(_ context.Context, m *guard.ServerMessage) *guard.ServerMessage { return m }, `{"progressToken":1,"progress":1}`},
		{"rewrite", func(_ context.Context, m *guard.ServerMessage) *guard.ServerMessage {
			m.Params = json.RawMessage(`{"progressToken":1,"progress":2}`)
			return m
		}, `{"progressToken":1,"progress":2}`},
		{"drop", func(context.Context, *guard.ServerMessage) *guard.ServerMessage { return nil }, ""},
		{"panic", func(context.Context, *guard.ServerMessage) *guard.ServerMessage { panic("boom") }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argv, env := serverCmd(t, "echo")
			c := startProxy(t, &guard.Proxy{Command: argv, Env: env, ServerHooks: []guard.ServerHook{tc.hook}, Grace: 200 * time.Millisecond})
			c.send(`{"jsonrpc":"2.0","id":1,"method":"notify-first"}`)
			if tc.want != "" {
				var n struct {
					Method string          `json:"method"`
					Params json.RawMessage `json:"params"`
				}
				require.NoError(t, json.Unmarshal(c.recvRaw(), &n))
				assert.Equal(t, "notifications/progress", n.Method)
				assert.JSONEq(t, tc.want, string(n.Params))
			}
			assert.Equal(t, 1.0, c.recv()["id"])
			c.noMore()
		})
	}
}

// startStandalone runs the test binary as a standalone proxy in front of
// the echo server and returns it with its stdin, stdout and stderr.
func startStandalone(t *testing.T) (*exec.Cmd, io.WriteCloser, io.ReadCloser, *syncBuffer) {
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), proxyEnv+"=echo")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, stdin, stdout, stderr
}

// pids finds the server's and its child's pids in the proxy's stderr.
func pids(stderr *syncBuffer) (server, child int) {
	s := stderr.String()
	if m := regexp.MustCompile(`server pid (\d+)`).FindStringSubmatch(s); m != nil {
		server, _ = strconv.Atoi(m[1])
	}
	if m := regexp.MustCompile(`child pid (\d+)`).FindStringSubmatch(s); m != nil {
		child, _ = strconv.Atoi(m[1])
	}
	return
}

// A standalone proxy stopped by SIGTERM or SIGINT (its client's supervisor
// shutting down) stops the server's whole group before it exits.
func TestProxySignalledStopsGroup(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, stdin, stdout, stderr := startStandalone(t)
			defer stdin.Close()
			_, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"spawn"}`+"\n")
			require.NoError(t, err)
			line, err := bufio.NewReader(stdout).ReadString('\n')
			require.NoError(t, err, "stderr: %s", stderr.String())
			require.Contains(t, line, `"pid"`)
			require.Eventually(t, func() bool { s, c := pids(stderr); return s > 0 && c > 0 }, 10*time.Second, 10*time.Millisecond)
			server, child := pids(stderr)
			require.NoError(t, cmd.Process.Signal(sig))
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				require.NoError(t, err, "a signalled proxy stops the server and exits 0; stderr: %s", stderr.String())
			case <-time.After(20 * time.Second):
				t.Fatalf("the proxy did not exit after %v", sig)
			}
			assertGone(t, server)
			assertGone(t, child)
		})
	}
}

// A standalone proxy whose client stops reading while the server writes a
// large response (the client died mid-write) must not die of SIGPIPE with
// the server still running: it stops the server's whole group and exits.
func TestClientGoneMidWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 64 MB")
	}
	cmd, stdin, stdout, stderr := startStandalone(t)
	_, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"spawn-then-flood"}`+"\n")
	require.NoError(t, err)
	buf := make([]byte, 64<<10)
	_, err = io.ReadFull(stdout, buf)
	require.NoError(t, err, "the response starts; stderr: %s", stderr.String())
	require.Eventually(t, func() bool { s, c := pids(stderr); return s > 0 && c > 0 }, 10*time.Second, 10*time.Millisecond)
	server, child := pids(stderr)
	// The client goes away mid-write; its stdin to the proxy stays open,
	// so only the failed write can tell the proxy.
	require.NoError(t, stdout.Close())

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil {
			require.ErrorAs(t, err, &ee)
			ws := ee.Sys().(syscall.WaitStatus)
			require.False(t, ws.Signaled(), "the proxy was killed by %v", ws.Signal())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the proxy did not end after its client went away; stderr: %s", stderr.String())
	}
	assertGone(t, server)
	assertGone(t, child)
	assert.Contains(t, stderr.String(), "write client", "the proxy saw the failed write")
	stdin.Close()
}

// Requests on the fast path of a Stage are answered when the server dies,
// each once, with -32011, and get no response phase.
func TestStageRequestsAnsweredWhenServerDies(t *testing.T) {
	argv, env := serverCmd(t, "echo")
	c := startProxy(t, &guard.Proxy{Command: argv, Env: env, Stages: []guard.Stage{recorder{}}, Grace: 200 * time.Millisecond})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"hang"}`)
	c.send(`{"jsonrpc":"2.0","id":"two","method":"hang"}`)
	c.send(`{"jsonrpc":"2.0","id":3,"method":"boom"}`)
	seen := map[any]int{}
	for range 3 {
		m := c.recv()
		seen[m["id"]]++
		assert.Equal(t, float64(jsonrpc.CodeServerExited), m["error"].(map[string]any)["code"], "%v", m)
	}
	assert.Equal(t, map[any]int{1.0: 1, "two": 1, 3.0: 1}, seen)
	err := <-c.served
	require.ErrorIs(t, err, guard.ErrServerExited)
	c.served <- err // for Cleanup
}

// gate is a Stage whose Wait holds a tools/call of "slow" until release
// is closed, and records the order of what it saw.
type gate struct {
	started, release chan struct{}
	mu               sync.Mutex
	log              []string
}

func (g *gate) note(s string) {
	g.mu.Lock()
	g.log = append(g.log, s)
	g.mu.Unlock()
}

func (g *gate) Wait(_ context.Context, req *guard.Request) func(context.Context, guard.Handler) {
	if req.Tool != "slow" {
		return nil
	}
	return func(ctx context.Context, _ guard.Handler) {
		g.started <- struct{}{}
		select {
		case <-g.release:
		case <-ctx.Done():
			g.note("wait cancelled " + string(req.ID))
			<-g.release
		}
	}
}

func (g *gate) Request(_ context.Context, req *guard.Request) *guard.Response {
	g.note("request " + string(req.ID))
	return nil
}

func (g *gate) Response(_ context.Context, req *guard.Request, resp *guard.Response) *guard.Response {
	g.note("response " + string(req.ID))
	return resp
}

// A request that waits (L2 listing the tools first) holds up only itself:
// the client's later requests are read, judged, forwarded and answered
// while it waits, and it is answered once, after its wait.
func TestWaitDoesNotBlockLaterRequests(t *testing.T) {
	g := &gate{started: make(chan struct{}, 2), release: make(chan struct{})}
	argv, env := serverCmd(t, "echo")
	c := startProxy(t, &guard.Proxy{Command: argv, Env: env, Stages: []guard.Stage{g}, Grace: 200 * time.Millisecond})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	<-g.started
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fast","arguments":{}}}`)
	c.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	assert.Equal(t, 2.0, c.recv()["id"], "a later request is answered while the first still waits")
	assert.Equal(t, 3.0, c.recv()["id"])
	close(g.release)
	m := c.recv()
	assert.Equal(t, 1.0, m["id"])
	assert.Contains(t, m, "result", "the waiting request went on to the server after its wait")
	c.noMore()
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Len(t, g.log, 6)
	assert.ElementsMatch(t, []string{"request 2", "response 2", "request 3", "response 3"}, g.log[:4],
		"the later requests were judged while the first waited")
	assert.Equal(t, []string{"request 1", "response 1"}, g.log[4:], "the waiting request's phases ran after its wait")
}

// A request cancelled while it waits never reaches the server and is not
// answered; the session goes on.
func TestCancelledWhileWaiting(t *testing.T) {
	g := &gate{started: make(chan struct{}, 2), release: make(chan struct{})}
	argv, env := serverCmd(t, "echo")
	c := startProxy(t, &guard.Proxy{Command: argv, Env: env, Stages: []guard.Stage{g}, Grace: 200 * time.Millisecond})
	c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	<-g.started
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	c.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	assert.Equal(t, 8.0, c.recv()["id"])
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return slices.Contains(g.log, "wait cancelled 7")
	}, 10*time.Second, time.Millisecond, "the cancellation reached the waiting request")
	close(g.release)
	c.noMore()
	g.mu.Lock()
	defer g.mu.Unlock()
	assert.NotContains(t, g.log, "response 7", "a cancelled request gets no response phase")
}
