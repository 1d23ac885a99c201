//go:build unix

package model

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user plus system) the process has used: on
// a machine shared with other jobs it moves far less than wall time.
func cpuTime() time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
