//go:build unix

package proctree_test

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/internal/proctree"
)

// start runs a shell that starts a grandchild in the background, prints
// its pid and then runs body; it returns the group and the grandchild.
func start(t *testing.T, body string) (*proctree.Group, int) {
	g, child, _ := startIn(t, body)
	return g, child
}

func startIn(t *testing.T, body string) (*proctree.Group, int, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 300 >/dev/null & echo $!; "+body)
	proctree.Prepare(cmd)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	// An os.Pipe, not StdoutPipe: Wait (which Start's group runs when the
	// shell exits) closes a StdoutPipe, so a shell that exits at once
	// would close it before the pid line is read.
	out, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { out.Close() })
	cmd.Stdout = w
	g, err := proctree.Start(cmd)
	w.Close()
	require.NoError(t, err)
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	return g, child, in
}

// A command that ends when its stdin closes is not signalled at all, and
// its background child goes with the group.
func TestStopHangUp(t *testing.T) {
	g, child, in := startIn(t, "read x; exit 0")
	require.NoError(t, g.Stop(5*time.Second, func() { in.Close() }))
	gone(t, child)
}

func gone(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) || zombie(pid)
	}, 5*time.Second, 10*time.Millisecond, "process %d still runs", pid)
}

// zombie: a killed grandchild is reaped by init, which may take a moment.
func zombie(pid int) bool {
	b, err := exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(pid)).Output()
	return err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), "Z")
}

func TestStopTerm(t *testing.T) {
	g, child := start(t, "while :; do sleep 0.05; done")
	t0 := time.Now()
	err := g.Stop(100*time.Millisecond, nil)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, syscall.SIGTERM, ee.Sys().(syscall.WaitStatus).Signal())
	assert.Less(t, time.Since(t0), 5*time.Second)
	gone(t, g.Pid())
	gone(t, child)
}

func TestStopStubborn(t *testing.T) {
	g, child := start(t, "trap '' TERM; while :; do sleep 0.05; done")
	t0 := time.Now()
	err := g.Stop(100*time.Millisecond, nil)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal())
	assert.GreaterOrEqual(t, time.Since(t0), 200*time.Millisecond, "two grace periods")
	gone(t, child)
}

func TestExitOnItsOwnLeavesNoChild(t *testing.T) {
	g, child := start(t, "exit 3")
	<-g.Done()
	var ee *exec.ExitError
	require.ErrorAs(t, g.Err(), &ee)
	assert.Equal(t, 3, ee.ExitCode())
	g.Close()
	gone(t, child)
}
