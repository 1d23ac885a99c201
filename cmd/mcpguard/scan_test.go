package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/clients/scan"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/landlock"
	"github.com/mcpguard/mcpguard/internal/testenv"
)

// evasionModes are the corpus's poisoning cases (testdata/cases EV-*):
// what the evasion server's lists carry in each mode.
var evasionModes = []string{"instructions", "annotations", "output_schema", "meta", "title_invisible", "prompt_desc", "resource_desc", "template_desc"}

// TestScanCorpusPoisoning: a Cursor configuration lists the corpus's
// evasion server once per poisoning mode, plus one benign; `mcpguard scan`
// starts each confined and flags every poisoned one (exit 3) and not the
// benign one; after the benign one's definitions change (a rug pull
// between sessions), the next scan reports the change.
func TestScanCorpusPoisoning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nine servers")
	}
	if _, err := landlock.KernelABI(); err != nil {
		testenv.SkipIfNotSupported(t, err)
	}
	argv := buildServer(t, "evasion")
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("MCPGUARD_CONFIG_DIR", filepath.Join(home, "mcpguard"))
	entries := map[string]any{}
	for _, mode := range append([]string{"benign"}, evasionModes...) {
		ws := filepath.Join(home, "ws-"+mode)
		require.NoError(t, os.MkdirAll(ws, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(ws, "mode.txt"), []byte(mode+"\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(ws, "marker.txt"), []byte("CANARY-BASHRC-0123abcd\n"), 0o644))
		entries["ev-"+mode] = map[string]any{"command": argv[0], "args": append(argv[1:], "-ws", ws)}
	}
	cfg, err := json.MarshalIndent(map[string]any{"mcpServers": entries}, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".cursor"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".cursor", "mcp.json"), cfg, 0o644))

	code, stdout, stderr := runIn(t, nil, "scan", "--client", "cursor", "--project", home, "--json")
	require.Equal(t, exitFindings, code, "stderr: %s\nstdout: %s", stderr, stdout)
	var rep scanReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
	flagged := map[string][]string{}
	for _, f := range rep.Findings {
		if f.Severity != scan.Info { // same_name: the same tool, poisoned elsewhere
			flagged[f.Server] = append(flagged[f.Server], f.Rule+" "+f.Kind+" "+f.Name)
		}
	}
	for _, r := range rep.Servers {
		assert.Empty(t, r.Error, r.ID)
		assert.Positive(t, r.Tools, r.ID)
	}
	for _, mode := range evasionModes {
		id := fmt.Sprintf("cursor:~/.cursor/mcp.json:mcpServers.ev-%s", mode)
		assert.NotEmpty(t, flagged[id], "mode %s not flagged (findings: %v)", mode, flagged)
	}
	benign := "cursor:~/.cursor/mcp.json:mcpServers.ev-benign"
	assert.Empty(t, flagged[benign])

	// Between two sessions, the benign server's lists change.
	require.NoError(t, os.WriteFile(filepath.Join(home, "ws-benign", "mode.txt"), []byte("annotations\n"), 0o644))
	code, stdout, stderr = runIn(t, nil, "scan", "--client", "cursor", "--server", "ev-benign", "--project", home)
	assert.Equal(t, exitFindings, code, stderr)
	assert.Contains(t, stdout, scan.RuleRugPull)
	assert.True(t, strings.Contains(stdout, "tool read_file"), stdout)
}

// A server's text reaches the terminal with its control characters
// escaped: a tool name cannot erase its own finding's line (red team).
func TestScanPrintsNoControls(t *testing.T) {
	var out strings.Builder
	name := "evil\r\x1b[2K\x1b[1A\x1b[2K0 findings.\t\u202e"
	printScan(&out, scanReport{
		Servers:  []scanResult{{ID: "claude-code:" + name, Tools: 1}},
		Findings: []scan.Finding{{Severity: "high", Rule: "poisoning", Server: name, Kind: "tool", Name: name, Detail: "said " + name}},
	})
	got := out.String()
	for _, c := range []string{"\r", "\x1b", "\u202e"} {
		assert.NotContains(t, got, c)
	}
	assert.Contains(t, got, `evil\r\x1b[2K\x1b[1A\x1b[2K0 findings.\t\u202e`)
	assert.Contains(t, got, "1 findings:")
	assert.Equal(t, "read_file", audit.Printable("read_file"), "plain names as they are")
	assert.Equal(t, "café résumé", audit.Printable("café résumé"))
}
