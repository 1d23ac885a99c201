//go:build unix

package gateway_test

import "syscall"

// processGone reports whether no process pid exists any more.
func processGone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }
