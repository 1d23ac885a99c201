package runtime

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/launch"
)

// TestCacheReusesUnchanged: sessions of one process that resolve the same
// Python server ask its interpreter once; a .pth file added to its
// search path (a file the answer came from changed) makes the next
// session ask again and see it, and the new answer is kept only once
// nothing it came from changed within the second before it was asked.
func TestCacheReusesUnchanged(t *testing.T) {
	needHelperSandbox(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(py, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Skipf("python3 -m venv: %v: %s", err, out)
	}
	sp, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
	require.NotEmpty(t, sp)
	srv := filepath.Join(t.TempDir(), "server.py")
	write(t, srv, "print(1)\n", 0o644)
	time.Sleep(1100 * time.Millisecond) // older than a helper's start by a second

	var asked atomic.Int32
	cache := NewCache()
	resolve := func() *Runtime {
		t.Helper()
		r := New(Options{Cache: cache, Run: func(ctx context.Context, h launch.Helper) ([]byte, error) {
			asked.Add(1)
			return h.Output(ctx)
		}})
		rt, err := r.Resolve(context.Background(), Command{Argv: []string{filepath.Join(venv, "bin", "python"), srv}, Env: []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}})
		require.NoError(t, err)
		return rt
	}
	first := resolve()
	require.EqualValues(t, 1, asked.Load())
	again := resolve()
	assert.EqualValues(t, 1, asked.Load(), "an unchanged interpreter is not asked again")
	assert.Equal(t, first, again)

	// Searchable by the helper's user, as the .pth's directory must be
	// for site.py to add it.
	outside, err := os.MkdirTemp("", "mcpguard-pth-*")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(outside) })
	require.NoError(t, os.Chmod(outside, 0o755))
	write(t, filepath.Join(sp[0], "extra.pth"), outside+"\n", 0o644)
	changed := resolve()
	assert.EqualValues(t, 2, asked.Load(), "a new .pth in the search path: asked again")
	assert.Contains(t, strings.Join(changed.Notes, "\n"), outside, "the new answer names the .pth's directory")
	// The helper above started within a second of the .pth's writing
	// (milliseconds here), so its answer was not kept: asked again,
	// however long that helper took. Whether the third is kept then
	// depends only on the sleep, not on how loaded the machine is.
	time.Sleep(1100 * time.Millisecond)
	resolve()
	assert.EqualValues(t, 3, asked.Load(), "changed within the second before: not kept")
	resolve()
	assert.EqualValues(t, 3, asked.Load(), "kept once settled")

	// A different request (the server's user) is another answer.
	t.Setenv(launch.UserEnv, "12345:12345")
	resolve()
	assert.EqualValues(t, 4, asked.Load())
}
