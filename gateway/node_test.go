package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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
	assert.Contains(t, agg.Tools, "everything__echo")
	assert.NotContains(t, agg.Tools, "echo")
	assert.Equal(t, "Echo: hello over http", agg.Echo)
	assert.Equal(t, "The sum of 2 and 3 is 5.", agg.Sum)
	assert.Equal(t, 3, agg.Progress)
	assert.Contains(t, agg.Sampling, "sampled-by-sdk")
	assert.Equal(t, "error", agg.UnknownTool, "a name without a server prefix is refused")
}

// conformance runs the official conformance suite's server scenarios
// against url and returns each check's status by scenario/check id.
func conformance(t *testing.T, url string) map[string]string {
	t.Helper()
	node := nodeBin(t)
	bin := packageBin(t, "@modelcontextprotocol/conformance", "conformance")
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, bin, "server", "--url", url, "-o", out)
	cmd.Dir = nodeDir
	log, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("conformance: %v\n%s", err, log)
	}
	if strings.Contains(string(log), "does not provide an export named") {
		t.Skipf("the conformance suite needs a newer node than %s", node)
	}
	stamp := regexp.MustCompile(`-\d{4}-\d\d-\d\dT.*$`)
	got := map[string]string{}
	runs, err := filepath.Glob(filepath.Join(out, "*", "checks.json"))
	require.NoError(t, err)
	require.NotEmpty(t, runs, "conformance wrote no results:\n%s", log)
	for _, f := range runs {
		scenario := stamp.ReplaceAllString(filepath.Base(filepath.Dir(f)), "")
		var checks []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &checks))
		for _, c := range checks {
			got[scenario+"/"+c.ID] = c.Status
		}
	}
	return got
}

// The conformance suite gives server-everything behind the gateway the
// results it gives server-everything's own Streamable HTTP transport: every
// check that passes there passes here. (Most scenarios fail on both: they
// call the suite's own test tools and prompts, which server-everything does
// not have.)
func TestConformanceSameAsServerOwnHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the conformance suite takes minutes")
	}
	url := everythingGateway(t)
	node := nodeBin(t)
	dir := requirePackage(t, "@modelcontextprotocol/server-everything")

	// server-everything's own Streamable HTTP mode, on a free port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	own := exec.Command(node, filepath.Join(dir, "dist/index.js"), "streamableHttp")
	own.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	stderr, err := own.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, own.Start())
	t.Cleanup(func() { own.Process.Kill(); own.Wait() })
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening") {
				ready <- true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("server-everything's HTTP mode did not start")
	}

	baseline := conformance(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/mcp")
	through := conformance(t, url+"/servers/everything/mcp")
	require.Equal(t, len(baseline), len(through), "the same checks ran")
	var passed, better int
	for id, want := range baseline {
		got, ok := through[id]
		require.True(t, ok, "check %s ran against the gateway", id)
		if want == "SUCCESS" {
			passed++
			assert.Equal(t, "SUCCESS", got, "check %s passes on the server's own transport", id)
		} else if got == "SUCCESS" {
			better++
			t.Logf("passes only through the gateway: %s (server's own: %s)", id, want)
		}
	}
	t.Logf("conformance: %d checks, %d pass on server-everything's own HTTP, all of them through the gateway, %d more through the gateway", len(baseline), passed, better)
	assert.Equal(t, "SUCCESS", through["server-dns-rebinding-protection/localhost-host-rebinding-rejected"])
}

// inspector runs the MCP Inspector's CLI mode against url and returns its
// output.
func inspector(t *testing.T, url string, args ...string) string {
	t.Helper()
	node := nodeBin(t)
	bin := packageBin(t, "@modelcontextprotocol/inspector", "mcp-inspector")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{bin, "--cli", url, "--transport", "http"}, args...)...)
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
	assert.Contains(t, out, `"name": "everything__get-sum"`)
	out = inspector(t, url+"/mcp", "--method", "tools/call", "--tool-name", "everything__get-sum", "--tool-arg", "a=2", "--tool-arg", "b=40")
	assert.Contains(t, out, "The sum of 2 and 40 is 42.")
}
