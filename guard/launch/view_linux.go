package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard/pathrules"
)

// IdleArg is the hidden first argument of the process whose user
// namespace an idmapped mount takes its mapping from: it reads its
// standard input until EOF and exits.
const IdleArg = "__mcpguard-idle"

// ErrNoAccess is wrapped when a data grant can be made reachable to the
// server's user neither by an idmapped mount nor by ACL entries.
var ErrNoAccess = errors.New("cannot give the server's user access to a grant")

// prepareView computes spec.View for the server's user and does the
// proxy's part: the user namespaces of the idmapped mounts (passed to
// stage 1 as cmd.ExtraFiles), the ACL entries where a file system cannot
// idmap, the stub trees of the shadows, each recorded in a journal in
// stateDir first (journal_linux.go). l undoes it. What dead proxies'
// sessions left in stateDir is put back first.
func prepareView(spec *Spec, cmd *exec.Cmd, l *Launch, stateDir string) error {
	if stateDir == "" {
		stateDir = DefaultStateDir
	}
	if _, err := reapJournals(stateDir); err != nil {
		fmt.Fprintf(os.Stderr, "mcpguard: left by an earlier session: %v\n", err)
	}
	uid, gid := spec.UID, spec.GID
	// The server's working directory is reached too (a server resolves
	// its own directory's path, as node's realpath does component by
	// component), whatever L3 then lets it do inside.
	wd := cmd.Dir
	if wd == "" {
		wd, _ = os.Getwd()
	}
	// What is kept executable is the runtime's, not the directory the
	// server starts in.
	keep := keepExec(grantsOf(spec))
	if wd != "" {
		spec.Reach = append(spec.Reach, wd)
	}
	grants := grantsOf(spec)
	j := &lazyJournal{dir: stateDir, cmd: cmd, l: l}
	userns, err := mapGrants(grants, [2]uint32{uid, gid}, cmd, l, j)
	if err != nil {
		return err
	}
	v := &View{Keep: keep}
	shadow := shadows(grants, uid, gid)
	for _, g := range grants {
		if !g.data && slices.ContainsFunc(grants, func(d *viewGrant) bool { return d.data && within(g.real, d.real) }) {
			continue // inside a data grant: its own mount shows it
		}
		covered := len(shadow) > 0 && underAny(g.real, shadow)
		if !g.write && !(g.data && g.owner != [2]uint32{uid, gid}) && !covered {
			continue
		}
		m := ViewMount{Path: g.real, Write: g.write}
		if g.owner != [2]uint32{uid, gid} && g.data {
			m.UserNS = userns[g.owner]
		}
		v.Mounts = append(v.Mounts, m)
	}
	v.Mounts = topMounts(v.Mounts)
	if len(shadow) > 0 {
		if err := stubTrees(v, shadow, grants, l, j); err != nil {
			return err
		}
	}
	if len(v.Shadows) > 0 || len(v.Mounts) > 0 || len(v.Keep) > 0 {
		spec.View = v
	}
	return nil
}

// lazyJournal opens the Launch's journal at its first record: most
// sessions change nothing on disk.
type lazyJournal struct {
	dir string
	cmd *exec.Cmd
	l   *Launch
	j   *journal
}

func (lj *lazyJournal) record(e journalEntry) error {
	if lj.j == nil {
		j, err := openJournal(lj.dir)
		if err != nil {
			return err
		}
		lj.j = j
		// Stage 1 holds the lock too: a session whose proxy died is put
		// back only once its server is gone as well.
		lj.cmd.ExtraFiles = append(lj.cmd.ExtraFiles, j.lock)
		lj.l.done = func(clean bool) {
			if clean {
				j.done()
			} else {
				j.lock.Close() // the next start puts back what is left
			}
		}
	}
	return lj.j.record(e)
}

