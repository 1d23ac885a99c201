//go:build linux

package namefs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard/launch"
	"github.com/mcpguard/mcpguard/guard/namefs"
)

// nobody is the uid and gid the writer runs as.
const nobody = 65534

// TestReservedBlocks: a server running as nobody fills a disk through the
// supervised write root only as far as nobody can fill it directly: the
// blocks ext4 reserves for root (20% here) stay free, whatever the route:
// writes (passthrough, or through the server), fallocate and mkdir, which
// the server always performs itself (red team F5: it did them as root,
// which may use the reserve).
func TestReservedBlocks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: loop mounts, FUSE, and a writer that runs as nobody")
	}
	for _, c := range []struct {
		name  string
		mount func(t *testing.T, dir string)
	}{
		{"direct", nil}, // the baseline: nobody on the file system itself
		{"namefs", func(t *testing.T, dir string) { mountB(t, dir) }},
		{"namefs-no-passthrough", func(t *testing.T, dir string) {
			s, err := namefs.MountWithoutPassthrough(dir, namefs.Options{Protected: launch.IsProtected})
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mnt := ext4(t)
			ws := filepath.Join(mnt, "ws")
			require.NoError(t, os.Mkdir(ws, 0o755))
			require.NoError(t, os.Chown(ws, nobody, nobody))
			var before unix.Statfs_t
			require.NoError(t, unix.Statfs(mnt, &before))
			reserved := before.Bfree - before.Bavail // root's (-m 20) and ext4's own
			if c.mount != nil {
				c.mount(t, ws)
			}
			full := func(name string, arg ...string) {
				t.Helper()
				out, err := asNobody(name, arg...).CombinedOutput()
				require.Error(t, err, "%s %v: %s", name, arg, out)
				require.Contains(t, string(out), "No space left on device", "%s %v", name, arg)
			}
			full("dd", "if=/dev/zero", "of="+filepath.Join(ws, "fill"), "bs=64k")
			full("fallocate", "-l", "8M", filepath.Join(ws, "more"))
			full("mkdir", filepath.Join(ws, "dir"))
			syncfs(t, mnt)
			var after unix.Statfs_t
			require.NoError(t, unix.Statfs(mnt, &after))
			t.Logf("%s: %d-byte blocks: before free %d avail %d; after free %d avail %d", c.name, before.Bsize,
				before.Bfree, before.Bavail, after.Bfree, after.Bavail)
			// Filled to nobody's limit...
			assert.Less(t, after.Bavail*uint64(after.Bsize), uint64(1<<20), "the disk was not filled")
			// ...and not into the reserve (root fills it to ext4's own
			// few percent).
			assert.GreaterOrEqual(t, after.Bfree, reserved*9/10, "root's reserved blocks were used")
		})
	}
}

// syncfs writes dir's file system out (the statfs after counts the blocks
// of what was written).
func syncfs(t *testing.T, dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Syncfs(fd))
}

// TestIoctls: an ioctl on a file or directory in the write root does not
// reach the real one with the server's privilege: EXT4_IOC_SHUTDOWN
// (CAP_SYS_ADMIN), which stopped the whole file system under the write
// root when the server issued it, is refused; the attribute flags can
// still be read (lsattr). The caller here is root, but the caller does
// not matter: the server issued the ioctl as itself.
func TestIoctls(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: loop mounts and FUSE")
	}
	const ext4IocShutdown = 0x8004587d // _IOR('X', 125, __u32)
	mnt := ext4(t)
	ws := filepath.Join(mnt, "ws")
	require.NoError(t, os.Mkdir(ws, 0o755))
	mountB(t, ws)
	f := filepath.Join(ws, "f")
	require.NoError(t, os.WriteFile(f, []byte("x\n"), 0o644))
	for _, p := range []string{f, ws} {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		var flags uint32 // EXT4_GOING_FLAGS_DEFAULT
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), ext4IocShutdown, uintptr(unsafe.Pointer(&flags)))
		assert.Equal(t, syscall.ENOTTY, e, "EXT4_IOC_SHUTDOWN on %s", p)
		if p == f {
			_, err = unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
			assert.NoError(t, err, "FS_IOC_GETFLAGS (lsattr)")
		}
		unix.Close(fd)
	}
	assert.NoError(t, os.WriteFile(filepath.Join(mnt, "after"), []byte("x\n"), 0o644), "the file system still works")
}

// asNobody runs a command as uid and gid nobody, no other groups.
func asNobody(name string, arg ...string) *exec.Cmd {
	cmd := exec.Command(name, arg...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd
}

// ext4 mounts a new 16 MiB ext4 file system with 20% of its blocks
// reserved for root, and unmounts it (and frees its loop device) at the
// end of the test, whatever happens.
func ext4(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"mkfs.ext4", "losetup", "mount", "umount", "dd", "fallocate", "mkdir"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("no %s here: %v", p, err)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("no loop devices here: %v", err)
	}
	// Not t.TempDir: nobody must reach the mount (t.TempDir's are 0700).
	dir, err := os.MkdirTemp("", "namefs-space-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	img, mnt := filepath.Join(dir, "img"), filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	f, err := os.Create(img)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(16<<20))
	require.NoError(t, f.Close())
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "20", img).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4: %v: %s", err, out)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	if out, err := exec.Command("mount", "-t", "ext4", dev, mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount ext4 from a loop device: %v: %s", err, out)
	}
	// Registered after the loop device's: runs before it (and after the
	// test's FUSE mount, registered later still).
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	require.NoError(t, os.Chmod(mnt, 0o755))
	return mnt
}
