//go:build linux

package namefs

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

var (
	_ fs.NodeLookuper   = (*node)(nil)
	_ fs.NodeGetattrer  = (*node)(nil)
	_ fs.NodeSetattrer  = (*node)(nil)
	_ fs.NodeOpener     = (*node)(nil)
	_ fs.NodeCreater    = (*node)(nil)
	_ fs.NodeMkdirer    = (*node)(nil)
	_ fs.NodeMknoder    = (*node)(nil)
	_ fs.NodeSymlinker  = (*node)(nil)
	_ fs.NodeLinker     = (*node)(nil)
	_ fs.NodeRenamer    = (*node)(nil)
	_ fs.NodeUnlinker   = (*node)(nil)
	_ fs.NodeRmdirer    = (*node)(nil)
	_ fs.NodeReadlinker = (*node)(nil)
	_ fs.NodeReaddirer  = (*node)(nil)
	_ fs.NodeStatfser   = (*node)(nil)
	_ fs.NodeIoctler    = (*node)(nil)
)

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	dfd, e := n.dir()
	if e != 0 {
		return nil, e
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, errno(err)
	}
	return n.child(ctx, &st, out), 0
}

// self opens n without following it (O_PATH): a symlink is itself.
func (n *node) self() (int, syscall.Errno) {
	return n.r.open(n.rel(), unix.O_PATH|unix.O_NOFOLLOW, 0)
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if g, ok := f.(fs.FileGetattrer); ok && f != nil {
		return g.Getattr(ctx, out)
	}
	fd, st, e := n.selfStat()
	if e != 0 {
		return e
	}
	unix.Close(fd)
	out.FromStat(toStat(&st))
	return 0
}

// selfStat opens n (O_PATH, not followed) and stats it; the caller closes
// the descriptor.
func (n *node) selfStat() (int, unix.Stat_t, syscall.Errno) {
	var st unix.Stat_t
	fd, e := n.self()
	if e != 0 {
		return -1, st, e
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, errno(err)
	}
	return fd, st, 0
}

// Setattr changes size, mode and times; never the owner. A protected
// file's size is not changed (truncate is a write).
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, ok := in.GetUID(); ok {
		return syscall.EPERM
	}
	if _, ok := in.GetGID(); ok {
		return syscall.EPERM
	}
	path := n.abs("")
	fd, st, e := n.selfStat()
	if e != 0 {
		return e
	}
	defer unix.Close(fd)
	// The O_PATH descriptor's magic link reaches the inode itself (not a
	// symlink's target): chmod and utimes act on exactly this entry.
	proc := fmt.Sprintf("/proc/self/fd/%d", fd)
	if sz, ok := in.GetSize(); ok {
		if n.r.o.Protected(path) {
			return n.refuse(path, "truncate")
		}
		if program(&st) {
			return n.deny(Executable, path, "truncate")
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return syscall.EINVAL
		}
		if err := unix.Truncate(proc, int64(sz)); err != nil {
			return errno(err)
		}
	}
	if m, ok := in.GetMode(); ok {
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return syscall.EOPNOTSUPP
		}
		// Execute bits may be kept or dropped, never added.
		if st.Mode&unix.S_IFMT == unix.S_IFREG && m&execBits&^st.Mode != 0 {
			return n.deny(Executable, path, "chmod")
		}
		if err := unix.Chmod(proc, m&07777&^setIDBits); err != nil {
			return errno(err)
		}
	}
	if e := setTimes(proc, in); e != 0 {
		return e
	}
	return n.Getattr(ctx, nil, out)
}

func setTimes(proc string, in *fuse.SetAttrIn) syscall.Errno {
	a, aok := in.GetATime()
	m, mok := in.GetMTime()
	if !aok && !mok {
		return 0
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
	if aok {
		ts[0] = unix.NsecToTimespec(a.UnixNano())
	}
	if mok {
		ts[1] = unix.NsecToTimespec(m.UnixNano())
	}
	return errno(unix.UtimesNanoAt(unix.AT_FDCWD, proc, ts, 0))
}

// writeFlags are the open flags that change a file.
const writeFlags = unix.O_WRONLY | unix.O_RDWR | unix.O_TRUNC | unix.O_APPEND

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if int(flags)&writeFlags != 0 && n.r.o.Protected(n.abs("")) {
		return nil, 0, n.refuse(n.abs(""), "open for writing")
	}
	f := int(flags) &^ (unix.O_CREAT | unix.O_EXCL | unix.O_NOCTTY)
	fd, e := n.r.open(n.rel(), f|unix.O_NOFOLLOW, 0)
	if e != 0 {
		return nil, 0, e
	}
	if int(flags)&writeFlags != 0 {
		if e := n.notProgram(fd, n.abs(""), "open for writing"); e != 0 {
			unix.Close(fd)
			return nil, 0, e
		}
	}
	fh, e := n.r.newFile(ctx, fd)
	return fh, 0, e
}

