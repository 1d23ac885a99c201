package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listing is what a client was offered.
type listing struct {
	OK        bool                       `json:"ok"`
	Error     string                     `json:"error"`
	Tools     []string                   `json:"tools"`
	Schemas   map[string]json.RawMessage `json:"schemas"`
	Prompts   []string                   `json:"prompts"`
	Resources []string                   `json:"resources"`
	Stderr    string                     `json:"stderr"`
}

// TestListingsUnchanged: L2's definition checks (poisoning by rule, hidden
// characters, injections) find nothing in real servers' listings: every
// tool, prompt and resource the compatibility suite's servers list, and
// desktop-commander's full tool list (its start_search names .env among
// the files it finds, which the old rule took for poisoning), reach the
// official TypeScript SDK client through `mcpguard run --config C-app`
// as they do direct, and the guard announces no removal on stderr.
func TestListingsUnchanged(t *testing.T) {
	e := newCompatEnv(t)
	rows := map[string][]string{}
	for _, srv := range compatServers {
		l := srv.launch(t, e)
		if argv, ok := l.argv["node <entry>"]; ok {
			rows[srv.name] = argv
		}
	}
	require.Contains(t, rows, "server-filesystem")
	require.Contains(t, rows, "desktop-commander")
	for name, argv := range rows {
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			// desktop-commander keeps its config and logs in HOME.
			home := filepath.Join(ws, ".home")
			require.NoError(t, os.MkdirAll(home, 0o755))
			argv = replaceWS(argv, ws)
			env := map[string]string{"HOME": home}
			direct := listWith(t, e, ws, env, argv)
			// The policy lists every tool the server listed, with its schema,
			// as policy init writes it (without init's start of the server: the
			// test is about L2's definition checks, not L1's tool list; and
			// desktop-commander writes ~/.claude-server-commander as it starts,
			// which init's confined run refuses).
			pol := filepath.Join(t.TempDir(), "policy.json")
			writeListedPolicy(t, pol, name, direct, map[string]any{"read": []string{"${WS}"}}, []string{"HOME"})
			guarded := listWith(t, e, ws, env, append([]string{e.runBin, "run", "--config", "C-app", "--policy", pol, "--var", "WS=" + ws, "--"}, argv...))
			assert.Equal(t, direct.Tools, guarded.Tools, "tools")
			assert.Equal(t, direct.Prompts, guarded.Prompts, "prompts")
			assert.Equal(t, direct.Resources, guarded.Resources, "resources")
			assert.NotContains(t, guarded.Stderr, "removed from", "the guard announced a removal")
			if name == "desktop-commander" {
				assert.Contains(t, guarded.Tools, "start_search")
				t.Logf("desktop-commander under C-app: %d tools: %s", len(guarded.Tools), strings.Join(guarded.Tools, " "))
			}
		})
	}
}

// writeListedPolicy writes a policy of every tool l lists, with its schema
// (as policy init writes it), the filesystem section fs and the variables
// env besides PATH, LANG and TMPDIR.
func writeListedPolicy(t *testing.T, pol, server string, l listing, fs map[string]any, env []string) {
	t.Helper()
	tools := map[string]any{}
	for name, schema := range l.Schemas {
		tools[name] = map[string]any{"schema": schema}
	}
	b, err := json.MarshalIndent(map[string]any{"server": server, "tools": tools, "workdir": "${WS}",
		"filesystem": fs, "env": map[string]any{"allow": append([]string{"PATH", "LANG", "TMPDIR"}, env...)}}, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(pol, b, 0o644))
}

func replaceWS(argv []string, ws string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = strings.ReplaceAll(a, wsArg, ws)
	}
	return out
}

func listWith(t *testing.T, e compatEnv, ws string, env map[string]string, argv []string) listing {
	t.Helper()
	b, err := runCompatScript(t, e, "list.mjs", map[string]any{"command": argv[0], "args": argv[1:], "cwd": ws, "env": env})
	var l listing
	require.NoError(t, json.Unmarshal([]byte(lastLineOf(string(b))), &l), "%v: %s", err, b)
	require.True(t, l.OK, "%s\n%s", l.Error, l.Stderr)
	return l
}

// runCompatScript runs one of testdata/compat's client scripts on spec
// (its request time bound added), bounded as a compat session is, and
// returns what it printed.
func runCompatScript(t *testing.T, e compatEnv, script string, spec map[string]any) ([]byte, error) {
	t.Helper()
	spec["timeoutMs"] = (60 * compatTimeScale()).Milliseconds()
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "spec.json")
	require.NoError(t, os.WriteFile(f, b, 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 2*60*compatTimeScale())
	defer cancel()
	cmd := exec.CommandContext(ctx, e.node, filepath.Join(e.compat, script), f)
	cmd.Dir = e.compat
	return cmd.Output()
}
