//go:build unix

package changes_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/changes"
	"github.com/mcpguard/mcpguard/guard/launch"
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

// TestCompareGitObjectFIFO: a FIFO in a loose object's place, a pack's
// or a pack index's does not hang the guard (it is not opened); the
// object is said, the pack and its index noted.
func TestCompareGitObjectFIFO(t *testing.T) {
	needGit(t)
	ws := t.TempDir()
	newRepo(t, ws, 2, "sha1")
	gitIn(t, ws, "", "repack", "-a", "-d", "-q")
	blob := gitIn(t, ws, "loose\n", "hash-object", "-w", "--stdin")
	before := changes.TakeGit([]string{ws})
	pack := onePack(t, ws)
	for _, p := range []string{objectFile(ws, blob), pack, strings.TrimSuffix(pack, ".pack") + ".idx"} {
		require.NoError(t, os.Remove(p))
		require.NoError(t, syscall.Mkfifo(p, 0o644))
	}
	done := make(chan []changes.Change)
	go func() { done <- changes.CompareGit(before, changes.TakeGit([]string{ws}), launch.IsProtected) }()
	select {
	case got := <-done:
		m := byPath(t, ws, got)
		rel := filepath.Join(".git", "objects", blob[:2], blob[2:])
		require.ElementsMatch(t, []string{rel, ".git/objects/pack"}, keys(m))
		assert.Contains(t, m[rel].Diff, "it is not a file but a FIFO")
		assert.Contains(t, m[".git/objects/pack"].Diff, filepath.Base(pack))
	case <-time.After(10 * time.Second):
		t.Fatal("the comparison hung on a FIFO")
	}
}
