//go:build linux

// Package vm runs a command as root inside a qemu VM whose kernel enforces
// BPF LSM, with the host's root file system shared read-only, so tests that
// load BPF LSM programs run for real on machines whose own kernel refuses
// them.
//
// The VM boots Debian's kernel (unpacked into a cache directory, never
// installed) under TCG with lsm=...,bpf, and a small initramfs holding the
// kernel modules and a static Go init (vm/vminit). The init mounts the
// host's / over 9p, puts tmpfs and overlays on the places that must be
// writable, runs the command with the caller's working directory and
// environment, and streams its stdout and stderr back over virtio-serial
// ports, apart from the kernel's console. See docs/vm.md.
package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpguard/mcpguard/lab/vm/vmproto"
)

// ErrTimeout is returned when the command did not finish in Config.Timeout.
var ErrTimeout = errors.New("vm timed out")

// ErrGuest is returned when the VM ended without reporting the command's
// exit status (a kernel panic, an init failure); the error text carries the
// console's tail.
var ErrGuest = errors.New("vm failed")

// LSMs is the kernel's lsm= list: BPF last so that it is active, with the
// others Debian enables (minus AppArmor, which needs its policy).
const LSMs = "lockdown,capability,landlock,yama,bpf"

// Config says how to boot the VM and what to run in it. The zero value
// boots Debian's kernel with 2 GiB and all host CPUs.
type Config struct {
	// Kernel is a bzImage to boot instead of Debian's. Modules is its
	// lib/modules/<release> directory; when empty it is looked up beside
	// the kernel (<root>/boot/vmlinuz-R and <root>/lib/modules/R), and a
	// kernel without one must have 9p, virtio-pci and virtio-console
	// built in.
	Kernel, Modules string
	// Memory in MiB (default 2048) and CPUs (default: the host's, at most 8).
	Memory, CPUs int
	// CacheDir holds kernels, the init and initramfs images (default
	// DefaultCacheDir()).
	CacheDir string
	// Timeout bounds the whole run, boot included; 0 means none.
	Timeout time.Duration
	// Dir is the command's working directory (default: the current one)
	// and Env its environment (default: os.Environ()).
	Dir string
	Env []string
	// Writable are host directories made writable inside the VM, copy on
	// write: writes land in a tmpfs and vanish with the VM. $HOME and the
	// Go build and module caches are always writable this way.
	Writable []string
	// Stdin, if set, is copied to the command's standard input (else it
	// reads /dev/null). Stdout and Stderr receive its output (default:
	// os.Stdout and os.Stderr).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Console receives the kernel's console as it happens. When nil the
	// console is kept and its tail shown if the VM fails.
	Console io.Writer
	// Log receives progress: downloads, boot timing. nil discards it.
	Log io.Writer
	// Init is a prebuilt static init (vm/vminit) to use instead of
	// building one from the source of this module.
	Init string
	// Append is added to the kernel's command line.
	Append string
	// QEMU is the qemu-system-x86_64 to run (default: from PATH,
	// installed with apt-get when missing).
	QEMU string
}

func (c *Config) log() io.Writer {
	if c.Log == nil {
		return io.Discard
	}
	return c.Log
}

// Run boots a VM, runs argv in it and returns its exit status (128+N when
// signal N killed it). An error means the command's status is unknown.
func Run(ctx context.Context, cfg Config, argv []string) (int, error) {
	if len(argv) == 0 {
		return 0, errors.New("no command")
	}
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, cfg.Timeout, fmt.Errorf("%w after %v", ErrTimeout, cfg.Timeout))
		defer cancel()
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if cfg.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return 0, err
		}
		cfg.Dir = wd
	}
	if abs, err := filepath.Abs(cfg.Dir); err == nil {
		cfg.Dir = abs
	}
	if under(cfg.Dir, "/tmp") {
		// The guest mounts its own tmpfs there: the host's files are not
		// visible, so the command would start in an empty directory.
		return 0, fmt.Errorf("working directory %s is under /tmp, which the VM replaces with its own tmpfs; run from elsewhere", cfg.Dir)
	}
	b, err := prepare(ctx, &cfg)
	if err != nil {
		return 0, err
	}
	req := request(&cfg, argv)
	if err := req.Validate(); err != nil {
		return 0, err
	}
	return boot(ctx, &cfg, b, req)
}

// bootFiles are what qemu needs.
type bootFiles struct {
	qemu, kernel, initrd string
}

// prepare finds or makes qemu, the kernel and the initramfs.
func prepare(ctx context.Context, cfg *Config) (bootFiles, error) {
	var b bootFiles
	if cfg.CacheDir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return b, err
		}
		cfg.CacheDir = d
	}
	unlock, err := lockCache(cfg.CacheDir)
	if err != nil {
		return b, err
	}
	defer unlock()
	b.qemu = cfg.QEMU
	if b.qemu == "" {
		if b.qemu, err = findQEMU(ctx, cfg.log()); err != nil {
			return b, err
		}
	}
	k, err := findKernel(ctx, cfg.CacheDir, cfg)
	if err != nil {
		return b, err
	}
	b.kernel = k.image
	initPath := cfg.Init
	if initPath == "" {
		if initPath, err = buildInit(ctx, cfg.CacheDir, cfg.log()); err != nil {
			return b, err
		}
	}
	b.initrd, err = initramfs(cfg.CacheDir, initPath, k)
	return b, err
}

