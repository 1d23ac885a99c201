//go:build linux

package launch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// readOnlyExcept makes every mount of the namespace read-only, then binds
// each writable path back onto itself read-write, and binds the kernel
// tunables of the fresh /proc read-only. A server that keeps root's uid
// (without capabilities) still owns every root-owned file on the host:
// without this, chmod, utimes or a DAC-permitted write outside its write
// grants (which Landlock does not judge for chmod, nor BPF LSM) would
// reach the host. Devices stay usable: a read-only mount does not stop
// writes to a device node.
func readOnlyExcept(writable []string) error {
	mounts, err := mountPoints()
	if err != nil {
		return err
	}
	for _, mp := range mounts {
		err := remount(mp, true)
		if err != nil && mp == "/" {
			return fmt.Errorf("read-only /: %w", err)
		}
		// Elsewhere best effort: a mount hidden under another, or one the
		// kernel will not remount (autofs), is skipped.
	}
	for _, w := range writable {
		if err := unix.Mount(w, w, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("writable %s: %w", w, err)
		}
		if err := remount(w, false); err != nil {
			return fmt.Errorf("writable %s: %w", w, err)
		}
		// What the server writes never runs (view.go).
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOEXEC}
		if err := unix.MountSetattr(unix.AT_FDCWD, w, unix.AT_RECURSIVE, &attr); err != nil {
			return fmt.Errorf("writable %s: noexec: %w", w, err)
		}
	}
	return nil
}

// procReadOnly binds the parts of /proc that tune the kernel read-only
// over the fresh /proc (as container runtimes do).
func procReadOnly() error {
	for _, p := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"} {
		if err := bindReadOnly(p, p); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("read-only %s: %w", p, err)
		}
	}
	return nil
}

// remount changes the mount at path to read-only (or read-write), keeping
// its other per-mount flags (a bind remount sets all of them at once).
func remount(path string, ro bool) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT)
	for _, f := range []struct{ st, ms uintptr }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	if ro {
		flags |= unix.MS_RDONLY
	}
	return unix.Mount("", path, "", flags, "")
}

// mountPoints lists the namespace's mount points, parents first.
func mountPoints() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("mounts: %w", err)
	}
	var out []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if !seen[mp] {
			seen[mp] = true
			out = append(out, mp)
		}
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
