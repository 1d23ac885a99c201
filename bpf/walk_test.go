//go:build linux

package bpf_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/bpf"
	"github.com/mcpguard/mcpguard/bpf/member"
)

// TestAttachWalk pins down file_guard's ancestor walk where it is split
// (levels below the fast part's FAST_DEPTH, the bpf_loop rest, mount
// crossings in either) and its limits: a rule MAX_DEPTH-1 levels up admits,
// one level more does not; the file's own rule admits a multiply-linked
// file, an ancestor's does not unless it is links-ok. Membership is checked
// both ways the programs know: by tgid (tasks) and by cgroup (cgroups).
// The test process guards itself for the opens and leaves the session by
// removing its map entry (no open needed) before anything else.
func TestAttachWalk(t *testing.T) {
	o, root := attach(t, "mcpguard-test-walk")
	t.Cleanup(func() { require.NoError(t, o.Close()) }) // before attach's Detach
	w := newWalkWorld(t, o)
	opens := append(w.depthOpens(), w.mountOpens()...)
	opens = append(opens, w.plainOpens()...)
	opens = append(opens, w.linkOpens()...)

	t.Run("tasks", func(t *testing.T) {
		// A guarded task gets no bpf(): an unguarded helper process edits
		// the tasks map for it, started before this process joins.
		m, err := member.Start(filepath.Join(root, bpf.Version(), "tasks"), walkPolicy, os.Getpid())
		require.NoError(t, err)
		t.Cleanup(func() { m.Close() })
		checkWalk(t, opens,
			func() { require.NoError(t, m.Join()) },
			func() { require.NoError(t, m.Leave()) })
	})
	t.Run("cgroup", func(t *testing.T) {
		join, leave := cgroupMembership(t, o)
		checkWalk(t, opens, join, leave)
	})
}

const walkPolicy = uint64(0x3a1c)

// walkWorld is the tree the walk is tried on: a workspace with a read
// rule and a tmpfs mounted inside it, a links-ok root, and a directory
// outside every rule.
type walkWorld struct {
	t                            *testing.T
	o                            *bpf.Objects
	tmp, ws, links, outside, mnt string
}

// walkOpen is an open the test makes guarded, and whether the walk admits
// it.
type walkOpen struct {
	path    string
	allowed bool
}

func newWalkWorld(t *testing.T, o *bpf.Objects) *walkWorld {
	tmp := t.TempDir()
	w := &walkWorld{t: t, o: o, tmp: tmp, ws: filepath.Join(tmp, "ws"),
		links: filepath.Join(tmp, "links"), outside: filepath.Join(tmp, "outside")}
	w.mnt = filepath.Join(w.ws, "m")
	for _, d := range []string{w.ws, w.links, w.outside, w.mnt} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	// A mount inside the workspace: the walk crosses it to reach ws.
	require.NoError(t, unix.Mount("tmpfs", w.mnt, "tmpfs", 0, ""))
	t.Cleanup(func() { unix.Unmount(w.mnt, unix.MNT_DETACH) })
	w.rule(w.ws, bpf.AccRead)
	w.rule(w.links, bpf.AccRead|bpf.AccLinksOK)
	return w
}

// chain makes dir/d/d/.../f with n "d" levels and returns f.
func (w *walkWorld) chain(dir string, n int) string {
	p := filepath.Join(append([]string{dir}, strings.Split(strings.Repeat("d/", n)+"f", "/")...)...)
	require.NoError(w.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(w.t, os.WriteFile(p, []byte("x"), 0o644))
	return p
}

// rule grants acc on path's inode.
func (w *walkWorld) rule(path string, acc uint32) {
	var st unix.Stat_t
	require.NoError(w.t, unix.Stat(path, &st))
	k := bpf.InodeKey{Policy: walkPolicy, Ino: st.Ino, Dev: uint32(unix.Major(st.Dev)<<20 | unix.Minor(st.Dev))}
	require.NoError(w.t, w.o.FSRules.Put(k, acc))
	w.t.Cleanup(func() { w.o.FSRules.Delete(k) })
}

// depthOpens: the rule for ws is k levels above the file opened (the file
// is level 0).
func (w *walkWorld) depthOpens() []walkOpen {
	var opens []walkOpen
	for _, k := range []int{1, 2, 15, 16, 17, 40, 63, 64} {
		opens = append(opens, walkOpen{w.chain(w.ws, k-1), k < 64})
	}
	return opens
}

// mountOpens go through the mount: f (level 0), k-1 dirs, the directory k
// (level k), the mount's root (k+1), the mount point (k+2), ws (k+3). The
// crossing falls in the fast part (mount root at level 15 or less) or in
// the bpf_loop part.
func (w *walkWorld) mountOpens() []walkOpen {
	var opens []walkOpen
	for _, k := range []int{1, 13, 14, 15, 30, 60, 61} {
		opens = append(opens, walkOpen{w.chain(filepath.Join(w.mnt, strconv.Itoa(k)), k-1), k+3 < 64})
	}
	return opens
}

// plainOpens: the rule's own directory, a mount root at level 0, and
// places outside every rule.
func (w *walkWorld) plainOpens() []walkOpen {
	return []walkOpen{
		{w.ws, true},
		{w.mnt, true},
		{w.chain(w.outside, 0), false},
		{w.chain(w.outside, 20), false},
		{w.tmp, false},
		{"/", false},
	}
}

// linkOpens: hard links, denied through an ancestor's rule, allowed by
// the file's own rule or through a links-ok root.
func (w *walkWorld) linkOpens() []walkOpen {
	t := w.t
	h1, h2 := filepath.Join(w.ws, "h1"), filepath.Join(w.ws, "h2")
	require.NoError(t, os.WriteFile(h1, []byte("x"), 0o644))
	require.NoError(t, os.Link(h1, h2))
	named := w.chain(filepath.Join(w.ws, "named"), 30)
	require.NoError(t, os.Link(named, filepath.Join(w.tmp, "named-link")))
	w.rule(named, bpf.AccRead)
	deep := w.chain(filepath.Join(w.ws, "deep"), 20)
	require.NoError(t, os.Link(deep, filepath.Join(w.tmp, "deep-link")))
	l1 := w.chain(filepath.Join(w.links, "1"), 0)
	require.NoError(t, os.Link(l1, filepath.Join(w.tmp, "l1-link")))
	l20 := w.chain(filepath.Join(w.links, "20"), 20)
	require.NoError(t, os.Link(l20, filepath.Join(w.tmp, "l20-link")))
	return []walkOpen{{h1, false}, {h2, false}, {deep, false}, {named, true}, {l1, true}, {l20, true}}
}

// checkWalk makes the opens between join and leave (nothing else: the
// guarded process can do little) and checks them after: each admitted or
// denied as it should be, writing denied (no rule grants it), and every
// open working again once out of the session.
func checkWalk(t *testing.T, opens []walkOpen, join, leave func()) {
	got := make([]error, len(opens))
	var werr error
	func() {
		join()
		defer leave()
		for i, o := range opens {
			f, err := os.Open(o.path)
			if err == nil {
				f.Close()
			}
			got[i] = err
		}
		var f *os.File
		if f, werr = os.OpenFile(opens[0].path, os.O_WRONLY, 0); werr == nil {
			f.Close()
		}
	}()
	for i, o := range opens {
		if o.allowed {
			require.NoError(t, got[i], "open %s", o.path)
		} else {
			require.ErrorIs(t, got[i], unix.EPERM, "open %s", o.path)
		}
	}
	require.ErrorIs(t, werr, unix.EPERM, "open %s for writing", opens[0].path)
	for _, o := range opens {
		f, err := os.Open(o.path)
		require.NoError(t, err, "unguarded open %s", o.path)
		f.Close()
	}
}

// cgroupMembership puts the policy on a new cgroup and returns how this
// process moves into it and back to its own; both cgroup.procs files are
// opened first, since the session cannot open them.
func cgroupMembership(t *testing.T, o *bpf.Objects) (join, leave func()) {
	self, err := os.ReadFile("/proc/self/cgroup")
	require.NoError(t, err)
	// cgroup v2: "0::/path"
	cur, ok := strings.CutPrefix(strings.TrimSpace(string(self)), "0::")
	require.True(t, ok, "cgroup v2 membership: %q", self)
	cgroot := "/sys/fs/cgroup"
	home := filepath.Join(cgroot, cur)
	cg := filepath.Join(cgroot, fmt.Sprintf("mcpguard-test-walk-%d", os.Getpid()))
	require.NoError(t, os.Mkdir(cg, 0o755))
	t.Cleanup(func() { os.Remove(cg) })
	var st unix.Stat_t
	require.NoError(t, unix.Stat(cg, &st))
	id := st.Ino // a cgroup v2 directory's inode number is the cgroup id
	into, err := os.OpenFile(filepath.Join(cg, "cgroup.procs"), os.O_WRONLY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { into.Close() })
	back, err := os.OpenFile(filepath.Join(home, "cgroup.procs"), os.O_WRONLY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { back.Close() })
	pid := []byte(strconv.Itoa(os.Getpid()))
	require.NoError(t, o.Cgroups.Put(id, walkPolicy))
	t.Cleanup(func() { require.NoError(t, o.Cgroups.Delete(id)) })
	return func() {
			_, err := into.Write(pid)
			require.NoError(t, err)
		}, func() {
			_, err := back.Write(pid)
			require.NoError(t, err)
		}
}
