package launch

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// launcherAvailable: the launcher's stages run here.
func launcherAvailable() error { return nil }

// addNamespaces makes cmd start in new mount and PID namespaces (and a
// network namespace when the server gets no network).
func addNamespaces(cmd *exec.Cmd, noNetwork bool) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWNS | unix.CLONE_NEWPID
	if noNetwork {
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWNET
	}
}
