package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/internal/testenv"
)

// TestFromToolsGolden pins what `policy init` derives from a tools/list
// (the tools of the corpus's filesystem, shell and weather servers, plus a
// URL and a camelCase path argument). Run with -update after an intended
// change and review the diff.
func TestFromToolsGolden(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "tools.json"))
	require.NoError(t, err)
	var tools []ToolInfo
	require.NoError(t, json.Unmarshal(in, &tools))
	p, err := FromTools("example", tools)
	require.NoError(t, err)
	got, err := json.MarshalIndent(p, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	golden := filepath.Join("testdata", "derived.golden.json")
	if testenv.Update() {
		require.NoError(t, os.WriteFile(golden, got, 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run with -update to create it")
	assert.Equal(t, string(want), string(got))
}
