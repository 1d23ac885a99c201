package gateway_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/gateway"
)

// rawReply is what a raw HTTP exchange gave: the status (0: no response)
// and body, and whether the gateway closed the connection after it.
type rawReply struct {
	status int
	header http.Header
	body   string
	closed bool
}

// rawHTTP writes req as it is on a fresh connection to addr (a client that
// follows no rules) and reads one response.
func rawHTTP(t *testing.T, addr, req string, probe bool) rawReply {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, req)
	require.NoError(t, err)
	return readReply(t, c, probe)
}

// readReply reads one response from c; probe: then wait (up to 2 s) to see
// whether the gateway closes c.
func readReply(t *testing.T, c net.Conn, probe bool) rawReply {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return rawReply{closed: true}
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	out := rawReply{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if !probe {
		return out
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = br.ReadByte()
	out.closed = errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)
	return out
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

// httpReq formats a request; headers are "Name: value" lines.
func httpReq(method, path, body string, headers ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", method, path)
	host := false
	for _, h := range headers {
		if strings.HasPrefix(strings.ToLower(h), "host:") {
			host = true
		}
		b.WriteString(h + "\r\n")
	}
	if !host {
		b.WriteString("Host: 127.0.0.1\r\n")
	}
	if method == http.MethodPost {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n" + body)
	return b.String()
}

const jsonHeaders = "Content-Type: application/json\r\nAccept: application/json, text/event-stream"

// The attack set: requests a hostile page, a stranger on the network or a
// caller with a token but no grant would send, each refused with its status
// before anything reaches a server (the gateway starts no server process
// for any of them), and refused callers' connections closed.
func TestHTTPAttacks(t *testing.T) {
	cfg, _ := authConfig(t)
	cfg.Limits.MaxMessage = 1 << 16
	g, srv := startGateway(t, cfg)
	// The gateway of `mcpguard gateway --listen 127.0.0.1:...`: Host checked.
	loop, err := gateway.New(mustParse(t, cfg), gateway.Options{Stderr: io.Discard, Loopback: true})
	require.NoError(t, err)
	lsrv := serveGateway(t, loop)
	alpha := "/servers/alpha/mcp"
	alice := "Authorization: Bearer alice-secret"
	aliceSid := rawSession(t, srv.URL+alpha, bearer("alice-secret"))
	rootSid := rawSession(t, srv.URL+alpha, bearer("root-secret"))
	started := g.Started()
	init := initBody
	cases := []struct {
		name   string
		addr   string
		req    string
		status int
		closed bool // the gateway closes the connection
	}{
		// Who: tokens and their tricks.
		{"no token", srv.Addr, httpReq("POST", alpha, init, jsonHeaders), 401, true},
		{"unknown token", srv.Addr, httpReq("POST", alpha, init, jsonHeaders, "Authorization: Bearer guess"), 401, true},
		{"empty bearer", srv.Addr, httpReq("POST", alpha, init, jsonHeaders, "Authorization: Bearer "), 401, true},
		{"basic auth", srv.Addr, httpReq("POST", alpha, init, jsonHeaders, "Authorization: Basic YWxpY2Utc2VjcmV0"), 401, true},
		{"token in the query", srv.Addr, httpReq("POST", alpha+"?access_token=alice-secret", init, jsonHeaders), 401, true},
		{"the hash as the token", srv.Addr, httpReq("POST", alpha, init, jsonHeaders, "Authorization: Bearer "+gateway.HashToken("alice-secret")), 401, true},
		{"two Authorization headers", srv.Addr, httpReq("POST", alpha, init, jsonHeaders, "Authorization: Bearer guess", alice), 401, true},
		{"a token with a trailing secret", srv.Addr, httpReq("POST", alpha, init, jsonHeaders, "Authorization: Bearer alice-secretx"), 401, true},
		{"JWT alg none", srv.Addr, httpReq("POST", alpha, init, jsonHeaders, "Authorization: Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."), 401, true},
		{"ungranted server", srv.Addr, httpReq("POST", "/servers/beta/mcp", init, jsonHeaders, alice), 403, true},
		{"ungranted server by path tricks", srv.Addr, httpReq("POST", "/servers/alpha/../beta/mcp", init, jsonHeaders, alice), 0, false},
		{"ungranted server, encoded slash", srv.Addr, httpReq("POST", "/servers/beta%2fmcp/mcp", init, jsonHeaders, alice), 403, true},
		{"ungranted server, case", srv.Addr, httpReq("POST", "/servers/BETA/mcp", init, jsonHeaders, alice), 403, true},
		// Sessions: another caller's, a guessed one, one of another endpoint.
		{"another caller's session", srv.Addr, httpReq("POST", alpha, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, jsonHeaders, alice, "Mcp-Session-Id: "+rootSid), 403, true},
		{"a guessed session", srv.Addr, httpReq("POST", alpha, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, jsonHeaders, alice, "Mcp-Session-Id: 00000000000000000000000000000000"), 404, false},
		{"a session on the aggregate endpoint", srv.Addr, httpReq("POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, jsonHeaders, alice, "Mcp-Session-Id: "+aliceSid), 404, false},
		{"two session headers", srv.Addr, httpReq("POST", alpha, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, jsonHeaders, alice, "Mcp-Session-Id: "+rootSid, "Mcp-Session-Id: "+aliceSid), 400, false},
		{"resume another stream's garbage id", srv.Addr, httpReq("GET", alpha, "", "Accept: text/event-stream", alice, "Mcp-Session-Id: "+aliceSid, "Last-Event-ID: ../../etc"), 400, false},
		{"resume a stream never opened", srv.Addr, httpReq("GET", alpha, "", "Accept: text/event-stream", alice, "Mcp-Session-Id: "+aliceSid, "Last-Event-ID: 999999-1"), 400, false},
		// Where from: Origin and Host.
		{"foreign origin", srv.Addr, httpReq("POST", alpha, init, jsonHeaders, alice, "Origin: http://evil.example"), 403, true},
		{"null origin", srv.Addr, httpReq("POST", alpha, init, jsonHeaders, alice, "Origin: null"), 403, true},
		{"two origins, allowed first", srv.Addr, httpReq("POST", alpha, init, jsonHeaders, alice, "Origin: https://app.example", "Origin: http://evil.example"), 403, true},
		{"allowed origin as a prefix", srv.Addr, httpReq("POST", alpha, init, jsonHeaders, alice, "Origin: https://app.example.evil.example"), 403, true},
		{"allowed origin with userinfo", srv.Addr, httpReq("POST", alpha, init, jsonHeaders, alice, "Origin: https://app.example@evil.example"), 403, true},
		{"preflight of a foreign origin", srv.Addr, httpReq("OPTIONS", alpha, "", "Origin: http://evil.example", "Access-Control-Request-Method: POST"), 403, true},
		{"rebinding Host on loopback", lsrv.Addr, httpReq("POST", alpha, init, jsonHeaders, alice, "Host: evil.example"), 403, true},
		{"rebinding Host, loopback-looking name", lsrv.Addr, httpReq("POST", alpha, init, jsonHeaders, alice, "Host: 127.0.0.1.evil.example"), 403, true},
		{"rebinding Host, absolute URI", lsrv.Addr, httpReq("POST", "http://evil.example"+alpha, init, jsonHeaders, alice, "Host: 127.0.0.1"), 403, true},
		// What: bodies and headers a server must never see.
		{"batch", srv.Addr, httpReq("POST", alpha, `[`+init+`]`, jsonHeaders, alice), 400, false},
		{"declared 10 GiB body", srv.Addr, "POST " + alpha + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + jsonHeaders + "\r\n" + alice + "\r\nContent-Length: 10737418240\r\n\r\n{", 413, true},
		{"chunked body over the limit", srv.Addr, "POST " + alpha + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + jsonHeaders + "\r\n" + alice + "\r\nTransfer-Encoding: chunked\r\n\r\n20000\r\n" + strings.Repeat("x", 0x20000) + "\r\n0\r\n\r\n", 413, true},
		// Chunked wins over a length (RFC 9112): the body read is the chunked
		// one, empty here, and the connection keeps chunked framing.
		{"length and chunked", srv.Addr, "POST " + alpha + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + jsonHeaders + "\r\n" + alice + "\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, false},
		{"duplicate keys", srv.Addr, httpReq("POST", alpha, `{"jsonrpc":"2.0","id":1,"method":"initialize","method":"tools/call","params":{}}`, jsonHeaders, alice), 400, false},
		{"keys by case", srv.Addr, httpReq("POST", alpha, `{"jsonrpc":"2.0","id":1,"method":"initialize","Method":"tools/call","params":{}}`, jsonHeaders, alice), 400, false},
		{"lone surrogate", srv.Addr, httpReq("POST", alpha, `{"jsonrpc":"2.0","id":"\ud800","method":"initialize","params":{}}`, jsonHeaders, alice), 400, false},
		{"invalid UTF-8", srv.Addr, httpReq("POST", alpha, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"x\":\"\xff\"}}", jsonHeaders, alice), 400, false},
		{"deep nesting", srv.Addr, httpReq("POST", alpha, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":`+strings.Repeat("[", 600)+strings.Repeat("]", 600)+`}`, jsonHeaders, alice), 400, false},
		{"not JSON", srv.Addr, httpReq("POST", alpha, `hello`, jsonHeaders, alice), 400, false},
		{"text/plain", srv.Addr, httpReq("POST", alpha, init, "Content-Type: text/plain", "Accept: application/json", alice), 415, false},
		{"no Accept that fits", srv.Addr, httpReq("POST", alpha, init, "Content-Type: application/json", "Accept: text/html", alice), 406, false},
		{"unsupported protocol version", srv.Addr, httpReq("POST", alpha, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, jsonHeaders, alice, "Mcp-Session-Id: "+aliceSid, "MCP-Protocol-Version: 1999-01-01"), 400, false},
		{"a version newer than the session's", srv.Addr, httpReq("POST", alpha, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, jsonHeaders, alice, "Mcp-Session-Id: "+aliceSid, "MCP-Protocol-Version: 2099-01-01"), 400, false},
		{"two protocol versions", srv.Addr, httpReq("POST", alpha, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, jsonHeaders, alice, "Mcp-Session-Id: "+aliceSid, "MCP-Protocol-Version: 2025-11-25", "MCP-Protocol-Version: 2025-03-26"), 400, false},
		{"header flood", srv.Addr, httpReq("POST", alpha, init, jsonHeaders, alice, "X-Pad: "+strings.Repeat("a", 100<<10)), 431, true},
		{"TRACE", srv.Addr, httpReq("TRACE", alpha, "", alice), 405, false},
		{"PUT", srv.Addr, httpReq("PUT", alpha, "", alice), 405, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := rawHTTP(t, c.addr, c.req, c.closed)
			if c.status == 0 {
				assert.True(t, got.status == 301 || got.status == 307 || got.status == 404 || got.status == 403, "status %d: %s", got.status, got.body)
				return
			}
			assert.Equal(t, c.status, got.status, "%s", got.body)
			assert.Empty(t, got.header.Get(gateway.HeaderSession), "no session for a refused request")
			if c.closed {
				assert.True(t, got.closed, "the connection is closed")
			}
		})
	}
	assert.Equal(t, started, g.Started(), "no refused request started a server")
	assert.Zero(t, loop.Started())
}

func mustParse(t *testing.T, cfg *gateway.Config) *gateway.Config {
	t.Helper()
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	out, err := gateway.ParseConfig(b)
	require.NoError(t, err)
	return out
}

// What a caller may do that the attacks above may not: a bearer scheme in
// any case (RFC 6750), and a browser page of an allowed origin, whose
// preflight is answered and whose answers it may read.
func TestAuthSchemeAndCORS(t *testing.T) {
	cfg, _ := authConfig(t)
	_, srv := startGateway(t, cfg)
	alpha := "/servers/alpha/mcp"
	for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		got := rawHTTP(t, srv.Addr, httpReq("POST", alpha, initBody, jsonHeaders, "Authorization: "+scheme+" alice-secret"), false)
		assert.Equal(t, 200, got.status, "%s: %s", scheme, got.body)
		assert.NotEmpty(t, got.header.Get(gateway.HeaderSession))
	}
	pre := rawHTTP(t, srv.Addr, httpReq("OPTIONS", alpha, "", "Origin: https://app.example",
		"Access-Control-Request-Method: POST", "Access-Control-Request-Headers: content-type, authorization, mcp-session-id"), false)
	assert.Equal(t, 204, pre.status)
	assert.Equal(t, "https://app.example", pre.header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, pre.header.Get("Access-Control-Allow-Methods"), "POST")
	assert.Contains(t, strings.ToLower(pre.header.Get("Access-Control-Allow-Headers")), "mcp-session-id")
	got := rawHTTP(t, srv.Addr, httpReq("POST", alpha, initBody, jsonHeaders, "Authorization: Bearer alice-secret", "Origin: https://app.example"), false)
	assert.Equal(t, 200, got.status)
	assert.Equal(t, "https://app.example", got.header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, got.header.Get("Access-Control-Expose-Headers"), gateway.HeaderSession, "the page may read its session id")
}

// Slow clients hold nothing: a body that trickles in gets 408 when
// body_timeout is up, an unauthenticated request with a body gets its 401
// at once without the gateway waiting for the body, headers that trickle
// in are cut at header_timeout, an idle kept-alive connection is closed
// after conn_idle_timeout, and a connection past max_connections is closed
// at once. An SSE stream outlives all of those deadlines.
func TestSlowClientsHoldNothing(t *testing.T) {
	cfg := twoServers(t)
	cfg.Limits.BodyTimeout = gateway.Duration(300 * time.Millisecond)
	cfg.Limits.HeaderTimeout = gateway.Duration(300 * time.Millisecond)
	cfg.Limits.ConnIdleTimeout = gateway.Duration(300 * time.Millisecond)
	cfg.Limits.MaxConnections = 8
	g, srv := startGateway(t, cfg)
	alpha := "/servers/alpha/mcp"
	sid := rawSession(t, srv.URL+alpha, nil)
	t.Run("a body a byte at a time", func(t *testing.T) { slowBody(t, g, srv, sid) })
	t.Run("headers a byte at a time", func(t *testing.T) { slowHeaders(t, g, srv, sid) })
	t.Run("idle connection", func(t *testing.T) { idleConnection(t, g, srv, sid) })
	t.Run("connection cap", func(t *testing.T) { connectionCap(t, g, srv, sid) })
	t.Run("an SSE stream outlives the deadlines", func(t *testing.T) { streamOutlivesDeadlines(t, g, srv, sid) })
}

// slowBody: a body a byte at a time.
func slowBody(t *testing.T, g *gateway.Gateway, srv *served, sid string) {
	alpha := "/servers/alpha/mcp"
	c, err := net.Dial("tcp", srv.Addr)
	require.NoError(t, err)
	defer c.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\nMcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n", alpha, jsonHeaders, sid, len(body))
	start := time.Now()
	go func() {
		for i := range len(body) {
			if _, err := c.Write([]byte{body[i]}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	got := readReply(t, c, true)
	assert.Equal(t, http.StatusRequestTimeout, got.status, "%s", got.body)
	assert.True(t, got.closed)
	assert.Less(t, time.Since(start), 3*time.Second, "cut near body_timeout, not after the body")
}

// slowHeaders: headers a byte at a time.
func slowHeaders(t *testing.T, g *gateway.Gateway, srv *served, sid string) {
	alpha := "/servers/alpha/mcp"
	c, err := net.Dial("tcp", srv.Addr)
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	go func() {
		for _, b := range []byte("POST " + alpha + " HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + strings.Repeat("a", 100)) {
			if _, err := c.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.ReadAll(c)
	assert.Less(t, time.Since(start), 3*time.Second, "closed near header_timeout: %v", err)
}

// idleConnection: idle connection.
func idleConnection(t *testing.T, g *gateway.Gateway, srv *served, sid string) {
	alpha := "/servers/alpha/mcp"
	c, err := net.Dial("tcp", srv.Addr)
	require.NoError(t, err)
	defer c.Close()
	fmt.Fprint(c, httpReq("POST", alpha, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, jsonHeaders, "Mcp-Session-Id: "+sid))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	io.ReadAll(resp.Body)
	assert.Equal(t, 200, resp.StatusCode)
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = br.ReadByte()
	assert.Error(t, err, "the idle connection was closed")
	assert.Less(t, time.Since(start), 3*time.Second)
}

// connectionCap: connection cap.
func connectionCap(t *testing.T, g *gateway.Gateway, srv *served, sid string) {
	alpha := "/servers/alpha/mcp"
	require.Eventually(t, func() bool { return g.Connections() == 0 }, 5*time.Second, 10*time.Millisecond)
	dialIdle(t, srv, 8)
	require.Eventually(t, func() bool { return g.Connections() == 8 }, 5*time.Second, 10*time.Millisecond)
	c, err := net.Dial("tcp", srv.Addr)
	require.NoError(t, err)
	defer c.Close()
	fmt.Fprint(c, httpReq("POST", alpha, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, jsonHeaders, "Mcp-Session-Id: "+sid))
	got := readReply(t, c, true)
	assert.Zero(t, got.status, "the ninth connection got no answer")
	assert.True(t, got.closed, "and was closed")
	// The held ones time out (header_timeout): the cap frees itself.
	require.Eventually(t, func() bool { return g.Connections() == 0 }, 5*time.Second, 20*time.Millisecond)
}

// streamOutlivesDeadlines: an SSE stream outlives the deadlines.
func streamOutlivesDeadlines(t *testing.T, g *gateway.Gateway, srv *served, sid string) {
	alpha := "/servers/alpha/mcp"
	req, _ := http.NewRequest(http.MethodGet, srv.URL+alpha, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(gateway.HeaderSession, sid)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	time.Sleep(time.Second) // past every deadline above
	// A JSON-only request's notifications come on the GET stream.
	r := post(t, srv.URL+alpha, sid, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"notify"}}`, map[string]string{"Accept": "application/json"})
	assert.Contains(t, body(t, r), "notified")
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "notifications/message") {
				got <- sc.Text()
				return
			}
		}
		got <- ""
	}()
	select {
	case line := <-got:
		assert.Contains(t, line, "notifications/message", "the stream still carries messages")
	case <-time.After(10 * time.Second):
		t.Fatal("nothing came on the GET stream")
	}
}

// One caller cannot take every session: with tokens, each has a share
// (max_sessions_per_identity), and the other's initialize still works;
// one session cannot open requests without bound either.
func TestSessionQuotas(t *testing.T) {
	cfg, _ := authConfig(t)
	cfg.Limits.MaxSessions = 8
	cfg.Limits.MaxSessionsPerIdentity = 3
	cfg.Limits.MaxRequestsPerSession = 2
	g, srv := startGateway(t, cfg)
	alpha := srv.URL + "/servers/alpha/mcp"
	var sids []string
	for range 3 {
		sids = append(sids, rawSession(t, alpha, bearer("alice-secret")))
	}
	resp := post(t, alpha, "", initBody, bearer("alice-secret"))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, body(t, resp), "max_sessions_per_identity")
	assert.EqualValues(t, 3, g.Started(), "no server for the refused one")
	rawSession(t, alpha, bearer("root-secret")) // another caller is not held up
	assert.EqualValues(t, 4, g.Started())

	// Two requests open on a session (slow calls): a third gets 429.
	done := make(chan int, 2)
	for i := range 2 {
		go func() {
			r := post(t, alpha, sids[0], fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":1500}}}`, 10+i), bearer("alice-secret"))
			body(t, r)
			done <- r.StatusCode
		}()
	}
	time.Sleep(500 * time.Millisecond)
	r := post(t, alpha, sids[0], `{"jsonrpc":"2.0","id":3,"method":"ping"}`, bearer("alice-secret"))
	assert.Equal(t, http.StatusTooManyRequests, r.StatusCode)
	r.Body.Close()
	assert.Equal(t, 200, <-done)
	assert.Equal(t, 200, <-done)
	r = post(t, alpha, sids[0], `{"jsonrpc":"2.0","id":4,"method":"ping"}`, bearer("alice-secret"))
	assert.Equal(t, 200, r.StatusCode, "free again once they are answered")
	r.Body.Close()
}

// Admission by memory: with a budget smaller than what one server uses, the
// first session is admitted (nothing is known yet) and the next is refused
// with an error that says why, before its server starts.
func TestMemoryAdmission(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc: the memory of processes cannot be read here")
	}
	cfg := twoServers(t)
	cfg.Limits.MaxMemory = 4 << 20
	g, srv := startGateway(t, cfg)
	alpha := srv.URL + "/servers/alpha/mcp"
	rawSession(t, alpha, nil)
	time.Sleep(1100 * time.Millisecond) // the next check measures again
	assert.Greater(t, g.MemoryUsed(), int64(4<<20), "the test server uses more than the budget")
	resp := post(t, alpha, "", initBody, nil)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	msg := body(t, resp)
	assert.Contains(t, msg, "memory budget")
	assert.Contains(t, msg, "max_memory is 4.0 MiB")
	assert.EqualValues(t, 1, g.Started(), "the refused session's server never started")
}

// With tokens, a caller with none cannot fill max_connections with idle
// sockets (red team): a new connection past the bound closes the oldest
// one that has not carried an authenticated request, so a token holder
// still gets in, and its connection, once authenticated, is never closed
// for a newcomer.
func TestUnauthenticatedConnectionsYield(t *testing.T) {
	cfg, _ := authConfig(t)
	cfg.Limits.MaxConnections = 8
	g, srv := startGateway(t, cfg)
	require.Eventually(t, func() bool { return g.Connections() == 0 }, 5*time.Second, 10*time.Millisecond)
	held := dialIdle(t, srv, 8)
	require.Eventually(t, func() bool { return g.Connections() == 8 && g.UnauthenticatedConnections() == 8 },
		5*time.Second, 10*time.Millisecond)

	// A token holder gets in while they are held: the oldest idle one goes.
	c, err := net.Dial("tcp", srv.Addr)
	require.NoError(t, err)
	defer c.Close()
	fmt.Fprint(c, httpReq("POST", "/servers/alpha/mcp", initBody, jsonHeaders, "Authorization: Bearer alice-secret"))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 8, g.Connections())
	assert.Equal(t, 7, g.UnauthenticatedConnections(), "the authenticated connection left the list")
	held[0].SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = held[0].Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the oldest unauthenticated connection was closed")

	// Eight more without a token: each closes an older unauthenticated
	// one, never the token holder's.
	dialIdle(t, srv, 8)
	require.Eventually(t, func() bool { return g.UnauthenticatedConnections() == 7 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, 8, g.Connections())
	fmt.Fprint(c, httpReq("POST", "/servers/alpha/mcp", `{"jsonrpc":"2.0","id":2,"method":"ping"}`, jsonHeaders,
		"Authorization: Bearer alice-secret", "Mcp-Session-Id: "+resp.Header.Get(gateway.HeaderSession)))
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err, "the token holder's connection is still open")
	io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	// A request without a valid token does not take its connection out.
	c2, err := net.Dial("tcp", srv.Addr)
	require.NoError(t, err)
	defer c2.Close()
	fmt.Fprint(c2, httpReq("POST", "/servers/alpha/mcp", initBody, jsonHeaders, "Authorization: Bearer wrong"))
	got := readReply(t, c2, true)
	assert.Equal(t, http.StatusUnauthorized, got.status)
	want := 7 // c2 closed an older one and stays listed ...
	if got.closed {
		want = 6 // ... or the gateway closed it after the 401
	}
	assert.Eventually(t, func() bool { return g.UnauthenticatedConnections() == want }, 5*time.Second, 10*time.Millisecond)
}

// dialIdle opens n connections that send nothing, closed when t ends.
func dialIdle(t *testing.T, srv *served, n int) []net.Conn {
	var held []net.Conn
	for range n {
		c, err := net.Dial("tcp", srv.Addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		held = append(held, c)
	}
	return held
}
