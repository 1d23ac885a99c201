//go:build linux

// Package namefs is the Landlock backend's supervised write root: a FUSE
// file system the launcher's stage 1 mounts over each write root in the
// server's mount namespace, serving the real directory underneath.
//
// Landlock judges paths by the inodes of the directories they pass
// through; it cannot refuse a name. Here the kernel hands every operation
// that makes, moves, removes or writes a name to this server as (parent
// directory, name), and the server performs it itself on the real
// directory, refusing protected names (Options.Protected). There is no
// window between the check and the act: the request is not re-read from
// the server's memory (as a seccomp user notification that lets the
// call continue would be), and every real operation starts from a
// descriptor of the write root opened before the mount covered it,
// resolving the rest with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
// RESOLVE_NO_MAGICLINKS): a component swapped for a symlink fails
// (ELOOP) rather than lead elsewhere. A symlink the server made is
// returned to the kernel as a symlink, which the kernel resolves in the
// server's own context, under its Landlock domain.
//
// The server runs with the launcher's privilege, so it does what the
// kernel would refuse the caller by no means of its own: permissions are
// checked by the kernel against the real attributes (default_permissions)
// before a request arrives, new entries are given to the caller's uid and
// gid, set-id bits are stripped, hard links, device nodes, extended
// attributes and changes of owner are refused, and so is every ioctl but
// the queries of attribute flags. What can allocate disk space (names,
// opens, writes, fallocate, truncate) is done on a thread with the
// caller's fsuid and fsgid and without CAP_SYS_RESOURCE, so that root's
// reserved blocks and quotas hold for it (creds.go). Reads and writes of
// an open file go to the real file directly where the kernel has FUSE
// passthrough (6.9+), judged as its opener.
package namefs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Options configure a mount.
type Options struct {
	// Protected reports whether an absolute path (as the server sees it)
	// is a protected entry or inside one.
	Protected func(path string) bool
	// Denied is told of each refusal (the audit log): what was refused,
	// the path and the operation.
	Denied func(r Refusal, path, op string)
}

// Refusal says why an operation was refused.
type Refusal uint8

const (
	// ProtectedName: the entry is protected (Options.Protected).
	ProtectedName Refusal = iota + 1
	// Executable: the operation would leave a program in the write root
	// (a regular file with an execute bit made, written, or moved). The
	// server never runs what it writes (the write root is noexec in its
	// view), so an execute bit there only serves the user's tools later,
	// outside every sandbox: npm's node_modules/.bin, a PATH entry in the
	// project, rustup's toolchain directory.
	Executable
)

// Server is one mounted write root.
type Server struct {
	srv  *fuse.Server
	root int
}

// root is what every node of one mount shares.
type root struct {
	fd    int    // the real write root, O_PATH, opened before the mount
	mount string // where it is mounted (the same path)
	o     Options
	// noPassthrough: no backing file is offered to the kernel (tests).
	noPassthrough bool
}

// node is one entry; its real file is found again from the root by its
// path each time (no descriptor kept per entry).
type node struct {
	fs.Inode
	r *root
}

// Mount opens dir and mounts the supervised view of it over dir itself.
func Mount(dir string, o Options) (*Server, error) { return mount(dir, o, true) }

func mount(dir string, o Options, passthrough bool) (*Server, error) {
	if o.Protected == nil {
		return nil, errors.New("namefs: no protected-name rule")
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("namefs: open %s: %w", dir, err)
	}
	r := &root{fd: fd, mount: filepath.Clean(dir), o: o, noPassthrough: !passthrough}
	sec := time.Second
	opts := &fs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:        true,
			DirectMountStrict: true,
			FsName:            "mcpguard-namefs",
			Name:              "mcpguard",
			Options:           []string{"default_permissions"},
			DisableXAttrs:     true,
		},
		EntryTimeout:    &sec,
		AttrTimeout:     &sec,
		NegativeTimeout: &sec,
	}
	// fs.Mount, with the requests that allocate disk space run as their
	// caller (creds.go).
	srv, err := fuse.NewServer(judged{fs.NewNodeFS(&node{r: r}, opts)}, dir, &opts.MountOptions)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("namefs: mount %s: %w", dir, err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		unix.Close(fd)
		return nil, fmt.Errorf("namefs: mount %s: %w", dir, err)
	}
	return &Server{srv: srv, root: fd}, nil
}

// Close unmounts (the namespace going away unmounts too).
func (s *Server) Close() error {
	err := s.srv.Unmount()
	unix.Close(s.root)
	return err
}

// rel is n's path below the root ("." for the root).
func (n *node) rel() string {
	p := n.Path(n.Root())
	if p == "" {
		return "."
	}
	return p
}

// abs is the path of n's child name as the server sees it.
func (n *node) abs(name string) string {
	return filepath.Join(n.r.mount, n.Path(n.Root()), name)
}

// resolveHow finds a path below the root and never follows a symlink or
// leaves the root on the way.
const resolveHow = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// open opens a path below the root.
func (r *root) open(rel string, flags int, mode uint32) (int, syscall.Errno) {
	for {
		fd, err := unix.Openat2(r.fd, rel, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolveHow})
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue // a rename raced the lookup: try again
		}
		return fd, errno(err)
	}
}

// dir opens n itself as a directory (O_PATH), for the *at calls on its
// children.
func (n *node) dir() (int, syscall.Errno) {
	return n.r.open(n.rel(), unix.O_PATH|unix.O_DIRECTORY, 0)
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

// refuse reports a protected name refused and returns EPERM.
func (n *node) refuse(path, op string) syscall.Errno { return n.deny(ProtectedName, path, op) }

// deny reports a refusal and returns EPERM.
func (n *node) deny(r Refusal, path, op string) syscall.Errno {
	if n.r.o.Denied != nil {
		n.r.o.Denied(r, path, op)
	}
	return syscall.EPERM
}

// execBits are the execute bits: no regular file made, written or moved
// here carries one (Executable).
const execBits = 0o111

// program reports whether st is a regular file with an execute bit.
func program(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&execBits != 0
}

func toStat(st *unix.Stat_t) *syscall.Stat_t { return (*syscall.Stat_t)(unsafe.Pointer(st)) }

// stableAttr identifies an inode across mounts below the root.
func stableAttr(st *unix.Stat_t) fs.StableAttr {
	return fs.StableAttr{Mode: st.Mode & unix.S_IFMT, Ino: uint64(st.Dev)<<32 ^ st.Ino}
}

// child makes the inode for name below n from its stat.
func (n *node) child(ctx context.Context, st *unix.Stat_t, out *fuse.EntryOut) *fs.Inode {
	out.Attr.FromStat(toStat(st))
	return n.NewInode(ctx, &node{r: n.r}, stableAttr(st))
}

// owner gives a new entry to the caller (the kernel sends its uid and
// gid; this server runs as root).
func owner(ctx context.Context, dfd int, name string) syscall.Errno {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return syscall.EIO
	}
	return errno(unix.Fchownat(dfd, name, int(c.Uid), int(c.Gid), unix.AT_SYMLINK_NOFOLLOW))
}

// setIDBits are never set on anything made here.
const setIDBits = unix.S_ISUID | unix.S_ISGID

func unsafePointer(s *unix.Statfs_t) unsafe.Pointer { return unsafe.Pointer(s) }
