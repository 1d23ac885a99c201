//go:build !linux

package launch_test

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/launch"
)

// Off Linux the launcher cannot confine a server, so Prepare refuses
// rather than start it unconfined.
func TestPrepareFailsClosed(t *testing.T) {
	// Built by hand: exec.Command would look the name up and may set Err.
	cmd := &exec.Cmd{Path: "server", Args: []string{"server"}}
	_, err := launch.Prepare(cmd, launch.Spec{Namespaces: true}, launch.Options{Self: "mcpguard"})
	assert.ErrorIs(t, err, guard.ErrKernelRefused)
	assert.Equal(t, "server", cmd.Path, "cmd is left as it was")
}
