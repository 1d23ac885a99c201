//go:build linux

package vm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Sentinel errors for what the runner could not get.
var (
	ErrNoQEMU   = errors.New("qemu-system-x86_64 not available")
	ErrNoKernel = errors.New("no kernel for the VM")
	ErrNoInit   = errors.New("cannot build the VM's init")
)

const (
	qemuBinary  = "qemu-system-x86_64"
	qemuPackage = "qemu-system-x86"
	// kernelMeta is Debian's package that depends on the current kernel.
	kernelMeta = "linux-image-amd64"
	// initPackage is the import path of the guest's init.
	initPackage = "github.com/mcpguard/mcpguard/lab/vm/vminit"
	modulePath  = "github.com/mcpguard/mcpguard"
)

// DefaultCacheDir is where kernels, the init and initramfs images are kept:
// $XDG_CACHE_HOME/mcpguard/vm, or ~/.cache/mcpguard/vm.
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("cache dir: %w", err)
	}
	return filepath.Join(dir, "mcpguard", "vm"), nil
}

// lockCache takes an exclusive lock on the cache directory, so that two
// runners do not download or build into it at once.
func lockCache(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cache dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock cache: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock cache: %w", err)
	}
	return func() { f.Close() }, nil
}

// runTool runs a helper command, its output going to log, and wraps a
// failure with the output's tail.
func runTool(ctx context.Context, log io.Writer, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, log)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(out.Bytes(), 2048))
	}
	return nil
}

// findQEMU returns qemu's path, installing Debian's package when it is
// missing and we are root with apt-get.
func findQEMU(ctx context.Context, log io.Writer) (string, error) {
	if p, err := exec.LookPath(qemuBinary); err == nil {
		return p, nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		return "", fmt.Errorf("%w: install it (Debian: apt-get install %s) or put it in PATH", ErrNoQEMU, qemuPackage)
	}
	fmt.Fprintf(log, "vm: installing %s with apt-get\n", qemuPackage)
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	install := []string{"install", "-y", "--no-install-recommends", qemuPackage}
	if err := runTool(ctx, log, "", env, "apt-get", install...); err != nil {
		// A fresh machine may have no package lists yet.
		if err2 := runTool(ctx, log, "", env, "apt-get", "update"); err2 != nil {
			return "", fmt.Errorf("%w: %v", ErrNoQEMU, err2)
		}
		if err := runTool(ctx, log, "", env, "apt-get", install...); err != nil {
			return "", fmt.Errorf("%w: %v", ErrNoQEMU, err)
		}
	}
	p, err := exec.LookPath(qemuBinary)
	if err != nil {
		return "", fmt.Errorf("%w: installed %s but %v", ErrNoQEMU, qemuPackage, err)
	}
	return p, nil
}

// kernel is a bootable image and the modules that go with it.
type kernel struct {
	image   string
	modules string // lib/modules/<release>, or "" when everything is built in
}

// findKernel returns the kernel in cfg, or the cached Debian kernel,
// downloading and unpacking it (never installing it) when there is none.
func findKernel(ctx context.Context, cacheDir string, cfg *Config) (kernel, error) {
	if cfg.Kernel != "" {
		if _, err := os.Stat(cfg.Kernel); err != nil {
			return kernel{}, fmt.Errorf("%w: %v", ErrNoKernel, err)
		}
		k := kernel{image: cfg.Kernel, modules: cfg.Modules}
		if k.modules == "" {
			k.modules = modulesBeside(cfg.Kernel)
		}
		return k, nil
	}
	dir := filepath.Join(cacheDir, "kernel")
	if k, ok := cachedKernel(dir); ok {
		return fastBoot(ctx, cfg, k), nil
	}
	pkg, err := debianKernelPackage(ctx)
	if err != nil {
		return kernel{}, err
	}
	if err := unpackKernel(ctx, cfg.log(), dir, pkg); err != nil {
		return kernel{}, err
	}
	if k, ok := cachedKernel(dir); ok {
		return fastBoot(ctx, cfg, k), nil
	}
	return kernel{}, fmt.Errorf("%w: %s unpacked into %s has no boot/vmlinuz-*", ErrNoKernel, pkg, dir)
}

// fastBoot swaps the cached bzImage for its uncompressed PVH form when it
// has one (see pvh.go); a kernel given with --kernel is booted as given.
func fastBoot(ctx context.Context, cfg *Config, k kernel) kernel {
	p, err := pvhKernel(ctx, k.image)
	if err != nil {
		fmt.Fprintf(cfg.log(), "vm: booting the compressed kernel (slower): %v\n", err)
		return k
	}
	k.image = p
	return k
}

// modulesBeside finds lib/modules/<release> for <root>/boot/vmlinuz-<release>.
func modulesBeside(image string) string {
	rel, ok := strings.CutPrefix(filepath.Base(image), "vmlinuz-")
	if !ok {
		return ""
	}
	d := filepath.Join(filepath.Dir(filepath.Dir(image)), "lib", "modules", rel)
	if _, err := os.Stat(d); err != nil {
		return ""
	}
	return d
}

// cachedKernel picks the newest unpacked kernel package in dir.
func cachedKernel(dir string) (kernel, bool) {
	pkgs, _ := filepath.Glob(filepath.Join(dir, "linux-image-*"))
	sort.Sort(sort.Reverse(sort.StringSlice(pkgs)))
	for _, p := range pkgs {
		images, _ := filepath.Glob(filepath.Join(p, "boot", "vmlinuz-*"))
		if len(images) == 1 {
			return kernel{image: images[0], modules: modulesBeside(images[0])}, true
		}
	}
	return kernel{}, false
}

