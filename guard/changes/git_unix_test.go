//go:build unix

package changes_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/changes"
)

// TestTakeGitFIFO: a FIFO where the index or a ref should be does not
// hang the guard (no writer will ever come); it is said.
func TestTakeGitFIFO(t *testing.T) {
	ws := t.TempDir()
	writeRepo(t, ws, nil)
	require.NoError(t, syscall.Mkfifo(filepath.Join(ws, ".git", "index"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(ws, ".git", "refs", "heads", "fifo"), 0o644))
	done := make(chan *changes.GitSnapshot)
	go func() { done <- changes.TakeGit([]string{ws}) }()
	select {
	case s := <-done:
		g := s.Repos[ws]
		assert.Contains(t, g.IndexErr, "not a regular file")
		assert.NotContains(t, g.Refs, "refs/heads/fifo")
		assert.NotEmpty(t, g.Notes)
	case <-time.After(10 * time.Second):
		t.Fatal("TakeGit hung on a FIFO")
	}
}
