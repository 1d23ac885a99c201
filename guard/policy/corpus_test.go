package policy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/agentbound"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/lab/servers"
)

// TestCorpusPolicies: every corpus server has a policy and a manifest, each
// loads (with the overrides directory) and compiles, and names its server.
func TestCorpusPolicies(t *testing.T) {
	root, err := servers.Root()
	require.NoError(t, err)
	dir := t.TempDir()
	vars := map[string]string{"WS": filepath.Join(dir, "ws"), "HOME": filepath.Join(dir, "home"), "TMP": filepath.Join(dir, "tmp")}
	for _, d := range vars {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	for _, name := range servers.Names() {
		t.Run(name, func(t *testing.T) {
			p, err := policy.LoadWithOverrides(filepath.Join(root, "testdata/policies", name+".json"), vars)
			require.NoError(t, err)
			assert.Equal(t, name, p.Server)
			assert.NotEmpty(t, p.Tools)
			assert.NotContains(t, p.Env.Allow, "API_TOKEN", "the canary secret is never passed on")
			_, err = policy.Compile(p, policy.EngineOptions{L2: true})
			require.NoError(t, err)
			m, err := agentbound.Load(filepath.Join(root, "testdata/manifests", name+".json"), vars)
			require.NoError(t, err)
			assert.Equal(t, name, m.Server)
		})
	}
}
