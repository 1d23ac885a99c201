//go:build windows

package proctree

import (
	"fmt"
	"os/exec"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

// groupSys on Windows is a Job Object that kills its processes when its
// last handle closes (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE), so that even a
// proxy that dies unexpectedly takes the server's tree with it. Children
// inherit the job. A child the server starts in the instant between
// CreateProcess and AssignProcessToJobObject escapes it: Go's os/exec
// cannot start a process suspended.
type groupSys struct {
	mu  sync.Mutex
	job windows.Handle
}

func prepare(cmd *exec.Cmd) {}

func (g *groupSys) attach(cmd *exec.Cmd) error {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return fmt.Errorf("create job object: %w", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{
		BasicLimitInformation: windows.JOBOBJECT_BASIC_LIMIT_INFORMATION{
			LimitFlags: windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
		},
	}
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return fmt.Errorf("set job limits: %w", err)
	}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(cmd.Process.Pid))
	if err != nil {
		windows.CloseHandle(job)
		return fmt.Errorf("open process: %w", err)
	}
	defer windows.CloseHandle(h)
	if err := windows.AssignProcessToJobObject(job, h); err != nil {
		windows.CloseHandle(job)
		return fmt.Errorf("assign process to job: %w", err)
	}
	g.job = job
	return nil
}

func (g *groupSys) kill(int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.job == 0 {
		return nil
	}
	return windows.TerminateJobObject(g.job, 1)
}

// terminate: Windows has no SIGTERM for console processes in another
// group; Stop goes from closing stdin straight to killing the job.
func (g *groupSys) terminate(int) error { return errNoTerminate }

func (g *groupSys) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.job != 0 {
		windows.CloseHandle(g.job)
		g.job = 0
	}
}
