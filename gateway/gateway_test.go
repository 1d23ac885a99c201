package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/gateway"
	"github.com/mcpguard/mcpguard/internal/mcptest"
)

// testServerConfig is a server entry that runs the test binary as MCP
// server mode (its name in answers).
func testServerConfig(t testing.TB, mode string) *gateway.ServerConfig {
	exe, err := os.Executable()
	require.NoError(t, err)
	return &gateway.ServerConfig{Config: "C0", Command: []string{exe}, Env: []string{serverEnv + "=" + mode}}
}

// startGateway serves cfg on a loopback port.
func startGateway(t testing.TB, cfg *gateway.Config) (*gateway.Gateway, *served) {
	t.Helper()
	g := newGateway(t, cfg)
	return g, serveGateway(t, g)
}

// newGateway is the gateway startGateway serves, not serving yet.
func newGateway(t testing.TB, cfg *gateway.Config) *gateway.Gateway {
	t.Helper()
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	cfg, err = gateway.ParseConfig(b) // what a gateway.json would give
	require.NoError(t, err)
	g, err := gateway.New(cfg, gateway.Options{Stderr: io.Discard, Grace: 500 * time.Millisecond})
	require.NoError(t, err)
	return g
}

// served is a gateway serving on a loopback port.
type served struct {
	URL  string // http://127.0.0.1:port
	Addr string // 127.0.0.1:port
}

// serveGateway serves g as `mcpguard gateway` does (g.Serve: its timeouts
// and connection cap) on a loopback port until cleanup.
func serveGateway(t testing.TB, g *gateway.Gateway) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- g.Serve(ln) }()
	t.Cleanup(func() {
		// Servers get EOF, then SIGTERM, then SIGKILL, a grace period
		// apart; a loaded machine needs more than that to reap them.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		assert.NoError(t, g.Shutdown(ctx))
		<-done
	})
	return &served{URL: "http://" + ln.Addr().String(), Addr: ln.Addr().String()}
}

func twoServers(t testing.TB) *gateway.Config {
	return &gateway.Config{Servers: map[string]*gateway.ServerConfig{
		"alpha": testServerConfig(t, "alpha"),
		"beta":  testServerConfig(t, "beta"),
	}}
}

type sampler struct{}

func (sampler) CreateMessage(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("4")}, Model: "test"}, nil
}

// connect opens an mcp-go Streamable HTTP client session on url.
func connect(t testing.TB, url string, headers map[string]string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(headers), transport.WithContinuousListening(),
		transport.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	c := client.NewClient(tr, client.WithSamplingHandler(sampler{}), client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, c.Start(context.Background()))
	_, err = c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: mcp.ProtocolVersion20251125,
		ClientInfo:      mcp.Implementation{Name: "gateway-test", Version: "1"},
	}})
	require.NoError(t, err)
	return c
}

func callReq(tool string, args map[string]any) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	return req
}

func callText(t testing.TB, c *client.Client, tool string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	require.NoError(t, err)
	require.NotEmpty(t, res.Content)
	tc, ok := res.Content[0].(mcp.TextContent)
	require.True(t, ok)
	return tc.Text
}

// toolNames lists the names of the tools c's server offers.
func toolNames(t testing.TB, c *client.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func TestDirectEndpointWithMCPGo(t *testing.T) {
	g, srv := startGateway(t, twoServers(t))
	c := connect(t, srv.URL+"/servers/beta/mcp", nil)
	var mu sync.Mutex
	var notes []string
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		mu.Lock()
		notes = append(notes, n.Method)
		mu.Unlock()
	})
	names := toolNames(t, c)
	assert.Contains(t, names, "echo")
	assert.NotContains(t, names, "beta__echo", "the direct endpoint does not rename")

	assert.Equal(t, "beta:hi", callText(t, c, "echo", map[string]any{"text": "hi"}))
	// A server-to-client request in the middle of a call (sampling).
	assert.Equal(t, "llm said 4", callText(t, c, "ask", nil))
	assert.Equal(t, "notified", callText(t, c, "notify", nil))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range notes {
			if n == "notifications/message" {
				return true
			}
		}
		return false
	}, 5*time.Second, 10*time.Millisecond, "the server's log notification reached the client")
	assert.Equal(t, 1, g.Sessions())
	assert.EqualValues(t, 1, g.Started(), "one session, one server process")

	pid := callText(t, c, "pid", nil)
	require.NoError(t, c.Close()) // DELETE ends the session
	require.Eventually(t, func() bool { return g.Sessions() == 0 }, 5*time.Second, 10*time.Millisecond)
	assertGone(t, pid)
}

// assertGone checks that the server process pid has exited.
func assertGone(t *testing.T, pid string) {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(pid))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return mcptest.Gone(n)
	}, 10*time.Second, 20*time.Millisecond, "server process %d still running", n)
}

