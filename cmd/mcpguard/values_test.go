package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSDKValues: the official TypeScript SDK's client, against the
// official SDK's reference server (server-everything, built on the SDK's
// server), receives the same JSON values through `mcpguard run` under C0
// and C-app as it does direct: every list, a call of every kind of tool,
// the progress notifications, the server's sampling, elicitation and roots
// requests the client answers, prompts, resources and a completion
// (testdata/compat/values.mjs). Nothing in the session is refused, so
// nothing may differ: the canonical encoding the guard forwards is the
// same values, and the layers change none. (The Python SDK cannot be
// installed here: no PyPI.)
func TestSDKValues(t *testing.T) {
	e := newCompatEnv(t)
	entry := filepath.Join(e.nm, "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		t.Skipf("server-everything not installed: %v", err)
	}
	ws := t.TempDir()
	argv := []string{e.node, entry}
	pol := filepath.Join(t.TempDir(), "everything.json")
	out, err := e.policyInit(ws, pol, nil, nil, nil, argv)
	require.NoError(t, err, "policy init: %s", out)
	run := func(config string) []any {
		cmdArgs := argv
		if config != "" {
			cmdArgs = append([]string{e.runBin, "run", "--config", config, "--policy", pol, "--var", "WS=" + ws, "--"}, argv...)
		}
		b, err := runCompatScript(t, e, "values.mjs", map[string]any{"command": cmdArgs[0], "args": cmdArgs[1:], "cwd": ws})
		var res struct {
			OK     bool   `json:"ok"`
			Error  string `json:"error"`
			Stderr string `json:"stderr"`
			Values []any  `json:"values"`
		}
		require.NoError(t, json.Unmarshal([]byte(lastLineOf(string(b))), &res), "%s: %v: %s", config, err, b)
		require.True(t, res.OK, "%s: %s\n%s", config, res.Error, res.Stderr)
		return res.Values
	}
	direct := normaliseValues(t, run(""))
	for _, config := range []string{"C0", "C-app"} {
		got := normaliseValues(t, run(config))
		require.Len(t, got, len(direct), config)
		for i := range direct {
			assert.Equal(t, direct[i], got[i], "%s: %s", config, direct[i].(map[string]any)["what"])
		}
	}
}

// volatile masks what legitimately differs between two sessions of the
// reference server: times and the ids it makes up.
var volatile = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z|\b\d{1,2}:\d\d:\d\d [AP]M\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|file:///tmp/[^"]*`)

func normaliseValues(t *testing.T, v []any) []any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	b = volatile.ReplaceAll(b, []byte("<volatile>"))
	var out []any
	require.NoError(t, json.Unmarshal(b, &out))
	for _, x := range out {
		// How many progress notifications arrive before the result is a
		// race in the server: the first is compared.
		if m := x.(map[string]any); m["what"] == "progress" {
			if p, ok := m["v"].([]any); ok && len(p) > 1 {
				m["v"] = p[:1]
			}
		}
	}
	return out
}
