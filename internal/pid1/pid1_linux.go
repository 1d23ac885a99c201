package pid1

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Reap waits until pid has exited and returns its ExitStatus, reaping on
// the way every other child: the orphans that the kernel re-parents to pid
// 1 (or to a subreaper) would stay zombies otherwise. exec.Cmd.Wait cannot
// be used beside it: the two would race for the same child.
func Reap(pid int) (int, error) {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("wait: %w", err)
		}
		if got == pid && (ws.Exited() || ws.Signaled()) {
			return ExitStatus(syscall.WaitStatus(ws)), nil
		}
	}
}

// LoopbackUp brings up lo, which a new network namespace starts with down:
// a process may then still talk to itself (a local worker, the test
// corpus's listeners on 127.0.0.1), and with no other interface, never out.
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}