// mapGrants makes the data grants owned by another user reachable: a user
// namespace per owner for an idmapped mount (its descriptor number in
// stage 1 returned), or ACL entries where the file system cannot idmap
// (the grant is then reached without a mapping).
func mapGrants(grants []*viewGrant, server [2]uint32, cmd *exec.Cmd, l *Launch, j *lazyJournal) (map[[2]uint32]int, error) {
	userns := map[[2]uint32]int{} // owner -> descriptor number in stage 1
	nsFile := map[[2]uint32]*os.File{}
	var acled []string // the trees ACL grants were made on
	for _, g := range grants {
		if !g.data || g.owner == server {
			continue
		}
		if _, ok := userns[g.owner]; !ok {
			f, err := newUserNS(g.owner, server)
			if err != nil {
				return nil, err
			}
			l.files = append(l.files, f)
			userns[g.owner] = 3 + len(cmd.ExtraFiles)
			nsFile[g.owner] = f
			cmd.ExtraFiles = append(cmd.ExtraFiles, f)
		}
		if canIdmap(g.real, int(nsFile[g.owner].Fd())) {
			continue
		}
		// A tree already given by an ACL grant that holds it (the same
		// path granted to read and to write, a read root in a write
		// root) is not walked again: the second walk would record the
		// first's entries as the original state.
		if slices.ContainsFunc(acled, func(d string) bool { return pathrules.Host.Within(g.real, d) }) {
			g.owner = server
			continue
		}
		undo, err := aclGrant(j, g.real, g.owner, server[0], server[1])
		if err != nil {
			return nil, fmt.Errorf("%w %s (owned by %d:%d) on a file system without idmapped mounts: %v; set %s to a user who can reach it, or run mcpguard with sudo",
				ErrNoAccess, g.real, g.owner[0], g.owner[1], err, UserEnv)
		}
		l.undo = append(l.undo, undo)
		acled = append(acled, g.real)
		g.owner = server // reached through the ACL entries: no mapping
	}
	return userns, nil
}

// stubTrees builds the stub tree of each shadow, in a directory the
// journal records first.
func stubTrees(v *View, shadow []string, grants []*viewGrant, l *Launch, j *lazyJournal) error {
	dir, err := os.MkdirTemp("", "mcpguard-view-*")
	if err != nil {
		return fmt.Errorf("view: %w", err)
	}
	l.stub = dir
	if err := j.record(journalEntry{Stub: dir}); err != nil {
		return err
	}
	for i, s := range shadow {
		stub := filepath.Join(dir, strconv.Itoa(i))
		if err := stubTree(stub, s, grants, v.Mounts); err != nil {
			return err
		}
		v.Shadows = append(v.Shadows, Shadow{Path: s, Stub: stub})
	}
	return nil
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if within(p, d) && p != d {
			return true
		}
	}
	return false
}

// topMounts sorts mounts parents first and drops read-only ones inside
// another mount (its recursive clone holds them). A writable one inside
// a read-only one stays: it is attached on top.
func topMounts(ms []ViewMount) []ViewMount {
	sortMounts(ms)
	var out []ViewMount
	for _, m := range ms {
		inside := false
		for _, o := range out {
			if within(m.Path, o.Path) && (!m.Write || o.Write) && m.UserNS == o.UserNS {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, m)
		}
	}
	return out
}

func sortMounts(ms []ViewMount) {
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && ms[j].Path < ms[j-1].Path; j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
}

// stubTree builds, at stub, what the server sees at shadow: the path to
// every grant below it, directories 0755, a symlink where the grant's
// listed path has one, an empty directory or file where a mount goes.
func stubTree(stub, shadow string, grants []*viewGrant, mounts []ViewMount) error {
	if err := os.Mkdir(stub, 0o755); err != nil {
		return fmt.Errorf("view: %w", err)
	}
	if err := os.Chmod(stub, 0o755); err != nil {
		return fmt.Errorf("view: %w", err)
	}
	for _, g := range grants {
		for _, p := range []string{g.path, g.real} {
			if !underAny(p, []string{shadow}) {
				continue
			}
			if err := stubPath(stub, shadow, p); err != nil {
				return fmt.Errorf("view: stub for %s: %w", p, err)
			}
		}
	}
	return nil
}

