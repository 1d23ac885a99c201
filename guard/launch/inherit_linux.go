package launch

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Hostname is the server's host name, in a UTS namespace of its own: the
// host's name is not the server's business, and a sethostname there
// changes nothing outside.
const Hostname = "mcpguard"

// inheritNothing marks every descriptor above standard error
// close-on-exec, so that the next execve drops them: a descriptor the
// client or the proxy's own parent leaked without O_CLOEXEC (a socket, a
// credentials file, a pipe to another process) reaches neither stage 2 nor
// the server. Marking rather than closing leaves the Go runtime's own
// descriptors working until the execve. close_range(2) with
// CLOSE_RANGE_CLOEXEC (Linux 5.11); older kernels get the flag set one
// descriptor at a time from /proc/self/fd.
func inheritNothing() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	ents, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("close descriptors: close_range: %v; list: %w", err, rerr)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && err != unix.EBADF {
			return fmt.Errorf("close descriptor %d on exec: %w", fd, err)
		}
	}
	return nil
}

// ownNamespaces finishes the namespaces stage 1 was started in: the UTS
// namespace gets its own host name, and a cgroup namespace is made here,
// on the thread that forks the server, after the proxy placed stage 1 in
// the session's cgroup: its root is that cgroup, so /proc/self/cgroup
// shows "/" and the host's hierarchy above it is not named. (A
// CLONE_NEWCGROUP in the proxy's clone would root it at the proxy's
// cgroup: the kernel takes the parent's.)
func ownNamespaces() error {
	if err := unix.Sethostname([]byte(Hostname)); err != nil {
		return fmt.Errorf("set host name: %w", err)
	}
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil && err != unix.EINVAL {
		// EINVAL: a kernel without cgroup namespaces.
		return fmt.Errorf("cgroup namespace: %w", err)
	}
	return nil
}
