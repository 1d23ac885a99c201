package launch

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Limiter is a session's cgroup for its Limits: a cgroup v2 directory
// where the unified hierarchy has the pids, memory and cpu controllers
// (the VM, current distributions), else one directory in each of the
// cgroup v1 hierarchies of those controllers (hybrid hosts such as the
// build machines). It watches for a breach, ends the session on one, and
// says why (Breach).
type Limiter struct {
	dirs   []string // one v2 directory, or one per v1 hierarchy
	v2     bool
	own    bool // made here: removed by Close
	fd     int  // the v2 directory, for CLONE_INTO_CGROUP (-1 for v1)
	limits Limits

	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	rule string
	why  string
}

// limiterParent is the directory below a hierarchy's root where the
// session cgroups of the Landlock backend go (the BPF backend keeps its
// own under "mcpguard").
const limiterParent = "mcpguard-limits"

// NewLimiter makes a session cgroup with l applied.
func NewLimiter(l Limits) (*Limiter, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	var b [6]byte
	rand.Read(b[:])
	name := "l-" + hex.EncodeToString(b[:])
	if v2 := mounts["2"]; v2 != "" && hasControllers(v2) {
		parent := filepath.Join(v2, limiterParent)
		if err := enableControllers(v2, parent); err != nil {
			return nil, err
		}
		reapLimiters(parent)
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("limits: %w", err)
		}
		return newLimiter([]string{dir}, true, true, l)
	}
	var dirs []string
	for _, c := range []string{"pids", "memory", "cpu"} {
		root := mounts[c]
		if root == "" {
			for _, d := range dirs {
				os.Remove(d)
			}
			return nil, fmt.Errorf("limits: no cgroup v2 hierarchy with the pids, memory and cpu controllers, and no v1 %s hierarchy", c)
		}
		parent := filepath.Join(root, limiterParent)
		os.MkdirAll(parent, 0o755)
		reapLimiters(parent)
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return nil, fmt.Errorf("limits: %w", err)
		}
		dirs = append(dirs, dir)
	}
	return newLimiter(dirs, false, true, l)
}

// LimitCgroup applies l to an existing cgroup v2 directory (the BPF
// backend's session cgroup), enabling the controllers in its parents.
func LimitCgroup(dir string, l Limits) (*Limiter, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	v2 := mounts["2"]
	if v2 == "" || !hasControllers(v2) {
		return nil, fmt.Errorf("limits: the cgroup v2 hierarchy lacks the pids, memory or cpu controller")
	}
	if err := enableControllers(v2, filepath.Dir(dir)); err != nil {
		return nil, err
	}
	return newLimiter([]string{dir}, true, false, l)
}

func newLimiter(dirs []string, v2, own bool, l Limits) (*Limiter, error) {
	c := &Limiter{dirs: dirs, v2: v2, own: own, fd: -1, limits: l.WithDefaults()}
	if err := c.apply(); err != nil {
		c.Close()
		return nil, err
	}
	if v2 {
		fd, err := unix.Open(dirs[0], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("limits: %w", err)
		}
		c.fd = fd
	}
	return c, nil
}

// apply writes the limits: pids.max; memory.max (v1: limit_in_bytes) and
// no swap; cpu.max (v1: the CFS quota over a 100 ms period).
func (c *Limiter) apply() error {
	l := c.limits
	mem := strconv.FormatInt(int64(l.MemoryMiB)<<20, 10)
	quota := strconv.Itoa(int(l.CPUs * 100000))
	var writes [][2]string
	if c.v2 {
		d := c.dirs[0]
		writes = [][2]string{{d + "/pids.max", strconv.Itoa(l.Tasks)}, {d + "/memory.max", mem},
			{d + "/memory.swap.max", "0"}, {d + "/cpu.max", quota + " 100000"}}
	} else {
		pids, memd, cpu := c.dirs[0], c.dirs[1], c.dirs[2]
		writes = [][2]string{{pids + "/pids.max", strconv.Itoa(l.Tasks)}, {memd + "/memory.limit_in_bytes", mem},
			{memd + "/memory.memsw.limit_in_bytes", mem}, {cpu + "/cpu.cfs_period_us", "100000"}, {cpu + "/cpu.cfs_quota_us", quota}}
	}
	for _, w := range writes {
		if err := os.WriteFile(w[0], []byte(w[1]), 0); err != nil {
			if os.IsNotExist(err) && (strings.HasSuffix(w[0], "swap.max") || strings.HasSuffix(w[0], "memsw.limit_in_bytes")) {
				continue // no swap accounting: nothing to limit
			}
			return fmt.Errorf("limits: %s: %w", w[0], err)
		}
	}
	return nil
}

// Attach makes cmd start in the cgroup: clone3 into the v2 directory, or
// for v1 stage 1 joins each hierarchy's directory first thing (spec).
func (c *Limiter) Attach(cmd *exec.Cmd, spec *Spec) {
	if c.v2 {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = c.fd
		return
	}
	for _, d := range c.dirs {
		spec.JoinCgroups = append(spec.JoinCgroups, filepath.Join(d, "cgroup.procs"))
	}
}

