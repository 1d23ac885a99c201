package agentbound

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/internal/stagetest"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

func TestChecker(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	ws, home := filepath.Join(base, "ws"), filepath.Join(base, "home")
	require.NoError(t, os.MkdirAll(ws, 0o755))
	require.NoError(t, os.MkdirAll(home+"/.aws", 0o755))
	require.NoError(t, os.Symlink(home+"/.aws", ws+"/aws-link"))
	m, err := Parse([]byte(`{"server":"s","permissions":[
		{"permission":"mcp.ac.filesystem.read","paths":["${WS}","/usr/share"]},
		{"permission":"mcp.ac.filesystem.write","paths":["${WS}/out"]},
		{"permission":"mcp.ac.network.client","hosts":["127.0.0.2","api.example.com:443"]},
		{"permission":"mcp.ac.system.env.read","variables":["HOME"]},
		{"permission":"mcp.ac.system.exec","commands":["/usr/bin/ls"]}]}`), map[string]string{"WS": ws})
	require.NoError(t, err)
	c := NewChecker(m)
	cases := []struct {
		tool, args, rule string
	}{
		{"read_file", `{"path":"` + ws + `/a.txt"}`, ""},
		{"read_file", `{"path":"a.txt"}`, ""},
		{"read_file", `{"path":"` + ws + `/../home/.aws/credentials"}`, RuleFSRead},
		{"read_file", `{"path":"aws-link/credentials"}`, RuleFSRead},
		{"write_file", `{"path":"` + ws + `/a.txt","content":"x"}`, RuleFSWrite},
		{"write_file", `{"path":"` + ws + `/out/a.txt","content":"x"}`, ""},
		{"fetch", `{"url":"http://127.0.0.2:8080/x"}`, ""},
		{"fetch", `{"url":"https://api.example.com/v1"}`, ""},
		{"fetch", `{"url":"http://api.example.com/v1"}`, RuleNetwork},
		{"fetch", `{"url":"http://127.0.0.1:9/"}`, RuleNetwork},
		{"run", `{"command":"ls -la"}`, ""},
		{"run", `{"command":"printenv"}`, RuleExec},
		{"echo", `{"text":"${HOME}"}`, ""},
		{"echo", `{"text":"$API_TOKEN"}`, RuleEnv},
		{"git_diff", `{"target":"--output=` + home + `/.bashrc"}`, RuleFSRead},
		{"write_query", `{"query":"VACUUM INTO '` + home + `/.ssh/authorized_keys'"}`, RuleFSWrite},
		{"translate", `{"text":"good morning","to":"fr"}`, ""},
		{"x", `[1]`, RuleMalforms},
	}
	for _, tc := range cases {
		d := c.Check(tc.tool, json.RawMessage(tc.args))
		if tc.rule == "" {
			assert.Nil(t, d, "%s %s", tc.tool, tc.args)
			continue
		}
		if assert.NotNil(t, d, "%s %s", tc.tool, tc.args) {
			assert.Equal(t, tc.rule, d.Rule, "%s %s: %s", tc.tool, tc.args, d.Reason)
		}
	}
	_, err = Parse([]byte(`{"server":"s","permissions":[{"permission":"mcp.ac.everything"}]}`), nil)
	assert.Error(t, err)
	_, err = Parse([]byte(`{"server":"s","permissions":[{"permission":"mcp.ac.filesystem.read","paths":["rel"]}]}`), nil)
	assert.Error(t, err)
	_, err = Parse([]byte(`{"server":"${X}"}`), nil)
	assert.Error(t, err)
}

func TestStage(t *testing.T) {
	m, err := Parse([]byte(`{"server":"s","permissions":[{"permission":"mcp.ac.filesystem.read","paths":["/ws"]}]}`), nil)
	require.NoError(t, err)
	var buf bytes.Buffer
	reached := 0
	h := stagetest.Handler(Stage(NewChecker(m), LayerOptions{Server: "s", Config: "C-AB", Audit: audit.New(&buf)}), func(context.Context, *guard.Request) *guard.Response {
		reached++
		return &guard.Response{Result: json.RawMessage(`{}`)}
	})
	r := h(context.Background(), &guard.Request{Method: "tools/call", Tool: "read_file", Arguments: json.RawMessage(`{"path":"/etc/passwd"}`)})
	require.NotNil(t, r.Error)
	assert.Contains(t, r.Error.Message, RuleFSRead)
	var e audit.Event
	require.NoError(t, json.Unmarshal(buf.Bytes(), &e))
	assert.Equal(t, Layer, e.Layer)
	assert.Equal(t, "/etc/passwd", e.Target)
	r = h(context.Background(), &guard.Request{Method: "tools/call", Tool: "read_file", Arguments: json.RawMessage(`{"path":"/ws/a"}`)})
	assert.Nil(t, r.Error)
	assert.Equal(t, 1, reached)
}

// The memo of name verdicts answers as the regexp does, and stops growing
// at its bound.
func TestNameMemo(t *testing.T) {
	n := newNameMemo(writeTools)
	for i := range maxMemoNames + 100 {
		name := fmt.Sprintf("tool_%d", i)
		if i%2 == 0 {
			name = fmt.Sprintf("write_%d", i)
		}
		for range 2 { // the second answer comes from the memo, while it has room
			assert.Equal(t, i%2 == 0, n.match(name), name)
		}
	}
	assert.Len(t, n.m, maxMemoNames)
	assert.True(t, n.match("ſave_file"), "the regexp's case folding (ſ is s), not a lowercase copy of it")
}
