//go:build linux

package runtime

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The observer sees what the followed process group opens and runs, and
// nothing of other processes.
func TestObserve(t *testing.T) {
	o, err := Observe()
	if errors.Is(err, ErrNoObserver) {
		t.Skipf("fanotify not available here: %v", err)
	}
	require.NoError(t, err)
	dir := t.TempDir()
	mine := filepath.Join(dir, "mine.txt")
	other := filepath.Join(dir, "other.txt")
	require.NoError(t, os.WriteFile(mine, []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(other, []byte("x"), 0o644))

	// Children that exit before their events are read may be missed
	// (Observer's limits); sleep lives long enough to be seen.
	cmd := exec.Command("/bin/sh", "-c", "read x < "+mine+"; exec /bin/sleep 0.3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	o.Follow(cmd.Process.Pid)
	b, err := os.ReadFile(other) // this test's own open: another group
	require.NoError(t, err)
	require.Equal(t, "x", string(b))
	require.NoError(t, cmd.Wait())
	seen := o.Stop()
	var paths []string
	execs := map[string]bool{}
	for _, a := range seen {
		paths = append(paths, a.Path)
		execs[a.Path] = a.Exec
	}
	assert.Contains(t, paths, mine)
	assert.NotContains(t, paths, other, "another process group's opens are not recorded")
	sleep, _ := filepath.EvalSymlinks("/bin/sleep")
	assert.True(t, execs[sleep], "the exec of sleep is seen as an exec: %v", paths)
	assert.False(t, execs[mine], "a read is not an exec")
}

func TestParseMounts(t *testing.T) {
	m := parseMounts([]byte("22 1 0:21 / /proc rw - proc proc rw\n30 1 8:1 / /mnt/a\\040b rw,relatime shared:1 - ext4 /dev/sda1 rw\nbad line\n"))
	assert.Equal(t, []mount{{"/proc", "proc"}, {"/mnt/a b", "ext4"}}, m)
}