// Watch checks every 100 ms whether a task or memory limit was hit; on
// the first breach it kills every process of the cgroup and calls
// onBreach with the audit rule and the reason.
func (c *Limiter) Watch(onBreach func(rule, reason string)) {
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	ev := c.openEvents()
	go func() {
		defer close(c.done)
		defer ev.close()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
			if rule, why := c.breached(ev); rule != "" {
				c.mu.Lock()
				c.rule, c.why = rule, why
				c.mu.Unlock()
				c.kill()
				onBreach(rule, why)
				return
			}
		}
	}()
}

// events are the controllers' event counter files, opened once for the
// whole watch and read again from offset 0 at each tick: opening a
// cgroup file walks the path and sets up a kernfs open file, which a
// session paid ten times a second (the largest part of the guard's own
// CPU in the BPF configs' eval under emulation). -1: not there.
type events struct {
	pids, mem int
	buf       []byte
}

func (c *Limiter) openEvents() *events {
	mem, memFile := c.dirs[0], "memory.events"
	if !c.v2 {
		mem, memFile = c.dirs[1], "memory.oom_control"
	}
	open := func(path string) int {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1
		}
		return fd
	}
	return &events{pids: open(filepath.Join(c.dirs[0], "pids.events")), mem: open(filepath.Join(mem, memFile)), buf: make([]byte, 4096)}
}

func (e *events) close() {
	for _, fd := range []int{e.pids, e.mem} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// breached reads the controllers' event counters.
func (c *Limiter) breached(ev *events) (rule, why string) {
	if n := ev.counter(ev.pids, "max"); n > 0 {
		return RuleLimitTasks, fmt.Sprintf("the server reached its limit of %d tasks (processes and threads; policy limits.tasks): session ended", c.limits.Tasks)
	}
	if n := ev.counter(ev.mem, "oom_kill"); n > 0 {
		return RuleLimitMemory, fmt.Sprintf("the server exceeded its memory limit of %d MiB (policy limits.memory_mib) and was killed: session ended", c.limits.MemoryMiB)
	}
	return "", ""
}

// Breach is the reason the session was ended, "" if it was not.
func (c *Limiter) Breach() string {
	if c == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.why
}

// Peak is the most memory the cgroup used, in bytes (0 if unknown).
func (c *Limiter) Peak() int64 {
	f := filepath.Join(c.dirs[0], "memory.peak")
	if !c.v2 {
		f = filepath.Join(c.dirs[1], "memory.max_usage_in_bytes")
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// kill kills every process of the cgroup.
func (c *Limiter) kill() {
	if c.v2 && os.WriteFile(filepath.Join(c.dirs[0], "cgroup.kill"), []byte("1"), 0) == nil {
		return
	}
	for _, d := range c.dirs {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// Close stops watching and, for a cgroup made here, kills what is left
// and removes it.
func (c *Limiter) Close() error {
	if c == nil {
		return nil
	}
	if c.stop != nil {
		close(c.stop)
		<-c.done
		c.stop = nil
	}
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	if !c.own {
		return nil
	}
	var err error
	deadline := time.Now().Add(2 * time.Second)
	for _, d := range c.dirs {
		for {
			if err = os.Remove(d); err == nil || os.IsNotExist(err) || time.Now().After(deadline) {
				break
			}
			c.kill()
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("limits: remove cgroup: %w", err)
	}
	return nil
}

// counter reads "KEY N" from the flat keyed cgroup file open as fd, from
// its start.
func (e *events) counter(fd int, key string) int64 {
	if fd < 0 {
		return 0
	}
	n, err := unix.Pread(fd, e.buf, 0)
	if err != nil || n <= 0 {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(e.buf[:n]))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// cgroupMounts maps "2" to the cgroup v2 mount and each v1 controller to
// its hierarchy's mount.
func cgroupMounts() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		switch g[0] {
		case "cgroup2":
			if out["2"] == "" {
				out["2"] = unescapeMount(f[4])
			}
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if out[o] == "" {
					out[o] = unescapeMount(f[4])
				}
			}
		}
	}
	return out, nil
}

// hasControllers reports whether the v2 hierarchy at root offers pids,
// memory and cpu.
func hasControllers(root string) bool {
	b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		return false
	}
	have := strings.Fields(string(b))
	for _, c := range []string{"pids", "memory", "cpu"} {
		if !slices.Contains(have, c) {
			return false
		}
	}
	return true
}

// enableControllers enables pids, memory and cpu from root down to dir
// (each directory's subtree_control), making dir if needed.
func enableControllers(root, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	d := root
	for _, part := range append([]string{"."}, strings.Split(rel, "/")...) {
		d = filepath.Join(d, part)
		if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+pids +memory +cpu"), 0); err != nil {
			return fmt.Errorf("limits: enable controllers in %s: %w", d, err)
		}
	}
	return nil
}

// reapLimiters removes the empty session cgroups a dead proxy left.
func reapLimiters(parent string) {
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "l-") {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
			os.Remove(filepath.Join(parent, e.Name())) // fails while in use
		}
	}
}
