//go:build unix

package mcptest

import "syscall"

// Gone reports whether no process pid exists any more: tests check with it
// that a server, and what it started, was stopped. A zombie still exists.
func Gone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }
