//go:build unix

package payload

import "syscall"

// newSession starts the daemon's first child in a session of its own, so
// that it leaves the server's process group and terminal.
func newSession() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