// notProgram refuses a write to fd when it is a program (Executable).
func (n *node) notProgram(fd int, path, op string) syscall.Errno {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return errno(err)
	}
	if program(&st) {
		return n.deny(Executable, path, op)
	}
	return 0
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	fd, e := n.r.open(n.rel(), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if e != 0 {
		return nil, e
	}
	return fs.NewLoopbackDirStreamFd(fd)
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	fd, e := n.self()
	if e != 0 {
		return nil, e
	}
	defer unix.Close(fd)
	buf := make([]byte, unix.PathMax)
	m, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return nil, errno(err)
	}
	return buf[:m], 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var s unix.Statfs_t
	if err := unix.Fstatfs(n.r.fd, &s); err != nil {
		return errno(err)
	}
	out.FromStatfsT((*syscall.Statfs_t)(unsafePointer(&s)))
	return 0
}

// make runs one call that makes the name child in n (after the
// protected-name check), gives it to the caller and looks it up.
func (n *node) make(ctx context.Context, name, op string, out *fuse.EntryOut, do func(dfd int) error) (*fs.Inode, syscall.Errno) {
	if p := n.abs(name); n.r.o.Protected(p) {
		return nil, n.refuse(p, op)
	}
	dfd, e := n.dir()
	if e != 0 {
		return nil, e
	}
	defer unix.Close(dfd)
	if err := do(dfd); err != nil {
		return nil, errno(err)
	}
	if e := owner(ctx, dfd, name); e != 0 {
		unix.Unlinkat(dfd, name, 0)
		return nil, e
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, errno(err)
	}
	return n.child(ctx, &st, out), 0
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	p := n.abs(name)
	if n.r.o.Protected(p) {
		return nil, nil, 0, n.refuse(p, "create")
	}
	if mode&execBits != 0 {
		return nil, nil, 0, n.deny(Executable, p, "create")
	}
	dfd, e := n.dir()
	if e != 0 {
		return nil, nil, 0, e
	}
	defer unix.Close(dfd)
	// O_EXCL first: only a file made here is given to the caller. One
	// that appeared meanwhile (the kernel's negative entry was stale) is
	// opened as it is, unless the caller asked for O_EXCL itself.
	// O_NOFOLLOW: a symlink at name is never followed to create its
	// target.
	base := int(flags)&^(unix.O_CREAT|unix.O_EXCL) | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dfd, name, base|unix.O_CREAT|unix.O_EXCL, mode&^setIDBits)
	made := err == nil
	if errors.Is(err, unix.EEXIST) && int(flags)&unix.O_EXCL == 0 {
		fd, err = unix.Openat(dfd, name, base, 0)
		if err == nil && int(flags)&writeFlags != 0 {
			if e := n.notProgram(fd, p, "open for writing"); e != 0 {
				unix.Close(fd)
				return nil, nil, 0, e
			}
		}
	}
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	if made {
		if e := owner(ctx, dfd, name); e != 0 {
			unix.Close(fd)
			unix.Unlinkat(dfd, name, 0)
			return nil, nil, 0, e
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, nil, 0, errno(err)
	}
	fh, e := n.r.newFile(ctx, fd)
	if e != 0 {
		return nil, nil, 0, e
	}
	return n.child(ctx, &st, out), fh, 0, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.make(ctx, name, "mkdir", out, func(dfd int) error { return unix.Mkdirat(dfd, name, mode&^setIDBits) })
}

// Mknod makes regular files, FIFOs and sockets; never a device.
func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		if mode&execBits != 0 {
			return nil, n.deny(Executable, n.abs(name), "mknod")
		}
	case unix.S_IFIFO, unix.S_IFSOCK:
	default:
		return nil, syscall.EPERM
	}
	return n.make(ctx, name, "mknod", out, func(dfd int) error { return unix.Mknodat(dfd, name, mode&^setIDBits, 0) })
}

// Symlink refuses a link that leads to a program: a link is a program of
// its own name (node_modules/.bin/eslint -> /usr/bin/python3 made npm run
// lint run the workspace's __main__.py: second red team). Where it leads
// is resolved the way the kernel will, from the real directory, links
// followed.
//
// Nor may a link lead to a directory outside the write root: a link made
// first, dangling (eslint -> ../d/python3), is completed later by a
// directory link (d -> /usr/bin) into a link to a program, which neither
// step alone shows (fifth red team). Inside the root there is no program
// to reach (none may be made there), so a chain can reach one only
// through a link that leads out to a directory, or straight to it.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if dfd, e := n.dir(); e == 0 {
		why := n.r.leadsOut(dfd, target)
		unix.Close(dfd)
		if why != "" {
			return nil, n.deny(Executable, n.abs(name), "symlink "+why)
		}
	}
	return n.make(ctx, name, "symlink", out, func(dfd int) error { return unix.Symlinkat(target, dfd, name) })
}

