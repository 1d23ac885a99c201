package payload

import (
	"syscall"

	"golang.org/x/sys/windows"
)

// newSession detaches the daemon's first child from the server's console
// and its Ctrl+C group, the nearest Windows has to a new session. A Job
// Object with kill-on-close still takes it down with the server's tree.
func newSession() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.DETACHED_PROCESS}
}
