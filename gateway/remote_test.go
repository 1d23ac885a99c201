package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/gateway"
)

// bridgeArgv runs the test binary as the gateway's bridge (see TestMain).
func bridgeArgv(t testing.TB) func(string) []string {
	exe, err := os.Executable()
	require.NoError(t, err)
	return func(url string) []string { return []string{exe, "gateway-bridge", url} }
}

// A remote upstream: the front gateway guards, with C-app, a server that is
// itself a Streamable HTTP URL (here another gateway). L1 refuses a call
// outside the policy before it leaves the machine.
func TestRemoteUpstreamGuardedByL1(t *testing.T) {
	_, upstream := startGateway(t, twoServers(t))
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "ok.txt"), []byte("inside"), 0o644))
	policy := filepath.Join(t.TempDir(), "remote.json")
	require.NoError(t, os.WriteFile(policy, []byte(`{
  "server": "remote",
  "tools": {
    "echo": {"schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": false}},
    "read_file": {"args": {"path": {"kind": "path", "access": "read"}}}
  },
  "filesystem": {"read": ["${WS}"]}
}`), 0o644))
	cfg := &gateway.Config{Servers: map[string]*gateway.ServerConfig{
		"remote": {Config: "C-app", Policy: policy, URL: upstream.URL + "/servers/alpha/mcp", Vars: map[string]string{"WS": ws}},
	}}
	b, _ := json.Marshal(cfg)
	cfg, err := gateway.ParseConfig(b)
	require.NoError(t, err)
	g, err := gateway.New(cfg, gateway.Options{Stderr: io.Discard, Grace: 500 * time.Millisecond, Bridge: bridgeArgv(t)})
	require.NoError(t, err)
	front := serveGateway(t, g).URL

	c := connect(t, front+"/servers/remote/mcp", nil)
	defer c.Close()
	assert.Equal(t, "alpha:over two hops", callText(t, c, "echo", map[string]any{"text": "over two hops"}))
	assert.Equal(t, "inside", callText(t, c, "read_file", map[string]any{"path": filepath.Join(ws, "ok.txt")}))
	_, err = c.CallTool(context.Background(), callReq("read_file", map[string]any{"path": "/etc/passwd"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "denied by L1", "the policy refused the path")
	_, err = c.CallTool(context.Background(), callReq("crash", nil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tool.not_allowed", "a tool the policy does not list")
}

// L3 has no process to confine for a remote server: such configs are
// refused when the gateway starts.
func TestRemoteUpstreamRefusesL3(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "p.json")
	require.NoError(t, os.WriteFile(policy, []byte(`{"server":"r","tools":{"echo":{}},"filesystem":{"read":["/tmp"]}}`), 0o644))
	for _, config := range []string{"C-ebpf", "C-full", "C-full-landlock", "C-landlock"} {
		cfg, err := gateway.ParseConfig([]byte(`{"servers":{"r":{"config":"` + config + `","policy":"` + policy + `","url":"http://127.0.0.1:1/mcp"}}}`))
		require.NoError(t, err)
		_, err = gateway.New(cfg, gateway.Options{Stderr: io.Discard, Bridge: bridgeArgv(t)})
		require.Error(t, err, config)
		assert.ErrorIs(t, err, gateway.ErrRemoteL3, config)
	}
}

// A loopback gateway refuses a Host that is not a loopback name, which is
// what a DNS-rebinding page sends, and pages from other origins.
func TestLoopbackHostAndOrigin(t *testing.T) {
	cfg := rawConfig(t)
	b, _ := json.Marshal(cfg)
	cfg, err := gateway.ParseConfig(b)
	require.NoError(t, err)
	g, err := gateway.New(cfg, gateway.Options{Stderr: io.Discard, Loopback: true})
	require.NoError(t, err)
	url := serveGateway(t, g).URL + "/servers/raw/mcp"
	for _, c := range []struct {
		host, origin string
		status       int
	}{
		{"evil.example:8808", "", http.StatusForbidden},
		{"evil.example:8808", "http://evil.example:8808", http.StatusForbidden},
		{"", "http://evil.example", http.StatusForbidden},
		{"localhost:8808", "http://localhost:3000", http.StatusOK},
		{"", "http://127.0.0.1:6274", http.StatusOK},
		{"[::1]:8808", "", http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(initBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		if c.host != "" {
			req.Host = c.host
		}
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, c.status, resp.StatusCode, "host %q origin %q", c.host, c.origin)
	}
	assert.EqualValues(t, 3, g.Started(), "only the allowed requests started a server")
}
