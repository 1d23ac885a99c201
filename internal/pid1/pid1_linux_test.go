package pid1_test

import (
	"errors"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/internal/pid1"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

// Reap returns the status of the process it waits for as a shell says it
// (exit code, 128+signal) and reaps an orphan on the way: the server below can only exit once the orphan is reaped
// (kill -0 succeeds on a zombie), and afterwards no child is left.
func TestReapReapsOrphans(t *testing.T) {
	// Orphans go to the nearest subreaper: this test process plays pid 1.
	require.NoError(t, unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)

	out, err := exec.Command("sh", "-c", "sleep 0.1 >/dev/null 2>&1 & echo $!").Output()
	require.NoError(t, err)
	orphan := strings.TrimSpace(string(out))
	require.NotEmpty(t, orphan)

	server := exec.Command("sh", "-c", "while kill -0 "+orphan+" 2>/dev/null; do sleep 0.01; done; exit 5")
	require.NoError(t, server.Start())
	status, err := pid1.Reap(server.Process.Pid)
	require.NoError(t, err)
	assert.Equal(t, 5, status)

	_, err = unix.Wait4(-1, nil, unix.WNOHANG, nil)
	assert.ErrorIs(t, err, unix.ECHILD, "a child is left unreaped")

	server = exec.Command("sh", "-c", "kill -9 $$")
	require.NoError(t, server.Start())
	status, err = pid1.Reap(server.Process.Pid)
	require.NoError(t, err)
	assert.Equal(t, 137, status)
}

// LoopbackUp brings up lo in a fresh network namespace, where it starts
// down. The namespace is this goroutine's thread's alone; the thread is
// never unlocked, so it ends with the goroutine.
func TestLoopbackUp(t *testing.T) {
	type result struct {
		before, after uint16
		skip, err     error
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread()
		var r result
		defer func() { done <- r }()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) {
				r.skip = err
			} else {
				r.err = err
			}
			return
		}
		flags := func() uint16 {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				r.err = err
				return 0
			}
			defer unix.Close(fd)
			ifr, err := unix.NewIfreq("lo")
			if err == nil {
				err = unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr)
			}
			if err != nil {
				r.err = err
				return 0
			}
			return ifr.Uint16()
		}
		r.before = flags()
		if err := pid1.LoopbackUp(); err != nil {
			r.err = err
			return
		}
		r.after = flags()
	}()
	r := <-done
	if r.skip != nil {
		t.Skipf("cannot make a network namespace here (needs CAP_SYS_ADMIN): %v", r.skip)
	}
	require.NoError(t, r.err)
	assert.Zero(t, r.before&unix.IFF_UP, "lo was up already: the test shows nothing")
	assert.NotZero(t, r.after&unix.IFF_UP, "lo is still down")
}
