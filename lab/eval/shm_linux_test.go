package eval

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSandboxSharedMemory: setup.shared_memory is a segment on the host
// holding the expanded text for the case's lifetime, removed by Close.
func TestSandboxSharedMemory(t *testing.T) {
	sb, err := NewSandbox(t.TempDir(), "shm")
	require.NoError(t, err)
	defer sb.Close()
	require.NoError(t, sb.Apply(Setup{SharedMemory: "cache: {{CANARY_SSH}}"}))
	require.True(t, sb.shmHeld)
	listed := func() bool {
		b, err := os.ReadFile("/proc/sysvipc/shm")
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 3 && f[1] == strconv.Itoa(sb.shm) {
				assert.Equal(t, "600", f[2], "mode")
				return true
			}
		}
		return false
	}
	assert.True(t, listed(), "the segment is on the host")
	require.NoError(t, sb.Close())
	assert.False(t, listed(), "removed by Close")
}
