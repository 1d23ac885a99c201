//go:build linux

package namefs

import (
	"context"
	"os"
	"runtime"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Disk space is judged as the server's, not the launcher's (red team F5).
//
// A file system decides whether a block may be allocated by the
// credentials of the task that allocates it: ext4 gives its reserved
// blocks (mkfs -m, 5% by default) to fsuid 0 (resuid), to the resgid
// group and to CAP_SYS_RESOURCE; disk quotas are ignored with
// CAP_SYS_RESOURCE. This server runs as root, so everything it did for a
// server running as nobody (make a name, write, fallocate) could fill a
// disk into root's reserve, which is there so that root and the system
// can still work on a full disk.
//
// So every request that can allocate is performed on an OS thread that
// looks like the caller to those checks (asCaller): fsuid and fsgid are
// the caller's, there are no supplementary groups, and CAP_SYS_RESOURCE
// is not in the effective set. Every other capability stays effective:
// the server still opens what default_permissions let the caller reach
// (CAP_DAC_OVERRIDE), gives new entries to the caller (CAP_CHOWN) and
// registers passthrough backing files (CAP_SYS_ADMIN); its rules by name
// and for programs are unchanged.
//
// Where the I/O happens:
//
//   - names (create, mkdir, mknod, symlink, rename) and truncate: the
//     request itself (judged, the raw file system's methods), as the
//     request's caller;
//   - open and create: the same, and that matters twice with FUSE
//     passthrough (6.9+, used when the kernel offers it): the kernel
//     performs the reads and writes of a passthrough file itself, with the
//     credentials of the task that registered the backing file
//     (FUSE_DEV_IOC_BACKING_OPEN takes prepare_creds(), not the backing
//     file's f_cred), and go-fuse registers it inside the Open or Create
//     request, on the thread that serves it: here, the caller's;
//   - writes and fallocate that come to this server (no passthrough:
//     older kernels, stacked file systems, and fallocate always): the
//     open file (file), as the task that opened it, like a file's f_cred,
//     and not as the request's caller, which the kernel may leave 0 (its
//     own write-back of a shared mapping carries no caller).
//
// A passthrough backing file is registered once per inode and shared by
// its later opens while one stays open: those are judged as the first
// opener. Every task that reaches the mount is the server's (it is in the
// server's mount namespace), so in practice that is the same user.
//
// Dropping CAP_SYS_RESOURCE from the whole launcher would not be enough:
// fsuid 0 alone takes ext4's reserve (F5 was found on a host whose
// bounding set has no CAP_SYS_RESOURCE at all).
//
// Cost: about 12 system calls per judged request (6 of them change the
// thread's credentials); a goroutine locked to its thread costs well under
// a microsecond. BenchmarkAsCaller: 27-41 µs on the 2-core test VM under
// load, where getppid alone took 1.2 µs; a persistent worker thread per
// caller would save the credential changes but its hand-off cost 16-65 µs
// there.

// asCaller runs fn on an OS thread whose fsuid and fsgid are uid and gid,
// with no supplementary groups and without CAP_SYS_RESOURCE, and puts the
// thread back afterwards. It returns EPERM, without running fn, when the
// thread cannot be changed (it never runs fn with root's judgement).
//
// A fresh goroutine, locked to its thread: credentials are per thread
// (the raw calls here change only the calling one, unlike the Go
// runtime's all-threads setters), and a thread that cannot be put back
// stays locked to a goroutine that ends, so the runtime terminates it
// rather than run anything else on it. Threads the runtime creates while
// this one is locked are cloned from its template thread, not from this
// one.
func asCaller(uid, gid uint32, fn func()) syscall.Errno {
	done := make(chan syscall.Errno, 1)
	go func() {
		runtime.LockOSThread()
		var t thread
		e := t.become(int(uid), int(gid))
		if e == 0 {
			fn()
		}
		if t.restore() == nil {
			runtime.UnlockOSThread()
		}
		done <- e
	}()
	return <-done
}

// capSysResource as a bit in the first word of the capability sets.
const capSysResource = 1 << unix.CAP_SYS_RESOURCE

// thread is what become changed on the calling thread, for restore.
type thread struct {
	caps    [2]unix.CapUserData
	groups  []int
	fsuid   int
	fsgid   int
	changed struct{ groups, fsgid, fsuid, caps bool }
}

func (t *thread) become(uid, gid int) syscall.Errno {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capget(&hdr, &t.caps[0]); err != nil {
		return syscall.EPERM
	}
	groups, err := unix.Getgroups()
	if err != nil {
		return syscall.EPERM
	}
	t.groups = groups
	if len(groups) > 0 {
		if err := unix.Setgroups(nil); err != nil {
			return syscall.EPERM
		}
		t.changed.groups = true
	}
	// setfsuid and setfsgid return the previous value and fail silently:
	// read the new one back (an invalid id changes nothing).
	t.fsgid, _ = unix.SetfsgidRetGid(gid)
	t.changed.fsgid = true
	if now, _ := unix.SetfsgidRetGid(-1); now != gid {
		return syscall.EPERM
	}
	// Leaving fsuid 0 also drops CAP_DAC_OVERRIDE and the other file
	// capabilities from the effective set; the capset below raises them
	// again from the permitted set.
	t.fsuid, _ = unix.SetfsuidRetUid(uid)
	t.changed.fsuid = true
	if now, _ := unix.SetfsuidRetUid(-1); now != uid {
		return syscall.EPERM
	}
	c := t.caps
	c[0].Effective &^= capSysResource
	t.changed.caps = true
	if err := unix.Capset(&hdr, &c[0]); err != nil {
		return syscall.EPERM
	}
	return 0
}

// restore puts back what become changed, in reverse: fsuid (back to 0
// raises the file capabilities), fsgid, groups, then the exact effective
// set. An error leaves the thread to be discarded.
func (t *thread) restore() error {
	if t.changed.fsuid {
		unix.SetfsuidRetUid(t.fsuid)
		if now, _ := unix.SetfsuidRetUid(-1); now != t.fsuid {
			return syscall.EPERM
		}
	}
	if t.changed.fsgid {
		unix.SetfsgidRetGid(t.fsgid)
		if now, _ := unix.SetfsgidRetGid(-1); now != t.fsgid {
			return syscall.EPERM
		}
	}
	if t.changed.groups {
		if err := unix.Setgroups(t.groups); err != nil {
			return err
		}
	}
	if t.changed.caps {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		if err := unix.Capset(&hdr, &t.caps[0]); err != nil {
			return err
		}
	}
	return nil
}

// as runs one request as its caller.
func as(c *fuse.Caller, fn func() fuse.Status) fuse.Status {
	s := fuse.OK
	if e := asCaller(c.Uid, c.Gid, func() { s = fn() }); e != 0 {
		return fuse.Status(e)
	}
	return s
}

// judged is the mount's raw file system: the requests that make names,
// open files (and register their passthrough backing files) or change a
// size run as their caller.
type judged struct{ fuse.RawFileSystem }

func (j judged) Create(c <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	return as(&in.Caller, func() fuse.Status { return j.RawFileSystem.Create(c, in, name, out) })
}

func (j judged) Open(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return as(&in.Caller, func() fuse.Status { return j.RawFileSystem.Open(c, in, out) })
}

func (j judged) Mkdir(c <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	return as(&in.Caller, func() fuse.Status { return j.RawFileSystem.Mkdir(c, in, name, out) })
}

func (j judged) Mknod(c <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	return as(&in.Caller, func() fuse.Status { return j.RawFileSystem.Mknod(c, in, name, out) })
}

func (j judged) Symlink(c <-chan struct{}, in *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	return as(&in.Caller, func() fuse.Status { return j.RawFileSystem.Symlink(c, in, target, name, out) })
}

func (j judged) Rename(c <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	return as(&in.Caller, func() fuse.Status { return j.RawFileSystem.Rename(c, in, oldName, newName) })
}

func (j judged) SetAttr(c <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	return as(&in.Caller, func() fuse.Status { return j.RawFileSystem.SetAttr(c, in, out) })
}

// file is an open file: the writes and allocations that come to this
// server run as the task that opened it.
type file struct {
	*fs.LoopbackFile
	opener      fuse.Owner
	passthrough bool
}

var (
	_ fs.FileWriter          = (*file)(nil)
	_ fs.FileWritever        = (*file)(nil)
	_ fs.FileAllocater       = (*file)(nil)
	_ fs.FileReleaser        = (*file)(nil)
	_ fs.FileGetattrer       = (*file)(nil)
	_ fs.FilePassthroughFder = (*file)(nil)
)

// newFile wraps fd, opened for the caller in ctx.
func (r *root) newFile(ctx context.Context, fd int) (fs.FileHandle, syscall.Errno) {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		unix.Close(fd)
		return nil, syscall.EIO
	}
	lf := fs.NewLoopbackFileFromOS(os.NewFile(uintptr(fd), ""))
	return &file{LoopbackFile: lf, opener: c.Owner, passthrough: !r.noPassthrough}, 0
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (n uint32, e syscall.Errno) {
	if err := asCaller(f.opener.Uid, f.opener.Gid, func() { n, e = f.LoopbackFile.Write(ctx, data, off) }); err != 0 {
		return 0, err
	}
	return n, e
}

func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (n uint32, e syscall.Errno) {
	if err := asCaller(f.opener.Uid, f.opener.Gid, func() { n, e = f.LoopbackFile.Writev(ctx, data, off) }); err != 0 {
		return 0, err
	}
	return n, e
}

func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) (e syscall.Errno) {
	if err := asCaller(f.opener.Uid, f.opener.Gid, func() { e = f.LoopbackFile.Allocate(ctx, off, size, mode) }); err != 0 {
		return err
	}
	return e
}

// PassthroughFd offers the kernel the backing file unless the mount was
// made without (a test of the path older kernels take).
func (f *file) PassthroughFd() (int, bool) {
	if !f.passthrough {
		return -1, false
	}
	return f.LoopbackFile.PassthroughFd()
}
