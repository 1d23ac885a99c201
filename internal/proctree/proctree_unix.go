//go:build unix

package proctree

import (
	"errors"
	"os/exec"
	"syscall"
)

// groupSys on unix is the process group whose id is the leader's pid.
type groupSys struct{}

// prepare makes cmd the leader of a session of its own, and so of a
// process group whose id is its pid: a session without a controlling
// terminal, so that no process of the tree can reach the terminal the
// guard was started from (/dev/tty fails; TIOCSTI, which types into a
// terminal, needs it to be the caller's controlling one: red team, a
// server under policy init typed commands into the operator's root shell).
func prepare(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Not Setpgid as well: setpgid fails for a session leader.
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setpgid = false
}

func (groupSys) attach(*exec.Cmd) error { return nil }

func (groupSys) kill(pid int) error { return signalGroup(pid, syscall.SIGKILL) }

func (groupSys) terminate(pid int) error { return signalGroup(pid, syscall.SIGTERM) }

func (groupSys) close() {}

func signalGroup(pid int, sig syscall.Signal) error {
	// The negative pid addresses the whole process group.
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	if err != nil {
		// Not a group leader after all (a Prepare hook undid Setsid):
		// at least the process itself.
		if err2 := syscall.Kill(pid, sig); err2 != nil && !errors.Is(err2, syscall.ESRCH) {
			return err
		}
	}
	return nil
}
