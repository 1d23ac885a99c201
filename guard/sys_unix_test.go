//go:build unix

package guard_test

import (
	"os/exec"
	"syscall"
)

// detach makes cmd a daemon in a session of its own, outside the
// server's process group.
func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }
