package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"

	"github.com/mcpguard/mcpguard/gateway"
)

// listConfig serves a test server per entry of servers (name -> tools).
func listConfig(t *testing.T, servers map[string][]string) *gateway.Config {
	cfg := &gateway.Config{Servers: map[string]*gateway.ServerConfig{}}
	for name, tools := range servers {
		cfg.Servers[name] = testServerConfig(t, "list:"+name+":"+strings.Join(tools, "|"))
	}
	return cfg
}

// callOn calls tool through c and returns the text, or the error.
func callOn(c *client.Client, tool string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, callReq(tool, nil))
	if err != nil {
		return "error: " + err.Error()
	}
	if tc, ok := res.Content[0].(mcp.TextContent); ok {
		return tc.Text
	}
	return fmt.Sprint(res.Content[0])
}

// The aggregate's names: a name only one server lists stays as it is;
// names that collide, equal or confusable (case, Unicode and ASCII
// homoglyphs), are
// prefixed with their server's name; a name that still collides after
// that is left out. A call goes only to the server that listed the name
// it uses: never to another, whatever the name looks like.
func TestAggregateNames(t *testing.T) {
	cyrillicA := "re\u0430d" // "reаd" with a Cyrillic а
	cfg := listConfig(t, map[string][]string{
		"x_": {"y", "read", "Shared"},
		"x":  {"_y", cyrillicA, "shared"},
		"a":  {"b__only", "solo"},
		"b":  {"only"},
		"c":  {"only", "read_file", "format"},
		"d":  {"read_fiIe", "forrnat"}, // ASCII lookalikes: capital I for l, rn for m
	})
	_, srv := startGateway(t, cfg)
	c := connect(t, srv.URL+"/mcp", nil)
	defer c.Close()
	names := toolNames(t, c)
	want := []string{
		"y", "_y", // x_'s y and x's _y both spell x___y prefixed: unique here, kept
		"x___read", "x__" + cyrillicA, // confusable: prefixed
		"x___Shared", "x__shared", // equal but for case: prefixed
		"solo",
		"c__only",                                                 // b's and c's only collide; b__only then collides with a's own b__only: both left out
		"c__read_file", "d__read_fiIe", "c__format", "d__forrnat", // ASCII lookalikes: prefixed
	}
	assert.ElementsMatch(t, want, names)
	for tool, server := range map[string]string{"y": "x_/y", "_y": "x/_y", "x___read": "x_/read", "x__" + cyrillicA: "x/" + cyrillicA,
		"x___Shared": "x_/Shared", "x__shared": "x/shared", "solo": "a/solo", "c__only": "c/only",
		"c__read_file": "c/read_file", "d__read_fiIe": "d/read_fiIe", "c__format": "c/format", "d__forrnat": "d/forrnat"} {
		assert.Equal(t, server, callOn(c, tool), "tool %q", tool)
	}
	for _, tool := range []string{"read", cyrillicA, "b__only", "only", "x___y", "shared", "x__read", "read_file", "read_fiIe"} {
		assert.Contains(t, callOn(c, tool), "error", "%q names no tool, or an ambiguous one: refused", tool)
	}
}

// A server whose list fails once is not out of the aggregate session for
// good: the merged list without it is not kept, and the next request that
// needs the table lists again (a call of its tool finds it).
func TestAggregateListsAgainAfterAFailure(t *testing.T) {
	cfg := listConfig(t, map[string][]string{"a": {"one"}})
	cfg.Servers["b"] = testServerConfig(t, "flakylist:b:two")
	_, srv := startGateway(t, cfg)
	c := connect(t, srv.URL+"/mcp", nil)
	defer c.Close()
	assert.ElementsMatch(t, []string{"one"}, toolNames(t, c), "b's first tools/list failed")
	assert.Equal(t, "b/two", callOn(c, "two"), "listed again for the call")
	assert.ElementsMatch(t, []string{"one", "two"}, toolNames(t, c))
}

// A server that fails initialize is out of the aggregate session at once,
// not only once its process is gone: what goes to every server
// (logging/setLevel) goes to the others.
func TestAggregateLeavesOutAFailedServer(t *testing.T) {
	_, srv := startGateway(t, &gateway.Config{Servers: map[string]*gateway.ServerConfig{
		"alpha": testServerConfig(t, "alpha"),
		"bad":   testServerConfig(t, "badinit"),
	}})
	c := connect(t, srv.URL+"/mcp", nil)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	assert.NoError(t, c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelWarning}}))
	assert.Equal(t, "alpha:hi", callText(t, c, "echo", map[string]any{"text": "hi"}))
}
