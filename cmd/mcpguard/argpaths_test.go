package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/policy"
)

func TestArgumentRoots(t *testing.T) {
	home, data := t.TempDir(), t.TempDir()
	db := filepath.Join(data, "db", "app.sqlite")
	require.NoError(t, os.MkdirAll(filepath.Dir(db), 0o755))
	require.NoError(t, os.WriteFile(db, nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(home, "notes.db"), nil, 0o644))
	script := filepath.Join(data, "server.js")
	require.NoError(t, os.WriteFile(script, nil, 0o644))
	prog := filepath.Join(data, "tool")
	require.NoError(t, os.WriteFile(prog, nil, 0o755))
	got := argumentRoots([]string{"node", script, "--db=" + db, data, "~/notes.db", filepath.Join(data, "new", "x.sqlite"),
		filepath.Join(data, "fresh.sqlite"), "/usr/share/dict", "/etc/passwd", home, prog, "relative/dir", "-v"}, home)
	var roots []string
	for _, r := range got {
		roots = append(roots, r.Root)
	}
	assert.Equal(t, []string{
		filepath.Dir(db),                // a database file: its directory (journals beside it)
		data,                            // a directory
		filepath.Join(home, "notes.db"), // a file right in $HOME: the file alone
	}, roots, "code, programs, system trees, $HOME itself, relative paths and a path whose directory does not exist are not data roots; a new file's existing directory is one already listed")
}

// TestArgumentDestinations: the URLs on a server's command line are the
// destinations policy init proposes (issue 33's matrix: a DSN reached on
// the first call only), ports by scheme when none is written, passwords
// never printed; paths, bare words and URLs with no host are not.
func TestArgumentDestinations(t *testing.T) {
	got := argumentDestinations([]string{"mcp-server-postgres", "postgresql://u:s3cret@127.0.0.1:5432/mcptest",
		"--dsn=mysql://root@db.internal/app", "redis://localhost", "file:///tmp/x", "/srv/data", "-v", "http://[::1]:8765/"})
	require.Len(t, got, 4)
	assert.Equal(t, policy.NetRule{Host: "127.0.0.1", Ports: []int{5432}}, got[0].Rule)
	assert.NotContains(t, got[0].Arg, "s3cret")
	assert.Equal(t, policy.NetRule{Host: "db.internal", Ports: []int{3306}}, got[1].Rule)
	assert.Equal(t, policy.NetRule{Host: "localhost", Ports: []int{6379}, Private: true}, got[2].Rule)
	assert.Equal(t, policy.NetRule{Host: "::1", Ports: []int{8765}}, got[3].Rule)
}

// TestPolicyInitStopsGroup: a server that ignores EOF and SIGTERM and
// leaves a child holding policy init's stderr is stopped with its whole
// process group when init is done. (As root the launcher's pid namespace
// ends it too; without root only the group stop does.)
func TestPolicyInitStopsGroup(t *testing.T) {
	argv := pythonServer(t, "stubborn_server.py")
	marker := "stop-marker-" + strings.ReplaceAll(t.Name(), "/", "-")
	start := time.Now()
	code, _, stderr := runIn(t, nil, "policy", "init", "--out", filepath.Join(t.TempDir(), "p.json"), "--", argv[0], argv[1], marker)
	require.Equal(t, 0, code, stderr)
	assert.Less(t, time.Since(start), 30*time.Second)
	assert.Eventually(t, func() bool { return len(withMarker(marker)) == 0 }, 5*time.Second, 100*time.Millisecond,
		"processes of the server left behind: %v", withMarker(marker))
}

// withMarker lists the pids whose command line holds marker.
func withMarker(marker string) []string {
	var out []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), marker) {
			out = append(out, d.Name())
		}
	}
	return out
}