// leadsOut says why a link at target, resolved from dfd as the kernel will
// (links followed), may not be in the write root: it leads to a program,
// or to a directory outside the root; "" when it may.
func (r *root) leadsOut(dfd int, target string) string {
	var st unix.Stat_t
	if unix.Fstatat(dfd, target, &st, 0) != nil {
		return "" // dangling: nothing to run (yet; see Symlink)
	}
	if program(&st) {
		return "to a program"
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return ""
	}
	fd, err := unix.Openat(dfd, target, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	if !r.holds(fd) {
		return "to a directory outside the write root"
	}
	return ""
}

// holds reports whether the directory fd is the root or below it, by
// walking its parents (by identity, not by name) up to /.
func (r *root) holds(fd int) bool {
	var top unix.Stat_t
	if unix.Fstat(r.fd, &top) != nil {
		return false
	}
	cur, err := unix.Dup(fd)
	if err != nil {
		return false
	}
	defer func() { unix.Close(cur) }()
	for range 4096 {
		var st unix.Stat_t
		if unix.Fstat(cur, &st) != nil {
			return false
		}
		if st.Dev == top.Dev && st.Ino == top.Ino {
			return true
		}
		up, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return false
		}
		var pst unix.Stat_t
		if unix.Fstat(up, &pst) != nil || (pst.Dev == st.Dev && pst.Ino == st.Ino) {
			unix.Close(up)
			return false // reached /
		}
		unix.Close(cur)
		cur = up
	}
	return false
}

// Link is refused: a second name for a file elsewhere would carry this
// root's rules to it (the BPF backend refuses hard links as well).
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, n.refuse(n.abs(name), "link")
}

// Rename refuses to move a protected entry away or anything onto a
// protected name (RENAME_EXCHANGE moves both ways: both names are checked
// either way).
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	for _, p := range []string{n.abs(name), np.abs(newName)} {
		if n.r.o.Protected(p) {
			return n.refuse(p, "rename")
		}
	}
	from, e := n.dir()
	if e != 0 {
		return e
	}
	defer unix.Close(from)
	to, e := np.dir()
	if e != 0 {
		return e
	}
	defer unix.Close(to)
	// A program is not moved: renamed onto a shim's name it would run
	// in the user's next npm test (RENAME_EXCHANGE moves both).
	for _, e := range []struct {
		dfd  int
		name string
		path string
	}{{from, name, n.abs(name)}, {to, newName, np.abs(newName)}} {
		if e.dfd != from && flags&unix.RENAME_EXCHANGE == 0 {
			continue
		}
		var st unix.Stat_t
		// followed: a link to a program is moved as one
		if unix.Fstatat(e.dfd, e.name, &st, 0) == nil && program(&st) {
			return n.deny(Executable, e.path, "rename")
		}
		// a link out to a directory completes a chain wherever it lands
		if unix.Fstatat(e.dfd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if why := n.r.leadsOut(e.dfd, e.name); why != "" {
				return n.deny(Executable, e.path, "rename of a link "+why)
			}
		}
	}
	return errno(unix.Renameat2(from, name, to, newName, uint(flags)))
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, 0, "unlink")
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, unix.AT_REMOVEDIR, "rmdir")
}

func (n *node) remove(name string, flags int, op string) syscall.Errno {
	if p := n.abs(name); n.r.o.Protected(p) {
		return n.refuse(p, op)
	}
	dfd, e := n.dir()
	if e != 0 {
		return e
	}
	defer unix.Close(dfd)
	return errno(unix.Unlinkat(dfd, name, flags))
}

// fsIocFsgetxattr is FS_IOC_FSGETXATTR, _IOR('X', 31, struct fsxattr).
const fsIocFsgetxattr = 0x801c581f

// Ioctl passes on only the two queries of a file's attribute flags (the
// kernel sends them itself for lsattr, FS_IOC_GETFLAGS and
// FS_IOC_FSGETXATTR) and refuses every other ioctl on a file or
// directory: this server would issue it on the real file with its own
// privilege, not the caller's, and the file system's own ioctls trust
// that: EXT4_IOC_SHUTDOWN (CAP_SYS_ADMIN) from a server running as nobody
// stopped the whole file system under the write root, FS_IOC_SETFLAGS
// would set ext4's data journalling flag (CAP_SYS_RESOURCE).
func (n *node) Ioctl(ctx context.Context, f fs.FileHandle, cmd uint32, arg uint64, input, output []byte) (int32, syscall.Errno) {
	if cmd == unix.FS_IOC_GETFLAGS || cmd == fsIocFsgetxattr {
		if io, ok := f.(fs.FileIoctler); ok {
			return io.Ioctl(ctx, cmd, arg, input, output)
		}
	}
	return 0, syscall.ENOTTY
}