// request is what the guest is asked to do.
func request(cfg *Config, argv []string) *vmproto.Request {
	req := &vmproto.Request{
		Argv:  argv,
		Env:   cfg.Env,
		Dir:   cfg.Dir,
		Stdin: cfg.Stdin != nil,
	}
	// A TMPDIR outside /tmp gets its own tmpfs: the host's is read-only.
	if t := envValue(cfg.Env, "TMPDIR"); filepath.IsAbs(t) && !under(t, "/tmp") && exists(t) {
		req.Tmpfs = append(req.Tmpfs, filepath.Clean(t))
	}
	req.Overlays = writableDirs(cfg.Env, goDirs(cfg.Env), cfg.Writable)
	return req
}

// writableDirs lists the existing directories to overlay, dropping those
// inside another one (one overlay covers them) and the root itself.
func writableDirs(env []string, goDirs []string, extra []string) []string {
	cands := append([]string{envValue(env, "HOME")}, goDirs...)
	cands = append(cands, extra...)
	var dirs []string
	for _, d := range cands {
		if !filepath.IsAbs(d) || filepath.Clean(d) == "/" || !exists(d) {
			continue
		}
		dirs = append(dirs, filepath.Clean(d))
	}
	var out []string
	for i, d := range dirs {
		covered := false
		for j, o := range dirs {
			if i != j && under(d, o) && (d != o || j < i) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, d)
		}
	}
	return out
}

// goDirs asks the go command, if there is one, where the build and
// module caches are, so `go test` inside reuses the host's.
func goDirs(env []string) []string {
	var dirs []string
	for _, k := range []string{"GOCACHE", "GOMODCACHE"} {
		if v := envValue(env, k); v != "" {
			dirs = append(dirs, v)
		}
	}
	if len(dirs) == 2 {
		return dirs
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return dirs
	}
	cmd := exec.Command(goTool, "env", "GOCACHE", "GOMODCACHE")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return dirs
	}
	return append(dirs, strings.Fields(string(out))...)
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// under reports whether path p is dir or inside it.
func under(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func exists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// qemuArgs is the qemu command line; sock names the unix socket of a chardev.
func qemuArgs(cfg *Config, b bootFiles, sock func(id string) string) []string {
	mem, cpus := cfg.Memory, cfg.CPUs
	if mem <= 0 {
		mem = 2048
	}
	if cpus <= 0 {
		// Each vCPU costs boot time under TCG; past a few they rarely pay.
		cpus = min(runtime.NumCPU(), 8)
	}
	args := []string{
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		// microvm would skip the BIOS, but Debian's kernel hangs
		// calibrating the TSC there.
		"-machine", "pc",
		// KVM hung at boot on the build machines; TCG with a thread per
		// vCPU is dependable and fast enough.
		"-accel", "tcg,thread=multi", "-cpu", "max",
		"-smp", strconv.Itoa(cpus), "-m", strconv.Itoa(mem),
		"-kernel", b.kernel, "-initrd", b.initrd,
		// no_timer_check: on a loaded host the emulated 8254 can miss
		// the kernel's IO-APIC timer check, which then panics at boot
		// ("IO-APIC + timer doesn't work!", seen here at load 25).
		"-append", strings.TrimSpace("console=ttyS0 quiet panic=-1 no_timer_check lsm=" + LSMs + " " + cfg.Append),
		"-chardev", "socket,id=con,path=" + sock("con"), "-serial", "chardev:con",
		"-fsdev", "local,id=root,path=/,security_model=none,readonly=on,multidevs=remap",
		"-device", "virtio-9p-pci,fsdev=root,mount_tag=" + vmproto.HostRootTag,
		"-device", "virtio-serial-pci,id=ser",
	}
	ports := []string{vmproto.PortControl, vmproto.PortStdout, vmproto.PortStderr}
	if cfg.Stdin != nil {
		ports = append(ports, vmproto.PortStdin)
	}
	for i, name := range ports {
		id := "p" + strconv.Itoa(i)
		args = append(args,
			"-chardev", "socket,id="+id+",path="+sock(id),
			"-device", "virtserialport,bus=ser.0,chardev="+id+",name="+name)
	}
	return args
}

// counter counts bytes written through it and wakes waiters.
type counter struct {
	w    io.Writer
	mu   sync.Mutex
	n    int64
	cond *sync.Cond
}

func newCounter(w io.Writer) *counter {
	c := &counter{w: w}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.mu.Lock()
	c.n += int64(n)
	c.cond.Broadcast()
	c.mu.Unlock()
	if err != nil {
		// Keep draining: a stalled port would stall the guest.
		return len(p), nil
	}
	return n, err
}

// waitFor blocks until n bytes went through or done is closed.
func (c *counter) waitFor(n int64, done <-chan struct{}) bool {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-done:
		case <-stop:
		}
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.n < n {
		select {
		case <-done:
			return false
		default:
		}
		c.cond.Wait()
	}
	return true
}

// ringBuffer keeps the last bytes written to it.
type ringBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (r *ringBuffer) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	if len(r.buf) > r.max {
		r.buf = append(r.buf[:0], r.buf[len(r.buf)-r.max:]...)
	}
	return len(p), nil
}

func (r *ringBuffer) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.buf)
}

// procCPU is the CPU time a process used so far (0 if unknown): under TCG
// the guest's work, a measure that a busy host does not inflate as it
// does wall time.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are
	// the 14th and 15th fields, in clock ticks (USER_HZ, 100 on Linux).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * (time.Second / 100)
}

// loadAvg is the host's 1-minute load average, for timing reports.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b) + " ?")[0]
}
