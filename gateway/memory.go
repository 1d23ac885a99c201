package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
)

// memoryTTL is how long a measurement of the servers' memory is reused:
// reading /proc for every server of every session costs milliseconds.
const memoryTTL = time.Second

// memorySample is one server process of a session (or of the warm pool).
type memorySample struct {
	server string
	pid    int
}

// memory admits new sessions by the memory their servers will use: what
// the live sessions' servers use now (their cgroup's usage when they have
// a cgroup of their own, else the proportional set size of their process
// trees), plus, for the new session, what a session of each of its servers
// uses on average.
type memory struct {
	budget int64
	report func() (time.Time, []memorySample)

	mu       sync.Mutex
	at       time.Time
	used     int64
	mean     map[string]int64 // per server, per session
	reserved int64            // admitted since the measurement
}

// admit refuses a session of servers names that would pass the budget.
func (m *memory) admit(names []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.at) > memoryTTL {
		m.measure()
	}
	var want int64
	for _, n := range names {
		want += m.mean[n]
	}
	if m.used+m.reserved+want > m.budget {
		return fmt.Errorf("%w: the sessions' servers use %s, a new session of %s needs about %s, and max_memory is %s",
			errMemory, humanize.IBytes(uint64(m.used+m.reserved)), strings.Join(names, ", "),
			humanize.IBytes(uint64(want)), humanize.IBytes(uint64(m.budget)))
	}
	m.reserved += want
	return nil
}

// measure reads what every server uses now; called with mu held.
func (m *memory) measure() {
	at, samples := m.report()
	own := ownCgroups()
	seen := map[string]bool{}
	sum := map[string]int64{}
	count := map[string]int64{}
	var used int64
	for _, s := range samples {
		n := processMemory(s.pid, own, seen)
		used += n
		sum[s.server] += n
		count[s.server]++
	}
	m.mean = map[string]int64{}
	for k, v := range sum {
		m.mean[k] = v / count[k]
	}
	m.at, m.used, m.reserved = at, used, 0
}

// Used reports the memory the sessions' servers use now, measured.
func (g *Gateway) MemoryUsed() int64 {
	g.mem.mu.Lock()
	defer g.mem.mu.Unlock()
	g.mem.measure()
	return g.mem.used
}

// processMemory is the memory pid's server uses: its memory cgroup's usage
// when that is not the gateway's own (counted once when several servers
// share it), else the proportional set size of pid and its descendants.
func processMemory(pid int, own map[string]string, seen map[string]bool) int64 {
	if path, n, ok := cgroupMemory(pid, own); ok {
		if seen[path] {
			return 0
		}
		seen[path] = true
		return n
	}
	var total int64
	for _, p := range tree(pid) {
		total += pss(p)
	}
	return total
}

// tree lists pid and its descendants.
func tree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out) && i < 4096; i++ {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", out[i]))
		for _, t := range tasks {
			b, _ := os.ReadFile(t)
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// pss is the memory pid uses, in bytes: its proportional set size (what
// it has resident, shared pages divided among their sharers), from a walk
// of its page tables (smaps_rollup), since the resident-memory counters of
// a process that is exiting read as gigabytes here. A process that is gone
// uses none.
func pss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	_, rest, ok := bytes.Cut(b, []byte("\nPss:"))
	if !ok {
		return 0
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(line)), "kB")), 10, 64)
	if err != nil {
		return 0
	}
	return kb << 10
}

// cgroups reads /proc/<pid>/cgroup: the memory controller's path (v1) or
// the unified one (v2), by "memory" and "".
func cgroups(pid string) map[string]string {
	f, err := os.Open("/proc/" + pid + "/cgroup")
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[1] == "":
			out[""] = parts[2]
		case strings.Contains(","+parts[1]+",", ",memory,"):
			out["memory"] = parts[2]
		}
	}
	return out
}

func ownCgroups() map[string]string { return cgroups("self") }

// cgroupMemory is the usage of pid's memory cgroup, when pid has one of its
// own: not the root, not the gateway's, not one that holds the gateway
// (the root is also what an exiting process's cgroup reads as).
func cgroupMemory(pid int, own map[string]string) (string, int64, bool) {
	cg := cgroups(strconv.Itoa(pid))
	try := func(path, file string) (string, int64, bool) {
		b, err := os.ReadFile(filepath.Join(path, file))
		if err != nil {
			return "", 0, false
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		return path, n, err == nil
	}
	its := func(key string) (string, bool) {
		p, ok := cg[key]
		mine := own[key]
		return p, ok && p != "/" && p != mine && !strings.HasPrefix(mine+"/", p+"/")
	}
	if p, ok := its("memory"); ok {
		if path, n, ok := try(filepath.Join("/sys/fs/cgroup/memory", p), "memory.usage_in_bytes"); ok {
			return path, n, true
		}
	}
	if p, ok := its(""); ok {
		if path, n, ok := try(filepath.Join("/sys/fs/cgroup", p), "memory.current"); ok {
			return path, n, true
		}
	}
	return "", 0, false
}

// defaultMemoryBudget is half the machine's memory (8 GiB where it cannot
// be read).
func defaultMemoryBudget() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err == nil && kb > 0 {
					return kb << 10 / 2
				}
			}
		}
	}
	return 8 << 30
}
