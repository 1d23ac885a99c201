package eval

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpguard/mcpguard/guard/launch"
)

// procTable is one view of /proc shared by the cases that run at once.
// The processes of a case (of) are those whose environment carries the
// case token (MCPGUARD_CASE=token, set on the server and inherited by
// every child, daemonised or not), or, when an environment allow-list
// stripped it, whose HOME is the case's HOME, whose command line names
// the case root, or whose working directory is inside it. Scanning /proc
// needs no privileges for the harness's own processes and works on
// cgroup v1 hosts, where a per-case cgroup is not available.
//
// Each case asks, every few milliseconds while it waits for quiet and
// after its session, which processes are its own; a scan reads every
// process's environment, command line and working directory, and under
// emulation one scan costs tens of milliseconds of CPU. Asked by six cases
// at once, one scan now answers all of them: a case waits for a scan that
// started after it asked (never an older one), so what it sees is as
// fresh as a scan of its own.
type procTable struct {
	mu       sync.Mutex
	cond     *sync.Cond
	scanning bool
	started  uint64 // scans started
	finished uint64 // the number of the last scan finished
	procs    []procInfo
	self     int
	waiting  int // callers waiting for a scan another one runs
	// scan reads /proc (scanProcs; a test's stand-in).
	scan func() []procInfo
	// kernel are the kernel threads seen, skipped while they live.
	kernel *kernelThreads
}

// procInfo is what the case test reads of a process.
type procInfo struct {
	pid           int
	tokens, homes []string // the values of MCPGUARD_CASE and HOME in its environment
	cmdline       []byte
	cwd           string
}

func newProcTable() *procTable {
	p := &procTable{self: os.Getpid(), kernel: newKernelThreads()}
	p.scan = p.scanProcs
	p.cond = sync.NewCond(&p.mu)
	return p
}

// of lists the processes of the case, from a scan started after the call.
func (p *procTable) of(sb *Sandbox) []int {
	rootB := []byte(sb.Root + "/")
	var pids []int
	for _, pi := range p.snapshot() {
		if slices.Contains(pi.tokens, sb.Token) || slices.Contains(pi.homes, sb.Home) ||
			bytes.Contains(pi.cmdline, rootB) || pi.cwd != "" && (pi.cwd == sb.Root || strings.HasPrefix(pi.cwd, sb.Root+"/")) {
			pids = append(pids, pi.pid)
		}
	}
	return pids
}

// snapshot returns the processes as read by a scan that started after
// the call: the one this caller runs, or one another caller started later.
func (p *procTable) snapshot() []procInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	need := p.started + 1
	for p.finished < need {
		if p.scanning {
			p.waiting++
			p.cond.Wait()
			p.waiting--
			continue
		}
		p.scanning = true
		p.started++
		n := p.started
		p.mu.Unlock()
		procs := p.scan()
		p.mu.Lock()
		p.procs, p.finished, p.scanning = procs, n, false
		p.cond.Broadcast()
	}
	return p.procs
}

// kill kills every process of the case, retrying until none is left or
// the deadline passes, and returns how many it signalled.
func (p *procTable) kill(sb *Sandbox, within time.Duration) int {
	killed := map[int]bool{}
	deadline := time.Now().Add(within)
	for {
		pids := p.of(sb)
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

// close releases what the table holds (the kernel threads' handles).
func (p *procTable) close() { p.kernel.close() }

// scanProcs reads every process but the harness: its environment's case
// token and HOME, its command line and its working directory. A kernel
// thread (most of a VM's processes) is read once: it never runs a case's
// code, and it is skipped for as long as it lives.
func (p *procTable) scanProcs() []procInfo {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	buf := make([]byte, 64<<10)
	out := make([]procInfo, 0, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == p.self || p.kernel.known(pid) {
			continue
		}
		dir := "/proc/" + e.Name()
		pi := procInfo{pid: pid}
		var env []byte
		if env, buf = readProc(dir+"/environ", buf); env != nil {
			pi.tokens = envValues(env, "MCPGUARD_CASE=")
			pi.homes = envValues(env, "HOME=")
		}
		var cmdline []byte
		if cmdline, buf = readProc(dir+"/cmdline", buf); len(cmdline) > 0 {
			pi.cmdline = bytes.Clone(cmdline)
		}
		// A kernel thread has neither environment nor command line (nor
		// has a zombie: the flags tell).
		if len(env) == 0 && len(cmdline) == 0 {
			var kernel bool
			if kernel, buf = p.kernel.check(pid, dir, buf); kernel {
				continue
			}
		}
		if cwd, err := os.Readlink(dir + "/cwd"); err == nil {
			pi.cwd = cwd
		}
		out = append(out, pi)
	}
	return out
}

// envValues lists the values of every KEY=value entry (key given with
// its "=") in a NUL-separated environment block: a key may be there more
// than once, and any entry names the case.
func envValues(env []byte, key string) []string {
	var out []string
	for len(env) > 0 {
		kv := env
		if i := bytes.IndexByte(env, 0); i >= 0 {
			kv, env = env[:i], env[i+1:]
		} else {
			env = nil
		}
		if v, ok := bytes.CutPrefix(kv, []byte(key)); ok {
			out = append(out, string(v))
		}
	}
	return out
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
