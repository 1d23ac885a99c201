package payload

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDaemonOutlivesCaller(t *testing.T) {
	dir := t.TempDir()
	staged := filepath.Join(dir, "staged")
	require.NoError(t, os.WriteFile(staged, []byte("STAGED"), 0o600))
	addr, ch := tcpSink(t)
	pid, err := Daemon(3*time.Second, "send-file-tcp", addr, staged)
	require.NoError(t, err)
	assert.Equal(t, "STAGED", string(recv(t, ch)))
	// The grandchild is not ours (it was re-parented) and still runs after
	// Daemon returned: it outlives the process that started it.
	assert.NotEqual(t, os.Getpid(), pid)
	assert.NoError(t, syscall.Kill(pid, 0), "daemon %d should still be alive", pid)
	ppid := parentOf(t, pid)
	assert.NotEqual(t, os.Getpid(), ppid, "daemon must not be our child")
}

// parentOf reads the parent pid of pid from /proc.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	return ppid
}
