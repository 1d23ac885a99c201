package fsserver_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/agent/fsserver"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

// The test binary re-executes itself as the server (see SelfCommand).
func init() { fsserver.ServeIfChild() }

func call(t *testing.T, c *client.Client, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	require.NoError(t, err)
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		b.WriteString(mcp.GetTextFromContent(c))
	}
	return b.String()
}

func TestServerOverStdio(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(root, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("canary"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "link")))

	cmd, env, err := fsserver.SelfCommand(root)
	require.NoError(t, err)
	c, err := client.NewStdioMCPClient(cmd[0], env, cmd[1:]...)
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "0"}
	_, err = c.Initialize(ctx, init)
	require.NoError(t, err)

	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	assert.Subset(t, names, []string{"read_file", "write_file", "list_directory", "search_files"})

	res := call(t, c, "read_file", map[string]any{"path": filepath.Join(root, "a.txt")})
	assert.False(t, res.IsError)
	assert.Equal(t, "hello", text(res))

	res = call(t, c, "write_file", map[string]any{"path": filepath.Join(root, "b.txt"), "content": "written"})
	require.False(t, res.IsError, text(res))
	got, err := os.ReadFile(filepath.Join(root, "b.txt"))
	require.NoError(t, err)
	assert.Equal(t, "written", string(got))

	res = call(t, c, "list_directory", map[string]any{"path": root})
	assert.Contains(t, text(res), "[FILE] a.txt")
	assert.Contains(t, text(res), "[DIR] sub")

	res = call(t, c, "search_files", map[string]any{"path": root, "pattern": "A.T"})
	assert.Contains(t, text(res), filepath.Join(root, "a.txt"))

	// Confinement: outside paths, dot-dot escapes and symlinks out are refused.
	for _, p := range []string{filepath.Join(outside, "secret"), filepath.Join(root, "..", filepath.Base(outside), "secret"), filepath.Join(root, "link")} {
		res = call(t, c, "read_file", map[string]any{"path": p})
		assert.True(t, res.IsError, p)
		assert.Contains(t, text(res), "outside allowed directories", p)
		assert.NotContains(t, text(res), "canary")
	}
	res = call(t, c, "write_file", map[string]any{"path": filepath.Join(outside, "x"), "content": "x"})
	assert.True(t, res.IsError)
	assert.NoFileExists(t, filepath.Join(outside, "x"))

	res = call(t, c, "read_file", map[string]any{"path": filepath.Join(root, "missing.txt")})
	assert.True(t, res.IsError)
	assert.Contains(t, text(res), "missing.txt")
}

func TestNewFSRejectsBadRoots(t *testing.T) {
	_, err := fsserver.NewFS()
	assert.Error(t, err)
	_, err = fsserver.NewFS(filepath.Join(t.TempDir(), "nope"))
	assert.Error(t, err)
	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o644))
	_, err = fsserver.NewFS(f)
	assert.ErrorContains(t, err, "not a directory")
}
