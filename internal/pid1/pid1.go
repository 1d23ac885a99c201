// Package pid1 holds what a process that is pid 1 of its namespaces must
// do for itself, shared by the two such processes mcpguard has: the VM's
// init (lab/vm/vminit, a static binary) and the launcher's stage 1
// (guard/launch). It needs no cgo.
package pid1

import "syscall"

// ExitStatus turns a finished process's wait status into the number a
// shell would report: the exit code, or 128+N for death by signal N.
func ExitStatus(ws syscall.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	default:
		return 255
	}
}
