package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/gateway"
)

// nodeDir holds the npm packages these tests use (scripts/deps.sh installs
// them with npm ci).
const nodeDir = "testdata/node"

// nodeBin is the Node.js to run the tests' scripts with: the node 22 that
// npm installed beside the packages (the conformance suite needs 22), else
// the system's.
func nodeBin(t *testing.T) string {
	t.Helper()
	if p, err := filepath.Abs(filepath.Join(nodeDir, "node_modules/.bin/node")); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (scripts/deps.sh installs it)")
	}
	return p
}

// requirePackage skips t when an npm package of testdata/node is missing.
func requirePackage(t *testing.T, pkg string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join(nodeDir, "node_modules", pkg))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		t.Skipf("npm package %s is not installed (run scripts/deps.sh)", pkg)
	}
	return dir
}

// packageBin is the script that npm package pkg installs as command name
// (its package.json "bin"); it skips t when the package is missing.
func packageBin(t *testing.T, pkg, name string) string {
	t.Helper()
	dir := requirePackage(t, pkg)
	var meta struct {
		Bin map[string]string `json:"bin"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &meta))
	require.NotEmpty(t, meta.Bin[name], "%s has no command %s", pkg, name)
	return filepath.Join(dir, meta.Bin[name])
}

// everythingGateway serves server-everything (stdio mode) as server
// "everything" under C0.
func everythingGateway(t *testing.T) string {
	node := nodeBin(t)
	dir := requirePackage(t, "@modelcontextprotocol/server-everything")
	cfg := &gateway.Config{Servers: map[string]*gateway.ServerConfig{
		"everything": {Config: "C0", Command: []string{node, filepath.Join(dir, "dist/index.js"), "stdio"}},
	}}
	_, srv := startGateway(t, cfg)
	return srv.URL
}

// sdkResult is what testdata/node/sdk-client.mjs prints.
type sdkResult struct {
	Served    map[string]int `json:"served"`
	SessionID string         `json:"sessionId"`
	Server    struct {
		Name string `json:"name"`
	} `json:"server"`
	Tools       []string `json:"tools"`
	Echo        string   `json:"echo"`
	Sum         string   `json:"sum"`
	Progress    int      `json:"progress"`
	Sampling    string   `json:"sampling"`
	Resources   int      `json:"resources"`
	Prompts     int      `json:"prompts"`
	UnknownTool string   `json:"unknownTool"`
}

func runSDKClient(t *testing.T, url string) sdkResult {
	t.Helper()
	node := nodeBin(t)
	requirePackage(t, "@modelcontextprotocol/sdk")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "sdk-client.mjs", url)
	cmd.Dir = nodeDir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "sdk-client: %s", stderr.String())
	var res sdkResult
	require.NoError(t, json.Unmarshal(out, &res), "%s", out)
	return res
}

// The official TypeScript SDK's StreamableHTTPClientTransport against
// server-everything through both endpoints: tools, progress, and the
// server's own requests (sampling, roots) answered by the SDK client.
func TestTypeScriptSDKClient(t *testing.T) {
	url := everythingGateway(t)

	direct := runSDKClient(t, url+"/servers/everything/mcp")
	assert.NotEmpty(t, direct.SessionID)
	assert.Equal(t, "mcp-servers/everything", direct.Server.Name, "the server's own initialize result, untouched")
	assert.Contains(t, direct.Tools, "echo")
	assert.Equal(t, "Echo: hello over http", direct.Echo)
	assert.Equal(t, "The sum of 2 and 3 is 5.", direct.Sum)
	assert.Equal(t, 3, direct.Progress, "three progress notifications for three steps")
	assert.Contains(t, direct.Sampling, "sampled-by-sdk", "the server's sampling request reached the SDK client and its answer came back")
	assert.GreaterOrEqual(t, direct.Served["roots"], 1, "the server asked the client for its roots")

	agg := runSDKClient(t, url+"/mcp")
	assert.Equal(t, "mcpguard-gateway", agg.Server.Name)
	assert.Equal(t, direct.Tools, agg.Tools, "one server: every name is its own, unprefixed")
	assert.Equal(t, "Echo: hello over http", agg.Echo)
	assert.Equal(t, "The sum of 2 and 3 is 5.", agg.Sum)
	assert.Equal(t, 3, agg.Progress)
	assert.Contains(t, agg.Sampling, "sampled-by-sdk")
	assert.Positive(t, direct.Resources)
	assert.Equal(t, direct.Resources, agg.Resources, "resources through the aggregate")
	assert.Positive(t, direct.Prompts)
	assert.Equal(t, direct.Prompts, agg.Prompts, "prompts through the aggregate")
	assert.Equal(t, "error", agg.UnknownTool, "a name no server lists is refused")
}

// inspector runs the MCP Inspector's CLI mode against url and returns its
// output.
func inspector(t *testing.T, url string, args ...string) string {
	t.Helper()
	node := nodeBin(t)
	bin := packageBin(t, "@modelcontextprotocol/inspector", "mcp-inspector")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Its own connect timeout is 15 s: a session's server (a node process)
	// can take longer than that to start on a loaded machine.
	cmd := exec.CommandContext(ctx, node, append([]string{bin, "--cli", url, "--transport", "http", "--connect-timeout", "100000"}, args...)...)
	cmd.Dir = nodeDir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// The MCP Inspector's CLI lists and calls tools through both endpoints.
func TestInspectorCLI(t *testing.T) {
	url := everythingGateway(t)
	out := inspector(t, url+"/servers/everything/mcp", "--method", "tools/list")
	assert.Contains(t, out, `"name": "get-sum"`)
	out = inspector(t, url+"/servers/everything/mcp", "--method", "tools/call", "--tool-name", "get-sum", "--tool-arg", "a=2", "--tool-arg", "b=40")
	assert.Contains(t, out, "The sum of 2 and 40 is 42.")
	out = inspector(t, url+"/mcp", "--method", "tools/list")
	assert.Contains(t, out, `"name": "get-sum"`, "one server behind /mcp: its own names")
	out = inspector(t, url+"/mcp", "--method", "tools/call", "--tool-name", "get-sum", "--tool-arg", "a=2", "--tool-arg", "b=40")
	assert.Contains(t, out, "The sum of 2 and 40 is 42.")
}

// cutter is a TCP relay in front of the gateway that breaks, once, the
// connection carrying the first progress notification to the client, as a
// flaky network would, and notes the requests that resume a stream.
type cutter struct {
	target  string
	ln      net.Listener
	cut     atomic.Bool
	resumed atomic.Int32 // requests with Last-Event-ID
}

func newCutter(t *testing.T, target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &cutter{target: target, ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go c.relay(conn)
		}
	}()
	return c
}

func (c *cutter) relay(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", c.target)
	if err != nil {
		return
	}
	defer server.Close()
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if bytes.Contains(bytes.ToLower(buf[:n]), []byte("\r\nlast-event-id:")) {
					c.resumed.Add(1)
				}
				if _, werr := server.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				server.Close()
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			progress := bytes.Contains(buf[:n], []byte(`"notifications/progress"`))
			if progress && c.cut.CompareAndSwap(false, true) {
				// Pass the progress on, then break the connection: the
				// client has an event id of the stream to resume from.
				client.Write(buf[:n])
				return
			}
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// The official TypeScript SDK client's own resume path: the connection
// carrying a tool call's stream breaks after its first progress
// notification; the SDK reconnects with Last-Event-ID, and the gateway
// replays what it missed and carries on, on both endpoints. Every progress
// notification arrives once, in order, and the result comes.
func TestTypeScriptSDKResume(t *testing.T) {
	url := everythingGateway(t)
	node := nodeBin(t)
	requirePackage(t, "@modelcontextprotocol/sdk")
	for _, path := range []string{"/servers/everything/mcp", "/mcp"} {
		t.Run(path, func(t *testing.T) {
			c := newCutter(t, strings.TrimPrefix(url, "http://"))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "sdk-resume.mjs", "http://"+c.ln.Addr().String()+path)
			cmd.Dir = nodeDir
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, "sdk-resume: %s", stderr.String())
			var res struct {
				Progress []float64 `json:"progress"`
				Tokens   int       `json:"tokens"`
				Result   string    `json:"result"`
				Errors   []string  `json:"errors"`
			}
			require.NoError(t, json.Unmarshal(out, &res), "%s", out)
			require.True(t, c.cut.Load(), "the call's stream was cut")
			assert.Positive(t, c.resumed.Load(), "the SDK came back with Last-Event-ID")
			assert.Contains(t, res.Result, "Long running operation completed")
			assert.Equal(t, []float64{1, 2, 3, 4}, res.Progress, "every progress notification once, in order")
			assert.Positive(t, res.Tokens, "the SDK saw the stream's event ids")
			t.Logf("resumed requests %d, SDK errors %v", c.resumed.Load(), res.Errors)
		})
	}
}
