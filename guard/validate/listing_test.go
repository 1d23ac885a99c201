package validate

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
)

// TestListingRedacted: a secret in a tool's description or schema (an
// example, a default) reaches the client's model through tools/list; it is
// redacted there as in results, and the tool stays listed and callable.
func TestListingRedacted(t *testing.T) {
	var buf bytes.Buffer
	key := "glpat-" + mixed(20, alnum)
	withKey := tool("deploy", "Deploys. Uses the token "+key+" for the registry.")
	withKey["inputSchema"] = map[string]any{"type": "object", "properties": map[string]any{
		"token": map[string]any{"type": "string", "default": "sk_live_" + mixed(24, alnum)}}}
	srv := &fakeServer{tools: []map[string]any{tool("read_file", "Read a file."), withKey}, text: "ok"}
	h := Chain(srv, Options{Server: "s", Config: "C-app", Audit: audit.New(&buf)})
	ctx := context.Background()
	r := h(ctx, &guard.Request{Method: "tools/list"})
	require.Nil(t, r.Error)
	assert.NotContains(t, string(r.Result), key)
	assert.NotContains(t, string(r.Result), "sk_live_")
	assert.Contains(t, string(r.Result), "[REDACTED:gitlab-pat]")
	assert.Equal(t, []string{"read_file", "deploy"}, listNames(t, r))
	assert.Contains(t, buf.String(), `"rule":"response.secret"`)
	assert.Nil(t, h(ctx, &guard.Request{Method: "tools/call", Tool: "deploy"}).Error, "not a poisoned tool: still callable")

	// A listing with no secret is passed as it is.
	srv = &fakeServer{tools: []map[string]any{tool("read_file", "Read a file.")}, text: "ok"}
	h = Chain(srv, Options{})
	r = h(ctx, &guard.Request{Method: "tools/list"})
	var list struct{ Tools []json.RawMessage }
	require.NoError(t, json.Unmarshal(r.Result, &list))
	assert.Len(t, list.Tools, 1)
}
