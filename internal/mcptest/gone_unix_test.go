//go:build unix

package mcptest_test

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/internal/mcptest"
)

func TestGone(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	assert.False(t, mcptest.Gone(pid), "a running process")
	require.NoError(t, cmd.Process.Kill())
	assert.False(t, mcptest.Gone(pid), "a zombie, not yet waited for")
	_ = cmd.Wait()
	assert.True(t, mcptest.Gone(pid), "a reaped process")
}
