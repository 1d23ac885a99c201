package mcptest

import "golang.org/x/sys/windows"

// Gone reports whether process pid has exited (or no such process exists):
// tests check with it that a server, and what it started, was stopped.
func Gone(pid int) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return err == windows.ERROR_INVALID_PARAMETER
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		return false
	}
	const stillActive = 259 // the exit code of a running process
	return code != stillActive
}
