//go:build unix

package proctree

import (
	"errors"
	"os/exec"
	"syscall"
)

// groupSys on unix is the process group whose id is the leader's pid.
type groupSys struct{}

func prepare(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
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
		// Not a group leader after all (a Prepare hook undid Setpgid):
		// at least the process itself.
		if err2 := syscall.Kill(pid, sig); err2 != nil && !errors.Is(err2, syscall.ESRCH) {
			return err
		}
	}
	return nil
}
