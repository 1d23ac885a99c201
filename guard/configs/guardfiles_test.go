package configs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/policy"
)

// TestGuardFilesOutsideWriteRoots: a policy kept inside a write root (the
// workspace's .mcpguard/), or an audit log there, is refused with the
// reason and the fix; the same policy elsewhere runs.
func TestGuardFilesOutsideWriteRoots(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".mcpguard"), 0o755))
	body := []byte(`{"server":"fs","workdir":"${WS}","tools":{"write_file":{"args":{"path":{"kind":"path","access":"write"}}}},
		"filesystem":{"read":["${WS}"],"write":["${WS}"]}}`)
	inside := filepath.Join(ws, ".mcpguard", "fs.json")
	outside := filepath.Join(dir, "fs.json")
	for _, f := range []string{inside, outside} {
		require.NoError(t, os.WriteFile(f, body, 0o644))
	}
	vars := map[string]string{"WS": ws}
	_, err := Build(CApp, Options{Server: "fs", PolicyFile: inside, Vars: vars})
	require.ErrorIs(t, err, policy.ErrGuardFileWritable)
	assert.Contains(t, err.Error(), "the policy file")
	assert.Contains(t, err.Error(), "outside every write root")

	_, err = Build(CApp, Options{Server: "fs", PolicyFile: outside, Vars: vars, AuditFile: filepath.Join(ws, "audit.jsonl")})
	require.ErrorIs(t, err, policy.ErrGuardFileWritable)
	assert.Contains(t, err.Error(), "the audit log")

	// An override that widens a tool's write roots over the policy counts.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "overrides"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "overrides", "o.json"),
		[]byte(`{"server":"fs","tool":"write_file","rule":"path.outside_roots","path":"`+dir+`","access":"write"}`), 0o644))
	_, err = Build(CApp, Options{Server: "fs", PolicyFile: outside, Vars: vars})
	require.ErrorIs(t, err, policy.ErrGuardFileWritable)
	require.NoError(t, os.Remove(filepath.Join(dir, "overrides", "o.json")))

	s, err := Build(CApp, Options{Server: "fs", PolicyFile: outside, Vars: vars, AuditFile: filepath.Join(dir, "audit.jsonl")})
	require.NoError(t, err)
	assert.Equal(t, ws, s.Dir, "the server runs in the policy's workdir")
	s, err = Build(CApp, Options{Server: "fs", PolicyFile: outside, Vars: vars, Dir: filepath.Join(ws, ".mcpguard")})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(ws, ".mcpguard"), s.Dir, "--cwd wins, and relative paths are judged against it")
}
