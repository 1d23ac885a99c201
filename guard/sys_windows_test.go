package guard_test

import (
	"os/exec"
	"syscall"
)

// detach starts cmd in a process group of its own (Windows has no
// sessions in the Unix sense; whether it outlives a Job Object is not
// tested here).
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}
