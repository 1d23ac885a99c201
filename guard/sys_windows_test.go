package guard_test

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/windows"
)

// processGone reports whether process pid has exited (or no such process
// exists): STILL_ACTIVE is the exit code of a running process.
func processGone(pid int) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return err == windows.ERROR_INVALID_PARAMETER
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		return false
	}
	return code != 259 // STILL_ACTIVE
}

// detach starts cmd in a process group of its own (Windows has no
// sessions in the Unix sense; whether it outlives a Job Object is not
// tested here).
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}