func TestAggregateEndpointWithMCPGo(t *testing.T) {
	g, srv := startGateway(t, twoServers(t))
	c := connect(t, srv.URL+"/mcp", nil)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	names := toolNames(t, c)
	assert.Contains(t, names, "alpha__echo")
	assert.Contains(t, names, "beta__echo")
	assert.Contains(t, names, "beta__read_file")
	assert.Len(t, names, 14, "7 tools from each of two servers")

	assert.Equal(t, "alpha:x", callText(t, c, "alpha__echo", map[string]any{"text": "x"}))
	assert.Equal(t, "beta:y", callText(t, c, "beta__echo", map[string]any{"text": "y"}))
	assert.Equal(t, "llm said 4", callText(t, c, "beta__ask", nil), "sampling through the aggregate")

	req := mcp.CallToolRequest{}
	req.Params.Name = "gamma__echo"
	_, err := c.CallTool(ctx, req)
	require.Error(t, err, "a tool of no server")
	assert.EqualValues(t, 2, g.Started(), "one process per server per aggregate session")
}

// post sends one raw JSON-RPC message and returns the response.
func post(t testing.TB, url, session, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set(gateway.HeaderSession, session)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

// sseMessages reads the data lines of an SSE body.
func sseMessages(t testing.TB, r io.Reader) []string {
	t.Helper()
	return parseSSE(r)
}

func parseSSE(r io.Reader) []string {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "" {
			out = append(out, d) // not the priming event's empty data
		}
	}
	return out
}

// body returns the one JSON-RPC message of a JSON or SSE response.
func body(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msgs := sseMessages(t, resp.Body)
		require.NotEmpty(t, msgs)
		return msgs[len(msgs)-1]
	}
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// rawSession initializes a session by hand and returns its id.
func rawSession(t testing.TB, url string, hdr map[string]string) string {
	t.Helper()
	resp := post(t, url, "", initBody, hdr)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	id := resp.Header.Get(gateway.HeaderSession)
	require.NotEmpty(t, id)
	body(t, resp)
	resp = post(t, url, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	return id
}

func TestIDsAndBytesPassUntouched(t *testing.T) {
	_, srv := startGateway(t, twoServers(t))
	url := srv.URL + "/servers/alpha/mcp"
	sid := rawSession(t, url, nil)
	for _, id := range []string{`"abc"`, `12345678901234`, `-7`, `"x y"`} {
		resp := post(t, url, sid, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"é\u0000"}}}`, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		msg := body(t, resp)
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(msg), &m))
		assert.Equal(t, id, string(m["id"]), "the id comes back as the client wrote it")
		assert.Contains(t, msg, `alpha:é\u0000`)
	}
	// A pretty-printed body is one message on the server's stdio.
	resp := post(t, url, sid, "{\n \"jsonrpc\": \"2.0\",\n \"id\": 9,\n \"method\": \"ping\"\n}", nil)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":9,"result":{}}`, body(t, resp))
}