var kernelDep = regexp.MustCompile(`Depends:\s*(linux-image-[0-9][^\s]*)`)

// debianKernelPackage asks apt which versioned package linux-image-amd64
// stands for (e.g. linux-image-6.1.0-57-amd64).
func debianKernelPackage(ctx context.Context) (string, error) {
	if _, err := exec.LookPath("apt-cache"); err != nil {
		return "", fmt.Errorf("%w: no apt-cache to find Debian's %s; give a kernel with --kernel", ErrNoKernel, kernelMeta)
	}
	out, err := exec.CommandContext(ctx, "apt-cache", "depends", kernelMeta).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%w: apt-cache depends %s: %v: %s", ErrNoKernel, kernelMeta, err, tail(out, 512))
	}
	return parseKernelPackage(out)
}

func parseKernelPackage(aptOut []byte) (string, error) {
	m := kernelDep.FindSubmatch(aptOut)
	if m == nil {
		return "", fmt.Errorf("%w: apt-cache names no linux-image package for %s (run apt-get update?)", ErrNoKernel, kernelMeta)
	}
	return string(m[1]), nil
}

// unpackKernel downloads pkg with apt-get download and unpacks it with
// dpkg -x into dir/pkg, atomically: a half-unpacked kernel is never used.
func unpackKernel(ctx context.Context, log io.Writer, dir, pkg string) error {
	for _, tool := range []string{"apt-get", "dpkg"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: %s not found to fetch %s; give a kernel with --kernel", ErrNoKernel, tool, pkg)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, ".download-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// apt drops to the _apt user to download; let it write here.
	_ = os.Chmod(tmp, 0o777)
	fmt.Fprintf(log, "vm: downloading %s into %s\n", pkg, dir)
	if err := runTool(ctx, log, tmp, nil, "apt-get", "download", pkg); err != nil {
		return fmt.Errorf("%w: %v", ErrNoKernel, err)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, pkg+"_*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("%w: apt-get download %s left %d .deb files", ErrNoKernel, pkg, len(debs))
	}
	root := filepath.Join(tmp, "root")
	if err := runTool(ctx, log, tmp, nil, "dpkg", "-x", debs[0], root); err != nil {
		return fmt.Errorf("%w: %v", ErrNoKernel, err)
	}
	if err := os.Rename(root, filepath.Join(dir, pkg)); err != nil {
		return fmt.Errorf("%w: %v", ErrNoKernel, err)
	}
	return nil
}

// buildInit builds the guest's init as a static binary into cacheDir. The
// go command skips the build when the binary is up to date.
func buildInit(ctx context.Context, cacheDir string, log io.Writer) (string, error) {
	src, err := moduleRoot()
	if err != nil {
		return "", err
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goTool); err != nil {
			return "", fmt.Errorf("%w: no go command in PATH", ErrNoInit)
		}
	}
	out := filepath.Join(cacheDir, "vminit")
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=-mod=mod -buildvcs=false")
	if err := runTool(ctx, io.Discard, src, env, goTool, "build", "-trimpath", "-ldflags=-s -w", "-o", out, initPackage); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoInit, err)
	}
	return out, nil
}

// moduleRoot finds this module's source: from the working directory up,
// else where this file was compiled.
func moduleRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, d := range starts {
		for ; ; d = filepath.Dir(d) {
			if isModuleRoot(d) {
				return d, nil
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return "", fmt.Errorf("%w: the %s source is not found from the working directory; run from the repository or pass a prebuilt init", ErrNoInit, modulePath)
}

func isModuleRoot(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "module" {
			return f[1] == modulePath
		}
	}
	return false
}

// initramfs returns a cached initramfs with the init and the kernel's
// modules, building it when the init or the modules changed.
func initramfs(cacheDir, initPath string, k kernel) (string, error) {
	init, err := os.ReadFile(initPath)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoInit, err)
	}
	var mods []module
	if k.modules != "" {
		if mods, err = resolveModules(k.modules, guestModules); err != nil {
			return "", err
		}
	}
	h := sha256.New()
	h.Write(init)
	for _, m := range mods {
		st, err := os.Stat(m.path)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "\x00%s\x00%s\x00%d\x00%d", m.name, m.path, st.Size(), st.ModTime().UnixNano())
	}
	dir := filepath.Join(cacheDir, "initramfs")
	path := filepath.Join(dir, hex.EncodeToString(h.Sum(nil))[:24]+".cpio.gz")
	if _, err := os.Stat(path); err == nil {
		now := time.Now()
		_ = os.Chtimes(path, now, now) // in use: keep it
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Drop images unused for a day; a younger one may belong to a run
	// from another checkout that is booting right now.
	old, _ := filepath.Glob(filepath.Join(dir, "*.cpio.gz"))
	for _, o := range old {
		if st, err := os.Stat(o); err == nil && time.Since(st.ModTime()) > 24*time.Hour {
			os.Remove(o)
		}
	}
	f, err := os.CreateTemp(dir, ".tmp-")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	if err := writeInitramfs(f, init, mods); err != nil {
		f.Close()
		return "", fmt.Errorf("write initramfs: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return "", err
	}
	return path, nil
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
