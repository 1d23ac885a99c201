//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/internal/pid1"
	"github.com/mcpguard/mcpguard/lab/vm/vmproto"
)

func mount(src, dst, fstype string, flags uintptr, data string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil && !errors.Is(err, unix.EROFS) {
		return fmt.Errorf("mount %s: %w", dst, err)
	}
	if err := unix.Mount(src, dst, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", fstype, dst, err)
	}
	return nil
}

// loadModules loads every module in dir. The runner names them so that
// sorting gives an order with dependencies first; the retry passes only
// matter for a hand-made initramfs in another order.
func loadModules(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil // a kernel with everything built in
	}
	if err != nil {
		return fmt.Errorf("modules: %w", err)
	}
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	sort.Strings(left)
	errs := map[string]error{}
	for pass := 0; len(left) > 0; pass++ {
		var again []string
		for _, name := range left {
			if err := loadModule(filepath.Join(dir, name)); err != nil {
				errs[name] = err
				again = append(again, name)
			}
		}
		if len(again) == len(left) {
			var msg []string
			for _, n := range again {
				msg = append(msg, fmt.Sprintf("%s: %v", n, errs[n]))
			}
			return fmt.Errorf("load modules: %s", strings.Join(msg, "; "))
		}
		left = again
	}
	return nil
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	err = unix.FinitModule(int(f.Fd()), "", 0)
	if err == nil || errors.Is(err, unix.EEXIST) {
		return nil
	}
	return err
}

// openPort opens the virtio-serial port with the given name, waiting for the
// driver to create it.
func openPort(name string, flag int) (*os.File, error) {
	deadline := time.Now().Add(portTimeout)
	for {
		ents, _ := os.ReadDir("/sys/class/virtio-ports")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/sys/class/virtio-ports", e.Name(), "name"))
			if err != nil || strings.TrimSpace(string(b)) != name {
				continue
			}
			f, err := os.OpenFile(filepath.Join("/dev", e.Name()), flag, 0)
			if err == nil {
				return f, nil
			}
			if !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("open port %s: %w", name, err)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("port %s did not appear in %v", name, portTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// setupRoot mounts the host's root and the writable and virtual file
// systems on it, and makes it the root.
func setupRoot(req *vmproto.Request) error {
	const ro = unix.MS_RDONLY
	if err := mount(vmproto.HostRootTag, newRoot, "9p", ro,
		"trans=virtio,version=9p2000.L,cache=loose,msize=512000"); err != nil {
		return err
	}
	if err := mount("scratch", scratch, "tmpfs", 0, "mode=0755"); err != nil {
		return err
	}
	const nosuid = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	mounts := []struct {
		src, dst, fstype string
		flags            uintptr
		data             string
		optional         bool
	}{
		{"proc", "/proc", "proc", nosuid, "", false},
		{"sysfs", "/sys", "sysfs", nosuid, "", false},
		{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755", false},
		{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620", true},
		{"shm", "/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777", true},
		{"securityfs", "/sys/kernel/security", "securityfs", nosuid, "", false},
		{"bpf", "/sys/fs/bpf", "bpf", nosuid, "mode=0700", false},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", nosuid, "", false},
		{"tracefs", "/sys/kernel/tracing", "tracefs", nosuid, "", true},
		{"debugfs", "/sys/kernel/debug", "debugfs", nosuid, "", true},
		{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777", false},
		{"tmpfs", "/var/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777", true},
		{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755", true},
	}
	for _, m := range mounts {
		err := mount(m.src, newRoot+m.dst, m.fstype, m.flags, m.data)
		if err != nil && !m.optional {
			return err
		}
	}
	for _, d := range req.Tmpfs {
		if err := mount("tmpfs", newRoot+d, "tmpfs", 0, "mode=1777"); err != nil {
			return err
		}
	}
	for i, d := range req.Overlays {
		if err := overlay(newRoot+d, filepath.Join(scratch, strconv.Itoa(i))); err != nil {
			return err
		}
	}
	// What switch_root does: the initramfs cannot be pivot_root'ed away,
	// so move the new root over / and chroot into it.
	if err := unix.Chdir(newRoot); err != nil {
		return fmt.Errorf("chdir new root: %w", err)
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move new root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	_ = unix.Sethostname([]byte("mcpguard-vm"))
	// The corpus talks to 127.0.0.1 and 127.0.0.2.
	return pid1.LoopbackUp()
}

// overlay makes dir writable: its host content below, a tmpfs above.
func overlay(dir, scratchDir string) error {
	if _, err := os.Stat(dir); err != nil {
		// Nothing to cover: a fresh tmpfs is the same, if the parent lets
		// us create the mount point (it does not on the read-only host
		// root, and then there is nothing to do).
		return mount("tmpfs", dir, "tmpfs", 0, "mode=0755")
	}
	upper, work := scratchDir+"/upper", scratchDir+"/work"
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("overlay %s: %w", dir, err)
		}
	}
	return mount("overlay", dir, "overlay", 0,
		fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", dir, upper, work))
}

func uptime() float64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	return f
}