func TestTransportRules(t *testing.T) {
	cfg := twoServers(t)
	cfg.Limits.MaxMessage = 1 << 10
	g, srv := startGateway(t, cfg)
	url := srv.URL + "/servers/alpha/mcp"

	resp := post(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "no session and not initialize")
	resp.Body.Close()
	resp = post(t, url, "nosuchsession", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "unknown session")
	resp.Body.Close()
	assert.Zero(t, g.Started())

	sid := rawSession(t, url, nil)
	resp = post(t, url, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{gateway.HeaderProtocol: "1999-01-01"})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "unsupported protocol version")
	resp.Body.Close()
	resp = post(t, url, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{gateway.HeaderProtocol: "2025-11-25"})
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
	resp = post(t, srv.URL+"/servers/beta/mcp", sid, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "a session belongs to its endpoint")
	resp.Body.Close()
	resp = post(t, url, sid, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "batch")
	resp.Body.Close()
	resp = post(t, url, sid, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`+strings.Repeat("x", 2000)+`"}}`, nil)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	resp.Body.Close()
	resp = post(t, url, sid, `{"jsonrpc":"2.0","id":1,`, nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "malformed JSON")
	assert.Contains(t, body(t, resp), "-32700")
	resp = post(t, url, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Content-Type": "text/plain"})
	assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	resp.Body.Close()

	// GET: the server-to-client stream; one at a time.
	get := func() *http.Response {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set(gateway.HeaderSession, sid)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}
	g1 := get()
	assert.Equal(t, http.StatusOK, g1.StatusCode)
	assert.Equal(t, "text/event-stream", g1.Header.Get("Content-Type"))
	g2 := get()
	assert.Equal(t, http.StatusConflict, g2.StatusCode)
	g2.Body.Close()

	req, _ := http.NewRequest(http.MethodPut, url, nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	resp.Body.Close()

	req, _ = http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set(gateway.HeaderSession, sid)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
	// The GET stream ends with the session.
	_, err = io.ReadAll(g1.Body)
	require.NoError(t, err)
	g1.Body.Close()
	resp = post(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "ended session")
	resp.Body.Close()
}

func TestCrashEndsOnlyItsSession(t *testing.T) {
	_, srv := startGateway(t, twoServers(t))
	url := srv.URL + "/servers/alpha/mcp"
	victim := rawSession(t, url, nil)
	other := connect(t, url, nil)
	defer other.Close()

	// A call in flight when the server dies gets the proxy's -32011.
	slow := make(chan string, 1)
	go func() {
		resp := post(t, url, victim, `{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"sleep","arguments":{"ms":10000}}}`, nil)
		slow <- body(t, resp)
	}()
	time.Sleep(200 * time.Millisecond)
	resp := post(t, url, victim, `{"jsonrpc":"2.0","id":"boom","method":"tools/call","params":{"name":"crash"}}`, nil)
	crash := body(t, resp)
	assert.Contains(t, crash, `"id":"boom"`)
	assert.Contains(t, crash, "-32011")
	select {
	case m := <-slow:
		assert.Contains(t, m, `"id":"slow"`)
		assert.Contains(t, m, "-32011")
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight got no answer")
	}
	require.Eventually(t, func() bool {
		resp := post(t, url, victim, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, nil)
		resp.Body.Close()
		return resp.StatusCode == http.StatusNotFound
	}, 5*time.Second, 20*time.Millisecond, "the crashed session is gone")
	assert.Equal(t, "alpha:still here", callText(t, other, "echo", map[string]any{"text": "still here"}))
}

func TestIdleSessionsEnd(t *testing.T) {
	cfg := twoServers(t)
	cfg.Limits.IdleTimeout = gateway.Duration(300 * time.Millisecond)
	cfg.Limits.MaxSessions = 1
	g, srv := startGateway(t, cfg)
	url := srv.URL + "/servers/alpha/mcp"
	sid := rawSession(t, url, nil)
	resp := post(t, url, "", initBody, nil)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "over max_sessions")
	resp.Body.Close()
	require.Eventually(t, func() bool { return g.Sessions() == 0 }, 5*time.Second, 20*time.Millisecond)
	resp = post(t, url, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp.Body.Close()
}

func TestCloseEndsSessionsAndServers(t *testing.T) {
	cfg := twoServers(t)
	b, _ := json.Marshal(cfg)
	cfg, err := gateway.ParseConfig(b)
	require.NoError(t, err)
	g, err := gateway.New(cfg, gateway.Options{Stderr: io.Discard, Grace: 500 * time.Millisecond})
	require.NoError(t, err)
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	c := connect(t, srv.URL+"/servers/alpha/mcp", nil)
	pid := callText(t, c, "pid", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, g.Close(ctx))
	assertGone(t, pid)
	resp := post(t, srv.URL+"/servers/alpha/mcp", "", initBody, nil)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "no new sessions while shutting down")
	resp.Body.Close()
}

// A server's warm sessions run before any client asks for one (and under
// the race detector, their filler starts after New: it reads the gateway's
// sessions); a new session takes one (its server is the one already
// running), the pool fills again, and Close ends the warm session not taken
// with the others.
func TestWarmPool(t *testing.T) {
	sc := testServerConfig(t, "alpha")
	sc.Warm = 1
	g := newGateway(t, &gateway.Config{Servers: map[string]*gateway.ServerConfig{"alpha": sc}})
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	var warm []int
	require.Eventually(t, func() bool { warm = descendants(); return len(warm) > 0 && g.Started() == 1 },
		20*time.Second, 20*time.Millisecond, "a warm server before any client")
	c := connect(t, srv.URL+"/servers/alpha/mcp", nil)
	pid, err := strconv.Atoi(callText(t, c, "pid", nil))
	require.NoError(t, err)
	assert.Contains(t, warm, pid, "the session's server is the warm one")
	require.Eventually(t, func() bool { return g.Started() == 2 }, 20*time.Second, 20*time.Millisecond, "the pool filled again")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, g.Close(ctx))
	assert.Empty(t, descendants(), "Close ended the session's server and the warm one")
}

func TestProgressGoesToItsRequest(t *testing.T) {
	cfg := twoServers(t)
	cfg.Servers["raw"] = testServerConfig(t, "raw")
	_, srv := startGateway(t, cfg)
	url := srv.URL + "/servers/raw/mcp"
	sid := rawSession(t, url, nil)
	resp := post(t, url, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"any","_meta":{"progressToken":"p1"}}}`, nil)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	msgs := sseMessages(t, resp.Body)
	resp.Body.Close()
	require.Len(t, msgs, 3, "log, progress, response on the request's stream")
	assert.Contains(t, msgs[0], "notifications/message")
	assert.Contains(t, msgs[1], `"progressToken":"p1"`)
	assert.Contains(t, msgs[2], `"id":5`)
	// A client that accepts only JSON gets the response alone, as JSON.
	resp = post(t, url, sid, `{"jsonrpc":"2.0","id":6,"method":"ping"}`, map[string]string{"Accept": "application/json"})
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":6,"result":{}}`, body(t, resp))
}
