package launch

import (
	"errors"
	"fmt"
)

// Limits bound what a server's process tree may use (cgroup limits, both
// L3 backends under a root proxy): tasks (processes and threads), memory
// (RSS and page cache, no swap) and CPU time. Breaching the task or
// memory limit ends the session with a clear error and an audit event
// (Limiter); the CPU limit throttles.
type Limits struct {
	// Tasks is pids.max: processes and threads together.
	Tasks int `json:"tasks,omitempty"`
	// MemoryMiB is memory.max in MiB.
	MemoryMiB int `json:"memory_mib,omitempty"`
	// CPUs is the CPU bandwidth, in CPUs (1.5: 150 ms per 100 ms).
	CPUs float64 `json:"cpus,omitempty"`
}

// The defaults, sized from the compatibility suite's real servers (peaks
// of their session cgroups, measured with scripts/limits-peaks.py; the
// numbers and the command are in docs/l3.md, "Limits"): the largest was
// git-mcp-server with its git children, 110 MiB and 22 tasks; npm's
// confined `npm exec` helper 49 MiB and 27 tasks; node servers 29-33 MiB
// and 17-22 tasks; Python 10-12 MiB. The defaults are about nine times
// the largest memory and nineteen times the most tasks, so that a real
// server with more data or more calls than the suite's short sessions
// does not meet them, and far below what takes a machine down (3000
// threads, all of its memory).
const (
	DefaultTasks     = 512
	DefaultMemoryMiB = 1024
	DefaultCPUs      = 2.0
)

// ErrLimits is wrapped for limits that cannot be applied.
var ErrLimits = errors.New("bad resource limits")

// WithDefaults fills what l leaves zero.
func (l Limits) WithDefaults() Limits {
	if l.Tasks == 0 {
		l.Tasks = DefaultTasks
	}
	if l.MemoryMiB == 0 {
		l.MemoryMiB = DefaultMemoryMiB
	}
	if l.CPUs == 0 {
		l.CPUs = DefaultCPUs
	}
	return l
}

// Check refuses limits no server could run under.
func (l Limits) Check() error {
	switch {
	case l.Tasks < 0 || l.Tasks > 0 && l.Tasks < 8:
		return fmt.Errorf("%w: tasks %d (at least 8: an interpreter starts threads)", ErrLimits, l.Tasks)
	case l.MemoryMiB < 0 || l.MemoryMiB > 0 && l.MemoryMiB < 32:
		return fmt.Errorf("%w: memory_mib %d (at least 32)", ErrLimits, l.MemoryMiB)
	case l.CPUs < 0 || l.CPUs > 0 && l.CPUs < 0.05:
		return fmt.Errorf("%w: cpus %g (at least 0.05)", ErrLimits, l.CPUs)
	}
	return nil
}

// Audit rules of a breached limit.
const (
	RuleLimitTasks  = "limit.tasks"
	RuleLimitMemory = "limit.memory"
)
