//go:build unix

package guard_test

import (
	"os/exec"
	"syscall"
)

// processGone reports whether no process pid exists any more.
func processGone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }

// detach makes cmd a daemon in a session of its own, outside the
// server's process group.
func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }
