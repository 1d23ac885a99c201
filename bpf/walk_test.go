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

	const policy = uint64(0x3a1c)
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	links := filepath.Join(tmp, "links") // links-ok root
	outside := filepath.Join(tmp, "outside")
	mnt := filepath.Join(ws, "m")
	for _, d := range []string{ws, links, outside, mnt} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	// A mount inside the workspace: the walk crosses it to reach ws.
	require.NoError(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, ""))
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })

	// chain makes dir/d/d/.../f with n "d" levels and returns f.
	chain := func(dir string, n int) string {
		p := filepath.Join(append([]string{dir}, strings.Split(strings.Repeat("d/", n)+"f", "/")...)...)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
		return p
	}
	rule := func(path string, acc uint32) {
		var st unix.Stat_t
		require.NoError(t, unix.Stat(path, &st))
		k := bpf.InodeKey{Policy: policy, Ino: st.Ino, Dev: uint32(unix.Major(st.Dev)<<20 | unix.Minor(st.Dev))}
		require.NoError(t, o.FSRules.Put(k, acc))
		t.Cleanup(func() { o.FSRules.Delete(k) })
	}
	rule(ws, bpf.AccRead)
	rule(links, bpf.AccRead|bpf.AccLinksOK)

	// The rule for ws is k levels above the file opened (the file is level 0).
	type open struct {
		path    string
		allowed bool
	}
	var opens []open
	for _, k := range []int{1, 2, 15, 16, 17, 40, 63, 64} {
		opens = append(opens, open{chain(ws, k-1), k < 64})
	}
	// Through the mount: f (level 0), k-1 dirs, the directory k (level k),
	// the mount's root (k+1), the mount point (k+2), ws (k+3). The crossing
	// falls in the fast part (mount root at level 15 or less) or in the
	// bpf_loop part.
	for _, k := range []int{1, 13, 14, 15, 30, 60, 61} {
		opens = append(opens, open{chain(filepath.Join(mnt, strconv.Itoa(k)), k-1), k+3 < 64})
	}
	opens = append(opens,
		open{ws, true},  // the rule's own directory
		open{mnt, true}, // a mount root at level 0
		open{chain(outside, 0), false},
		open{chain(outside, 20), false},
		open{tmp, false},
		open{"/", false},
	)
	// Hard links: denied through an ancestor's rule, allowed by the file's
	// own rule or through a links-ok root.
	h1, h2 := filepath.Join(ws, "h1"), filepath.Join(ws, "h2")
	require.NoError(t, os.WriteFile(h1, []byte("x"), 0o644))
	require.NoError(t, os.Link(h1, h2))
	named := chain(filepath.Join(ws, "named"), 30)
	require.NoError(t, os.Link(named, filepath.Join(tmp, "named-link")))
	rule(named, bpf.AccRead)
	deep := chain(filepath.Join(ws, "deep"), 20)
	require.NoError(t, os.Link(deep, filepath.Join(tmp, "deep-link")))
	l1 := chain(filepath.Join(links, "1"), 0)
	require.NoError(t, os.Link(l1, filepath.Join(tmp, "l1-link")))
	l20 := chain(filepath.Join(links, "20"), 20)
	require.NoError(t, os.Link(l20, filepath.Join(tmp, "l20-link")))
	opens = append(opens, open{h1, false}, open{h2, false}, open{deep, false},
		open{named, true}, open{l1, true}, open{l20, true})

	check := func(t *testing.T, join, leave func()) {
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
			// Writing needs write access, which no rule here grants.
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
		// Out of the session again: everything opens.
		for _, o := range opens {
			f, err := os.Open(o.path)
			require.NoError(t, err, "unguarded open %s", o.path)
			f.Close()
		}
	}

	t.Run("tasks", func(t *testing.T) {
		// A guarded task gets no bpf(): an unguarded helper process edits
		// the tasks map for it, started before this process joins.
		m, err := member.Start(filepath.Join(root, bpf.Version(), "tasks"), policy, os.Getpid())
		require.NoError(t, err)
		t.Cleanup(func() { m.Close() })
		check(t,
			func() { require.NoError(t, m.Join()) },
			func() { require.NoError(t, m.Leave()) })
	})

	t.Run("cgroup", func(t *testing.T) {
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
		// Open both cgroup.procs files before joining: the session cannot open them.
		into, err := os.OpenFile(filepath.Join(cg, "cgroup.procs"), os.O_WRONLY, 0)
		require.NoError(t, err)
		defer into.Close()
		back, err := os.OpenFile(filepath.Join(home, "cgroup.procs"), os.O_WRONLY, 0)
		require.NoError(t, err)
		defer back.Close()
		pid := []byte(strconv.Itoa(os.Getpid()))
		require.NoError(t, o.Cgroups.Put(id, policy))
		check(t,
			func() {
				_, err := into.Write(pid)
				require.NoError(t, err)
			},
			func() {
				_, err := back.Write(pid)
				require.NoError(t, err)
			})
		require.NoError(t, o.Cgroups.Delete(id))
	})
}
