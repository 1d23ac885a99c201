//go:build linux

package sandbox

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoCgroup2 is returned when no cgroup v2 hierarchy is mounted.
var ErrNoCgroup2 = errors.New("no cgroup2 mount")

// cgroup2Mount finds where the cgroup v2 hierarchy is mounted, from
// /proc/self/mountinfo (it is /sys/fs/cgroup on unified systems and
// /sys/fs/cgroup/unified on hybrid ones).
func cgroup2Mount() (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("find cgroup2: %w", err)
	}
	return parseCgroup2Mount(b)
}

func parseCgroup2Mount(mountinfo []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) >= 5 && len(g) >= 1 && g[0] == "cgroup2" {
			return f[4], nil
		}
	}
	return "", ErrNoCgroup2
}

// cgroup is a session's own cgroup v2 directory.
type cgroup struct {
	dir string
	id  uint64
	fd  int // open directory, for clone3(CLONE_INTO_CGROUP)
}

// newCgroup creates parent/<random> and opens it.
func newCgroup(parent string) (*cgroup, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var b [6]byte
	rand.Read(b[:])
	dir := filepath.Join(parent, "s-"+hex.EncodeToString(b[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		os.Remove(dir)
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	// A cgroup v2 id is its kernfs inode number, which is what
	// bpf_get_current_cgroup_id returns.
	return &cgroup{dir: dir, id: st.Ino, fd: fd}, nil
}

// pids lists the processes in the cgroup.
func (c *cgroup) pids() []int {
	b, _ := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// kill kills every process in the cgroup (cgroup.kill where the kernel has
// it, SIGKILL to each member otherwise).
func (c *cgroup) kill() {
	if err := os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0); err == nil {
		return
	}
	for _, pid := range c.pids() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// remove waits (up to wait) for the cgroup to empty and removes it.
func (c *cgroup) remove(wait time.Duration) error {
	unix.Close(c.fd)
	deadline := time.Now().Add(wait)
	for {
		err := os.Remove(c.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup: %w", err)
		}
		c.kill()
		time.Sleep(10 * time.Millisecond)
	}
}
