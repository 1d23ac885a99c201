//go:build linux

package runtime

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The observer sees what the followed process group opens and runs, and
// nothing of other processes.
func TestObserve(t *testing.T) {
	o := observe(t)
	dir := t.TempDir()
	mine := filepath.Join(dir, "mine.txt")
	other := filepath.Join(dir, "other.txt")
	require.NoError(t, os.WriteFile(mine, []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(other, []byte("x"), 0o644))

	// Children that exit before their events are read may be missed
	// (Observer's limits): cat waits on its stdin until Sync has read
	// what the group opened.
	cmd := exec.Command("/bin/sh", "-c", "read x < "+mine+"; exec /bin/cat")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	o.Follow(cmd.Process.Pid)
	b, err := os.ReadFile(other) // this test's own open: another group
	require.NoError(t, err)
	require.Equal(t, "x", string(b))
	waitForExe(t, cmd.Process.Pid, "/bin/cat")
	require.True(t, o.Sync(10*time.Second), "the barrier's open is read")
	stdin.Close()
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
	cat, _ := filepath.EvalSymlinks("/bin/cat")
	assert.True(t, execs[cat], "the exec of cat is seen as an exec: %v", paths)
	assert.False(t, execs[mine], "a read is not an exec")
}

// observe starts an observer, or skips where fanotify is unavailable.
func observe(t *testing.T) *Observer {
	t.Helper()
	o, err := Observe()
	if errors.Is(err, ErrNoObserver) {
		t.Skipf("fanotify not available here: %v", err)
	}
	require.NoError(t, err)
	return o
}

// waitForExe waits until pid runs exe (the shell has exec'd it).
func waitForExe(t *testing.T, pid int, exe string) {
	t.Helper()
	want, err := filepath.EvalSymlinks(exe)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return err == nil && got == want
	}, 10*time.Second, 5*time.Millisecond)
}

// Under load the loop falls behind; Sync still returns only once the
// server's opens are read, so a server that exits right after (learn
// mode's case) loses none of them. The load here is a flood of opens
// from another process group, queued before the server's own.
func TestObserveSyncUnderLoad(t *testing.T) {
	o := observe(t)
	dir := t.TempDir()
	// fanotify merges an event into the one before it when both are of
	// one file and one process: the noise is many files.
	var noise []string
	for i := range 500 {
		p := filepath.Join(dir, fmt.Sprintf("noise%03d.txt", i))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
		noise = append(noise, p)
	}
	const files = 20
	var mine []string
	for i := range files {
		p := filepath.Join(dir, fmt.Sprintf("mine%02d.txt", i))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
		mine = append(mine, p)
	}
	cmd := exec.Command("/bin/sh", "-c", `read go; for f in "$@"; do read x < "$f"; done; echo done; exec /bin/cat`, "sh")
	cmd.Args = append(cmd.Args, mine...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	o.Follow(cmd.Process.Pid)
	// Each open queues an event the loop must read and judge, which
	// takes it several times as long as the open.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 25000 {
				if f, err := os.Open(noise[i%len(noise)]); err == nil {
					f.Close()
				}
			}
		})
	}
	wg.Wait()
	_, err = stdin.Write([]byte("go\n"))
	require.NoError(t, err)
	line := make([]byte, 5)
	_, err = io.ReadFull(stdout, line)
	require.NoError(t, err)
	require.True(t, o.Sync(30*time.Second), "the barrier's open is read")
	stdin.Close()
	require.NoError(t, cmd.Wait())
	seen := o.Stop()
	var paths []string
	for _, a := range seen {
		paths = append(paths, a.Path)
	}
	for _, p := range mine {
		assert.Contains(t, paths, p)
	}
	assert.NotContains(t, paths, noise[0])
}

func TestParseMounts(t *testing.T) {
	m := parseMounts([]byte("22 1 0:21 / /proc rw - proc proc rw\n30 1 8:1 / /mnt/a\\040b rw,relatime shared:1 - ext4 /dev/sda1 rw\nbad line\n"))
	assert.Equal(t, []mount{{"/proc", "proc"}, {"/mnt/a b", "ext4"}}, m)
}
