package launch

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// launcherAvailable: the launcher's stages run here.
func launcherAvailable() error { return nil }

// addNamespaces makes cmd start in new mount, PID, IPC, UTS and network
// namespaces (stage 1 adds the cgroup namespace). IPC: System V queues,
// semaphores and shared memory of the host are out of sight, and the
// server's own die with it. Network: loopback only, plus the egress
// filter's listeners when the policy grants network (AttachEgress); only
// a package-fetching helper keeps the host's (Spec.SharedNetwork).
func addNamespaces(cmd *exec.Cmd, ownNetwork bool) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS
	if ownNetwork {
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWNET
	}
}
