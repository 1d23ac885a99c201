package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Overlay mounts an overlay whose lower layer is lower (filled by the
// caller) and returns where: the upper layer is on a tmpfs of its own, so
// the layers are on different file systems (stat(2) shows a file under a
// per-layer pseudo device, the kernel's hooks the overlay's inode). Both
// mounts go at cleanup. It fails where the tmpfs cannot be mounted and
// skips where overlayfs cannot.
func Overlay(tb testing.TB, lower string) string {
	tb.Helper()
	dir := tb.TempDir()
	up, mnt := filepath.Join(dir, "up"), filepath.Join(dir, "mnt")
	for _, d := range []string{up, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	if err := unix.Mount("tmpfs", up, "tmpfs", 0, ""); err != nil {
		tb.Fatalf("upper layer on its own file system: mount tmpfs: %v", err)
	}
	tb.Cleanup(func() { unix.Unmount(up, unix.MNT_DETACH) })
	for _, d := range []string{"u", "w"} {
		if err := os.MkdirAll(filepath.Join(up, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	opts := "lowerdir=" + lower + ",upperdir=" + filepath.Join(up, "u") + ",workdir=" + filepath.Join(up, "w")
	if err := unix.Mount("overlay", mnt, "overlay", 0, opts); err != nil {
		tb.Skipf("cannot mount overlayfs here: %v", err)
	}
	tb.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	return mnt
}
