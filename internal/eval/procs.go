package eval

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mcpguard/mcpguard/guard/launch"
)

// caseProcs lists the processes that belong to a case: those whose
// environment carries the case token (MCPGUARD_CASE=token, set on the
// server and inherited by every child, daemonised or not), or, when an
// environment allow-list stripped it, whose HOME is the case's HOME, whose
// command line names the case root, or whose working directory is inside it.
// Scanning /proc needs no privileges for the harness's own processes and
// works on cgroup v1 hosts, where a per-case cgroup is not available.
func caseProcs(sb *Sandbox) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	tokenVar := []byte("MCPGUARD_CASE=" + sb.Token)
	homeVar := []byte("HOME=" + sb.Home)
	rootB := []byte(sb.Root + "/")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		if env, err := os.ReadFile(dir + "/environ"); err == nil {
			match := false
			for _, kv := range bytes.Split(env, []byte{0}) {
				if bytes.Equal(kv, tokenVar) || bytes.Equal(kv, homeVar) {
					match = true
					break
				}
			}
			if match {
				pids = append(pids, pid)
				continue
			}
		}
		if cmdline, err := os.ReadFile(dir + "/cmdline"); err == nil && bytes.Contains(cmdline, rootB) {
			pids = append(pids, pid)
			continue
		}
		if cwd, err := os.Readlink(dir + "/cwd"); err == nil && (cwd == sb.Root || strings.HasPrefix(cwd, sb.Root+"/")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killCaseProcs kills every process of the case, retrying until none is
// left or the deadline passes, and returns how many it signalled.
func killCaseProcs(sb *Sandbox, within time.Duration) int {
	killed := map[int]bool{}
	deadline := time.Now().Add(within)
	for {
		pids := caseProcs(sb)
		if len(pids) == 0 {
			return len(killed)
		}
		for _, pid := range pids {
			if p, err := os.FindProcess(pid); err == nil {
				p.Kill()
				p.Release()
			}
			killed[pid] = true
		}
		if time.Now().After(deadline) {
			return len(killed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runnable reports whether any thread of pid is running or waiting for a
// CPU (state R). A server that is about to act on an event it has been
// woken for (a child's exit, say) is runnable before it does anything
// visible, so "quiet" must wait for it even when the host is loaded.
func runnable(pid int) bool {
	if pid <= 0 {
		return false
	}
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return false
	}
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", t.Name(), "stat"))
		if err != nil {
			continue
		}
		// The state follows the command name, which is in parentheses
		// and may itself contain ") ".
		i := bytes.LastIndexByte(b, ')')
		if i >= 0 && i+2 < len(b) && b[i+2] == 'R' {
			return true
		}
	}
	return false
}

// serverPids is the server's process as the proxy started it (pid), and,
// when that is mcpguard's launcher (guard/launch: pid 1 of the server's
// namespaces, which only waits), the launcher's first child, which became
// the server itself: last in the list. Orphans the launcher reaps are not
// its first child and stay "other" processes.
func serverPids(pid int) []int {
	if pid <= 0 {
		return []int{pid}
	}
	cmd, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return []int{pid}
	}
	args := bytes.Split(cmd, []byte{0})
	if len(args) < 2 || string(args[1]) != launch.StageArg {
		return []int{pid}
	}
	first, firstStart := 0, uint64(0)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, start, ok := statOf(child)
		if ok && ppid == pid && (first == 0 || start < firstStart) {
			first, firstStart = child, start
		}
	}
	if first == 0 {
		return []int{pid}
	}
	return []int{pid, first}
}

// statOf reads a process's parent pid and start time from /proc/PID/stat.
func statOf(pid int) (ppid int, start uint64, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	// After "pid (comm) ": state, ppid, ... starttime is field 22.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	return ppid, start, err1 == nil && err2 == nil
}
