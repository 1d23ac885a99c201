package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/gateway"
	"github.com/mcpguard/mcpguard/guard/audit"
)

// authConfig has two tokens: alice may reach alpha only, root everything;
// browsers from app.example may call.
func authConfig(t *testing.T) (*gateway.Config, string) {
	cfg := twoServers(t)
	cfg.Tokens = []gateway.Token{
		{Name: "alice", SHA256: gateway.HashToken("alice-secret"), Servers: []string{"alpha"}},
		{Name: "root", SHA256: gateway.HashToken("root-secret"), Servers: []string{"*"}},
	}
	cfg.AllowedOrigins = []string{"https://app.example"}
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg.Audit = log
	return cfg, log
}

func bearer(secret string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + secret}
}

func TestRefusedRequestsReachNoServer(t *testing.T) {
	cfg, log := authConfig(t)
	g, srv := startGateway(t, cfg)
	alpha, beta, agg := srv.URL+"/servers/alpha/mcp", srv.URL+"/servers/beta/mcp", srv.URL+"/mcp"
	cases := []struct {
		name   string
		url    string
		hdr    map[string]string
		status int
	}{
		{"no token", alpha, nil, http.StatusUnauthorized},
		{"wrong token", alpha, bearer("guess"), http.StatusUnauthorized},
		{"token as basic auth", alpha, map[string]string{"Authorization": "Basic YWxpY2Utc2VjcmV0"}, http.StatusUnauthorized},
		{"the hash as the token", alpha, bearer(gateway.HashToken("alice-secret")), http.StatusUnauthorized},
		{"ungranted server", beta, bearer("alice-secret"), http.StatusForbidden},
		{"foreign origin", alpha, map[string]string{"Authorization": "Bearer alice-secret", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"foreign origin, no token", agg, map[string]string{"Origin": "http://localhost:8808"}, http.StatusForbidden},
		{"no token, aggregate", agg, nil, http.StatusUnauthorized},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := post(t, c.url, "", initBody, c.hdr)
			resp.Body.Close()
			assert.Equal(t, c.status, resp.StatusCode)
			if c.status == http.StatusUnauthorized {
				assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
			}
			assert.Empty(t, resp.Header.Get(gateway.HeaderSession))
		})
	}
	assert.Zero(t, g.Started(), "no refused request started a server")
	assert.Zero(t, g.Sessions())

	// Granted requests do get through, and a session is bound to its token.
	sid := rawSession(t, alpha, map[string]string{"Authorization": "Bearer alice-secret", "Origin": "https://app.example"})
	resp := post(t, alpha, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, bearer("root-secret"))
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "another token cannot use alice's session")
	resp = post(t, alpha, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.EqualValues(t, 1, g.Started())

	// On the aggregate endpoint alice sees alpha's tools only.
	aggSid := rawSession(t, agg, bearer("alice-secret"))
	resp = post(t, agg, aggSid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, bearer("alice-secret"))
	list := body(t, resp)
	assert.Contains(t, list, `"name":"echo"`, "alpha's alone: no collision, no prefix")
	assert.NotContains(t, list, "__")
	resp = post(t, agg, aggSid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"beta__echo","arguments":{"text":"x"}}}`, bearer("alice-secret"))
	assert.Contains(t, body(t, resp), `"error"`, "beta is not alice's")
	resp = post(t, agg, aggSid, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, bearer("alice-secret"))
	assert.Contains(t, body(t, resp), `alpha:x`)
	assert.EqualValues(t, 2, g.Started())

	// Every request is in the audit log with who made it.
	f, err := os.Open(log)
	require.NoError(t, err)
	defer f.Close()
	var events []audit.Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e audit.Event
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		events = append(events, e)
	}
	var denied, alice int
	for _, e := range events {
		assert.Equal(t, "gateway", e.Layer)
		if e.Decision == audit.Deny {
			denied++
		}
		if e.Identity == "alice" {
			alice++
		}
	}
	assert.GreaterOrEqual(t, denied, len(cases)+2)
	assert.GreaterOrEqual(t, alice, 6, "alice's requests carry her name")
}

func TestConfigChecks(t *testing.T) {
	for name, js := range map[string]string{
		"no servers":     `{"servers":{}}`,
		"unknown field":  `{"servers":{"a":{"config":"C0","command":["x"]}},"bogus":1}`,
		"bad name":       `{"servers":{"a__b":{"config":"C0","command":["x"]}}}`,
		"no command":     `{"servers":{"a":{"config":"C0"}}}`,
		"both":           `{"servers":{"a":{"config":"C0","command":["x"],"url":"http://h/mcp"}}}`,
		"bad url":        `{"servers":{"a":{"config":"C0","url":"file:///etc"}}}`,
		"short hash":     `{"servers":{"a":{"config":"C0","command":["x"]}},"tokens":[{"name":"t","sha256":"abc","servers":["a"]}]}`,
		"unknown grant":  `{"servers":{"a":{"config":"C0","command":["x"]}},"tokens":[{"name":"t","sha256":"` + gateway.HashToken("s") + `","servers":["b"]}]}`,
		"bad origin":     `{"servers":{"a":{"config":"C0","command":["x"]}},"allowed_origins":["evil"]}`,
		"negative limit": `{"servers":{"a":{"config":"C0","command":["x"]}},"limits":{"max_sessions":-1}}`,
	} {
		_, err := gateway.ParseConfig([]byte(js))
		assert.ErrorIs(t, err, gateway.ErrConfig, name)
	}
	cfg, err := gateway.ParseConfig([]byte(`{"servers":{"a":{"config":"C-nope","command":["x"]}}}`))
	require.NoError(t, err)
	_, err = gateway.New(cfg, gateway.Options{})
	assert.Error(t, err, "an unknown config fails at start, not per session")
}

// The layers' own events (an L1 denial here) carry the identity of the
// session's caller, in the server's audit log.
func TestLayerEventsCarryIdentity(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "alpha.json")
	require.NoError(t, os.WriteFile(policy, []byte(`{
  "server": "alpha",
  "tools": {"read_file": {"args": {"path": {"kind": "path", "access": "read"}}}},
  "filesystem": {"read": ["${WS}"]},
  "env": {"allow": ["GATEWAY_TEST_SERVER"]}
}`), 0o644))
	sc := testServerConfig(t, "alpha")
	sc.Config, sc.Policy, sc.Audit, sc.Vars = "C-app", policy, filepath.Join(dir, "alpha-audit.jsonl"), map[string]string{"WS": dir}
	cfg := &gateway.Config{
		Servers: map[string]*gateway.ServerConfig{"alpha": sc},
		Tokens:  []gateway.Token{{Name: "alice", SHA256: gateway.HashToken("alice-secret"), Servers: []string{"alpha"}}},
	}
	_, srv := startGateway(t, cfg)
	c := connect(t, srv.URL+"/servers/alpha/mcp", bearer("alice-secret"))
	defer c.Close()
	_, err := c.CallTool(t.Context(), callReq("read_file", map[string]any{"path": "/etc/passwd"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "denied by L1")

	b, err := os.ReadFile(sc.Audit)
	require.NoError(t, err)
	var denials int
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var e audit.Event
		require.NoError(t, json.Unmarshal(line, &e), "%s", line)
		assert.Equal(t, "alice", e.Identity, "%s", line)
		if e.Decision == audit.Deny {
			denials++
			assert.Equal(t, "L1", e.Layer)
			assert.Equal(t, "read_file", e.Tool)
		}
	}
	assert.Equal(t, 1, denials)
}
