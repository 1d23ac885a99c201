package mcpguard_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
)

// officialFS is the official @modelcontextprotocol/server-filesystem, a
// server nobody here wrote, installed from npm into testdata/npm by
// `make deps` (and .ci/run).
const officialFS = "testdata/npm/node_modules/.bin/mcp-server-filesystem"

// fsCalls has one call for every tool the official server lists, in an
// order where each call's effects are visible to the later ones. The test
// fails when the server lists a tool that has no call here, so a new tool
// cannot slip past it.
var fsCalls = []struct {
	tool string
	args string // JSON, with $WS for the workspace
}{
	{"list_allowed_directories", `{}`},
	{"list_directory", `{"path":"$WS"}`},
	{"list_directory_with_sizes", `{"path":"$WS","sortBy":"size"}`},
	{"directory_tree", `{"path":"$WS"}`},
	{"read_file", `{"path":"$WS/a.txt"}`},
	{"read_text_file", `{"path":"$WS/a.txt","head":2}`},
	{"read_media_file", `{"path":"$WS/pixel.png"}`},
	{"read_multiple_files", `{"paths":["$WS/a.txt","$WS/sub/b.md","$WS/missing"]}`},
	{"write_file", `{"path":"$WS/new.txt","content":"written through the proxy\nline 2\n"}`},
	{"edit_file", `{"path":"$WS/new.txt","edits":[{"oldText":"line 2","newText":"line two"}]}`},
	{"edit_file", `{"path":"$WS/new.txt","edits":[{"oldText":"two","newText":"2"}],"dryRun":true}`},
	{"create_directory", `{"path":"$WS/made/deep"}`},
	{"move_file", `{"source":"$WS/new.txt","destination":"$WS/made/new.txt"}`},
	{"search_files", `{"path":"$WS","pattern":"*.txt"}`},
	{"get_file_info", `{"path":"$WS/made/new.txt"}`},
	{"read_text_file", `{"path":"/etc/passwd"}`}, // outside the root: the server's own error
	{"read_text_file", `{"path":"$WS/a.txt","tail":1}`},
}

// TestTransparencyOfficialFilesystem calls every tool of the official
// filesystem server directly and through the C0 proxy, on identical fresh
// workspaces, and requires the same results.
func TestTransparencyOfficialFilesystem(t *testing.T) {
	if _, err := os.Stat(officialFS); err != nil {
		t.Skipf("official filesystem server not installed (run `make deps`): %v", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed")
	}
	abs, err := filepath.Abs(officialFS)
	require.NoError(t, err)
	ws := filepath.Join(t.TempDir(), "ws")

	run := func(viaProxy bool) (tools string, results []string) {
		require.NoError(t, os.RemoveAll(ws))
		makeWorkspace(t, ws)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var c *client.Client
		if viaProxy {
			s, err := guard.Open(ctx, &guard.Proxy{Command: []string{abs, ws}, Server: "server-filesystem", Config: "C0", Stderr: t.Output()})
			require.NoError(t, err)
			defer func() { require.NoError(t, s.Close()) }()
			c = s.Client
		} else {
			c, err = client.NewStdioMCPClient(abs, nil, ws)
			require.NoError(t, err)
			defer c.Close()
			_, err = c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
				ProtocolVersion: guard.ProtocolVersion,
				ClientInfo:      mcp.Implementation{Name: "mcpguard", Version: "dev"},
			}})
			require.NoError(t, err)
		}
		list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		require.NoError(t, err)
		b, _ := json.Marshal(list)
		listed := map[string]bool{}
		for _, tl := range list.Tools {
			listed[tl.Name] = false
		}
		for _, call := range fsCalls {
			var args map[string]any
			require.NoError(t, json.Unmarshal([]byte(strings.ReplaceAll(call.args, "$WS", ws)), &args))
			req := mcp.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = call.tool, args
			res, err := c.CallTool(ctx, req)
			var out string
			if err != nil {
				out = "error: " + err.Error()
			} else {
				rb, _ := json.Marshal(res)
				out = string(rb)
			}
			results = append(results, call.tool+" "+normalise(out))
			listed[call.tool] = true
		}
		for name, called := range listed {
			assert.True(t, called, "tool %s is listed but never called by this test", name)
		}
		return string(b), results
	}
	directTools, direct := run(false)
	proxiedTools, proxied := run(true)
	assert.JSONEq(t, directTools, proxiedTools, "tools/list through the proxy")
	require.Len(t, proxied, len(direct))
	for i := range direct {
		assert.Equal(t, direct[i], proxied[i], "call %d", i)
	}
	// The calls really did something: the proxied write landed.
	b, err := os.ReadFile(filepath.Join(ws, "made", "new.txt"))
	require.NoError(t, err)
	assert.Equal(t, "written through the proxy\nline two\n", string(b))
}

var timestamps = regexp.MustCompile(`(?i)(created|modified|accessed)[^,\\]*`)

// normalise masks what legitimately differs between two runs: file times.
func normalise(s string) string {
	return timestamps.ReplaceAllString(s, "$1: <time>")
}

func makeWorkspace(t *testing.T, ws string) {
	t.Helper()
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")
	files := map[string][]byte{
		"a.txt":     []byte("first line\nsecond line\nthird line\n"),
		"sub/b.md":  []byte("# title\nbody\n"),
		"pixel.png": png,
	}
	for name, data := range files {
		p := filepath.Join(ws, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, data, 0o644))
	}
}
