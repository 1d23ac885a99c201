//go:build linux

package sandbox

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/bpf"
)

// A live session holds a shared flock on its cgroup directory for as long
// as its proxy runs (lockSession); the kernel drops it when the proxy dies,
// however it dies. Reap takes the lock exclusively, without waiting: it
// gets it only for sessions whose proxy is gone, and only those it reaps,
// so a session being set up by another mcpguard is never touched.

// reapGrace is, by default, how old an unlocked session cgroup must be to be reaped.
const reapGrace = 10 * time.Second

// lockSession marks the session's cgroup as owned by this live process.
func lockSession(c *cgroup) error {
	return unix.Flock(c.fd, unix.LOCK_SH)
}

// Reap cleans up after proxies that died without closing their sessions:
// for each session cgroup under parent whose lock is free, it kills what
// is left in it (a server without its proxy has no client), deletes the
// session's map entries and removes the cgroup. It returns how many it
// reaped. The cgroup map holds 64 sessions: without this a few killed
// proxies would exhaust it.
func Reap(objs *bpf.Objects, parent string, grace time.Duration) (int, error) {
	if grace <= 0 {
		grace = reapGrace
	}
	ents, err := os.ReadDir(parent)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "s-") {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
			unix.Close(fd) // a live proxy holds it
			continue
		}
		var st unix.Stat_t
		// A cgroup made in the last seconds may be one whose creator has
		// not taken its lock yet (newCgroup, then lockSession).
		if unix.Fstat(fd, &st) != nil || time.Since(time.Unix(st.Ctim.Unix())) < grace {
			unix.Close(fd)
			continue
		}
		c := &cgroup{dir: dir, id: st.Ino, fd: fd}
		forgetSession(objs, c.id)
		c.kill()
		if c.remove(2*time.Second) == nil {
			n++
		}
	}
	return n, nil
}

// forgetSession deletes every map entry of policy id.
func forgetSession(objs *bpf.Objects, id uint64) {
	objs.Cgroups.Delete(id)
	objs.Events.Delete(id)
	objs.SessionNetns.Delete(id)
	var (
		tgid uint32
		pol  uint64
		dead []uint32
	)
	it := objs.Tasks.Iterate()
	for it.Next(&tgid, &pol) {
		if pol == id {
			dead = append(dead, tgid)
		}
	}
	for _, t := range dead {
		objs.Tasks.Delete(t)
	}
	var (
		k    bpf.InodeKey
		v    uint32
		keys []bpf.InodeKey
	)
	for _, m := range []*ebpf.Map{objs.FSRules, objs.ExecRules} {
		keys = keys[:0]
		it := m.Iterate()
		for it.Next(&k, &v) {
			if k.Policy == id {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			m.Delete(k)
		}
	}
	var (
		nk    bpf.NetKey
		nkeys []bpf.NetKey
	)
	nit := objs.NetRules.Iterate()
	for nit.Next(&nk, &v) {
		if binary.LittleEndian.Uint64(nk.Policy[:]) == id {
			nkeys = append(nkeys, nk)
		}
	}
	for _, k := range nkeys {
		objs.NetRules.Delete(k)
	}
}
