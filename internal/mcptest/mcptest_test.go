package mcptest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/internal/mcptest"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

func TestUnknownToolIsRefused(t *testing.T) {
	_, err := mcptest.New(mcptest.Config{Name: "x", Tools: []string{mcptest.Echo, "nope"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"nope"`)
}

// The server offers the tools asked for and no others, and they answer as
// documented (those that need no client handler or a process of their own).
func TestToolsAnswer(t *testing.T) {
	s, err := mcptest.New(mcptest.Config{
		Name:       "alpha",
		Tools:      []string{mcptest.ReadFile, mcptest.Echo, mcptest.Sleep, mcptest.PID},
		EchoPrefix: "alpha:",
		Extras:     true,
	})
	require.NoError(t, err)
	c, err := client.NewInProcessClient(s)
	require.NoError(t, err)
	defer c.Close()
	ctx := t.Context()
	require.NoError(t, c.Start(ctx))
	init, err := c.Initialize(ctx, mcp.InitializeRequest{})
	require.NoError(t, err)
	assert.Equal(t, "alpha", init.ServerInfo.Name)

	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	assert.ElementsMatch(t, []string{"read_file", "echo", "sleep", "pid"}, names)

	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := c.CallTool(ctx, req)
		require.NoError(t, err)
		return res
	}
	text := func(res *mcp.CallToolResult) string { return res.Content[0].(mcp.TextContent).Text }
	assert.Equal(t, "alpha:hi", text(call("echo", map[string]any{"text": "hi"})))
	assert.Equal(t, "slept", text(call("sleep", map[string]any{"ms": 1})))

	f := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(f, []byte("inside"), 0o600))
	assert.Equal(t, "inside", text(call("read_file", map[string]any{"path": f})))
	assert.True(t, call("read_file", map[string]any{"path": f + ".missing"}).IsError)

	rr, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "test://greeting"}})
	require.NoError(t, err)
	assert.Equal(t, "hello", rr.Contents[0].(mcp.TextResourceContents).Text)
	pr, err := c.GetPrompt(ctx, mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "ada"}}})
	require.NoError(t, err)
	assert.Equal(t, "hello ada", pr.Messages[0].Content.(mcp.TextContent).Text)
}