// stubPath recreates p (below shadow) in stub, one component at a time
// as the original has it: a symlink is copied and ends the walk (its
// target is a grant of its own), a directory is made, the last component
// is made empty (the grant is attached on it).
func stubPath(stub, shadow, p string) error {
	rel := strings.Split(strings.TrimPrefix(p, shadow+"/"), "/")
	orig, at := shadow, stub
	for i, c := range rel {
		orig, at = filepath.Join(orig, c), filepath.Join(at, c)
		fi, err := os.Lstat(orig)
		if err != nil {
			return err
		}
		if _, err := os.Lstat(at); err == nil {
			continue
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(orig)
			if err != nil {
				return err
			}
			return os.Symlink(t, at)
		case fi.IsDir():
			if err := os.Mkdir(at, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(at, 0o755); err != nil {
				return err
			}
		case i == len(rel)-1:
			if err := os.WriteFile(at, nil, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// newUserNS returns a user namespace whose mapping swaps owner with
// server (uid with uid, gid with gid) and keeps every other id: an
// idmapped mount taking it shows the owner's files as the server's, and
// the server's new files as the owner's on disk.
//
// The namespace needs a process to be made by; that process never runs:
// it is started traced (PTRACE_TRACEME), so the kernel stops it at the
// first instruction after its execve, before the Go runtime of this
// binary would start, and it is killed once the namespace is open (as
// runc does). Where tracing is refused (Yama's ptrace_scope 3, a seccomp
// filter of a container), it runs as IdleArg until its standard input
// closes instead, the binary's full start-up.
func newUserNS(owner, server [2]uint32) (*os.File, error) {
	attr := func(trace bool) *syscall.SysProcAttr {
		return &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: swapMap(owner[0], server[0]),
			GidMappings: swapMap(owner[1], server[1]),
			Ptrace:      trace,
			Pdeathsig:   syscall.SIGKILL,
		}
	}
	cmd := exec.Command("/proc/self/exe", IdleArg)
	cmd.SysProcAttr = attr(true)
	if err := cmd.Start(); err == nil {
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		return openUserNS(cmd.Process.Pid)
	}
	cmd = exec.Command("/proc/self/exe", IdleArg)
	cmd.SysProcAttr = attr(false)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("user namespace: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("user namespace: %w", err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	return openUserNS(cmd.Process.Pid)
}

func openUserNS(pid int) (*os.File, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err != nil {
		return nil, fmt.Errorf("user namespace: %w", err)
	}
	return f, nil
}

// swapMap maps a to b and b to a, every other id to itself.
func swapMap(a, b uint32) []syscall.SysProcIDMap {
	if a == b {
		return []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
	}
	lo, hi := min(a, b), max(a, b)
	var m []syscall.SysProcIDMap
	add := func(ns, host, n uint32) {
		if n > 0 {
			m = append(m, syscall.SysProcIDMap{ContainerID: int(ns), HostID: int(host), Size: int(n)})
		}
	}
	add(0, 0, lo)
	add(lo, hi, 1)
	add(lo+1, lo+1, hi-lo-1)
	add(hi, lo, 1)
	add(hi+1, hi+1, 1<<32-1-(hi+1))
	return m
}

// serveIdle is the IdleArg process.
func serveIdle() {
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// canIdmap reports whether path's file system lets an idmapped mount be
// made of it (a detached clone, never attached: nothing changes here).
func canIdmap(path string, userns int) bool {
	fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns)}
	return unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr) == nil
}

// applyView is stage 1's part, in the server's mount namespace after
// every mount was made read-only: clone each grant (before a shadow hides
// it), cover the shadows with their stubs, attach the clones.
func applyView(v *View) error {
	if v == nil {
		return nil
	}
	fds := make([]int, len(v.Mounts))
	defer func() {
		for _, fd := range fds {
			if fd > 0 {
				unix.Close(fd)
			}
		}
	}()
	for i, m := range v.Mounts {
		fd, err := unix.OpenTree(unix.AT_FDCWD, m.Path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("view: clone %s: %w", m.Path, err)
		}
		fds[i] = fd
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if m.Write {
			// What the server writes never runs (view.go).
			attr.Attr_clr = unix.MOUNT_ATTR_RDONLY
			attr.Attr_set |= unix.MOUNT_ATTR_NOEXEC
		} else {
			attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
		}
		if m.UserNS != 0 {
			attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
			attr.Userns_fd = uint64(m.UserNS)
		}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
			return fmt.Errorf("view: attributes of %s: %w", m.Path, err)
		}
	}
	for _, s := range v.Shadows {
		if err := bindReadOnly(s.Stub, s.Path); err != nil {
			return fmt.Errorf("view: cover %s: %w", s.Path, err)
		}
	}
	for i, m := range v.Mounts {
		if err := unix.MoveMount(fds[i], "", unix.AT_FDCWD, m.Path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("view: attach %s: %w", m.Path, err)
		}
	}
	return nil
}

// keptTrees are View.Keep cloned read-only and executable (after the
// view's noexec write roots are in place, before the supervised file
// system covers them), attached on top by attach.
type keptTrees struct {
	paths []string
	fds   []int
}

func cloneKept(v *View) (*keptTrees, error) {
	k := &keptTrees{}
	if v == nil {
		return k, nil
	}
	for _, p := range v.Keep {
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			k.close()
			return nil, fmt.Errorf("view: clone %s: %w", p, err)
		}
		k.paths, k.fds = append(k.paths, p), append(k.fds, fd)
		attr := unix.MountAttr{
			Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
			Attr_clr: unix.MOUNT_ATTR_NOEXEC,
		}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
			k.close()
			return nil, fmt.Errorf("view: attributes of %s: %w", p, err)
		}
	}
	return k, nil
}

// attach puts the kept trees in place and lets go of the clones.
func (k *keptTrees) attach() error {
	defer k.close()
	for i, p := range k.paths {
		if err := unix.MoveMount(k.fds[i], "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("view: keep %s executable: %w", p, err)
		}
	}
	return nil
}

func (k *keptTrees) close() {
	for _, fd := range k.fds {
		unix.Close(fd)
	}
	k.fds = nil
}
