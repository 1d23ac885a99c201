//go:build linux

package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard/landlock/ruleset"
	"github.com/mcpguard/mcpguard/guard/launch/seccomp"
	"github.com/mcpguard/mcpguard/internal/pid1"
)

// landlockFD is where stage 1 hands the built ruleset to stage 2
// (ExtraFiles[0]).
const landlockFD = 3

// handoff is what stage 1 tells stage 2 beyond the spec, as a fourth
// hidden argument: BINARY __mcpguard-exec SPEC HANDOFF PROGRAM ARGV0...
// Empty when stage 2 is started directly by the proxy.
type handoff struct {
	abi   int
	flags uint32
}

func (h handoff) String() string { return fmt.Sprintf("fd3:abi=%d:flags=%d", h.abi, h.flags) }

func parseHandoff(s string) (handoff, bool, error) {
	if s == "-" {
		return handoff{}, false, nil
	}
	var h handoff
	if _, err := fmt.Sscanf(s, "fd3:abi=%d:flags=%d", &h.abi, &h.flags); err != nil {
		return h, false, fmt.Errorf("%w: handoff %q", ErrBadSpec, s)
	}
	return h, true, nil
}

// stage1 runs as pid 1 of the server's new namespaces, as root.
// args: SPEC PROGRAM ARGV0 ARGS...
func stage1(args []string) error {
	if len(args) < 3 {
		return fmt.Errorf("usage: %s SPEC PROGRAM ARGV0 [ARGS...]", StageArg)
	}
	spec, err := DecodeSpec(args[0])
	if err != nil {
		return err
	}
	// Everything that the child inherits (bounding set, no_new_privs) is
	// set on this thread, and the child is forked from it.
	runtime.LockOSThread()
	if err := stage1Identity(spec); err != nil {
		return err
	}
	wd, _ := os.Getwd()
	if err := enterView(spec, wd); err != nil {
		return err
	}
	hand := "-"
	var extra []*os.File
	if spec.Landlock != nil {
		abi, err := ruleset.CheckABI(ruleset.KernelABI)
		if err != nil {
			return err
		}
		fd, flags, err := ruleset.Build(spec.Landlock, abi)
		if err != nil {
			return err
		}
		extra = append(extra, os.NewFile(uintptr(fd), "landlock-ruleset"))
		hand = handoff{abi: abi, flags: flags}.String()
	}
	if err := dropBounding(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl no_new_privs: %w", err)
	}
	// /proc/self/exe, not the binary's path: the server's user may not be
	// able to reach the directory it lies in (a test binary under /tmp's
	// 0700 go-build directories, /root/go/bin), while the magic link
	// opens the file itself.
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = append([]string{os.Args[0], ExecArg, args[0], hand}, args[1:]...)
	cmd.Env = os.Environ()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: spec.UID, Gid: spec.GID, Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start server as %d:%d: %w", spec.UID, spec.GID, err)
	}
	for _, f := range extra {
		f.Close()
	}
	// The server holds its stdio now: the proxy sees it close them, not
	// this process keeping them open. Stderr stays for this process's own
	// last words.
	os.Stdin.Close()
	os.Stdout.Close()
	child := cmd.Process.Pid
	go func() {
		for s := range sigs {
			unix.Kill(child, s.(syscall.Signal))
		}
	}()
	// Orphans are re-parented to this process (pid 1): reap them all
	// until the server exits, and exit with its status as a shell says it.
	status, err := pid1.Reap(child)
	if err != nil {
		status = ExitCode
	}
	os.Exit(status)
	return nil
}

// stage1Identity does what stage 1 does first: nothing inherited, never
// uid 0, into the v1 limit cgroups, then namespaces of its own (host
// name, a cgroup namespace rooted at the session's cgroup).
func stage1Identity(spec *Spec) error {
	if err := inheritNothing(); err != nil {
		return err
	}
	if spec.UID == 0 || spec.GID == 0 {
		return ErrRootServer
	}
	for _, f := range spec.JoinCgroups {
		if err := os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", f, err)
		}
	}
	return ownNamespaces()
}

// enterView builds the server's world from stage 1: its mounts, the
// supervised write roots, its working directory through them, its
// loopback, and (when the policy grants network) the egress filter's
// listeners, which the guard adds while stage 1 waits.
func enterView(spec *Spec, wd string) error {
	if err := setupMounts(spec); err != nil {
		return err
	}
	// The runtime inside the write roots, cloned before the supervised
	// file system covers them: executable again on top of both.
	kept, err := cloneKept(spec.View)
	if err != nil {
		return err
	}
	// Write roots served through the supervised file system (Landlock's
	// protected names) are mounted over the view before anything of the
	// server starts.
	if err := supervise(spec); err != nil {
		kept.close()
		return err
	}
	if err := kept.attach(); err != nil {
		return err
	}
	// Again through the server's view: the directory it started in may
	// be a mount of the view now (an idmapped grant, below a stub, or a
	// supervised write root: a working directory left on the directory
	// underneath would bypass it for relative paths).
	if err := os.Chdir(wd); err != nil {
		os.Chdir("/")
	}
	// A server may still talk to itself (a local worker); out only
	// through the egress filter's listeners, which the guard adds.
	if !spec.SharedNetwork {
		if err := pid1.LoopbackUp(); err != nil {
			return err
		}
	}
	return awaitEgress(spec.EgressFD)
}

// setupMounts gives the namespace private propagation (nothing done here
// reaches the host, nothing mounted on the host later reaches here), a
// /proc that shows only this pid namespace (with other users' processes
// hidden: the server cannot even see pid 1), and the read-only binds.
func setupMounts(spec *Spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	writable := spec.Writable
	if spec.View != nil {
		writable = nil // the view attaches them
	}
	if err := readOnlyExcept(writable); err != nil {
		return err
	}
	if err := applyView(spec.View); err != nil {
		return err
	}
	const procFlags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("proc", "/proc", "proc", procFlags, "hidepid=invisible"); err != nil {
		// Kernels before 5.8 know only the numeric form.
		if err := unix.Mount("proc", "/proc", "proc", procFlags, "hidepid=2"); err != nil {
			return fmt.Errorf("mount /proc: %w", err)
		}
	}
	// No memfd of this pid namespace is executable (Linux 6.3+): a
	// program filled into one would run from a kernel-internal mount,
	// which Landlock does not judge. The server cannot lower it. Where
	// this fails (kernels before 6.3 have no such switch), stage 2 reads
	// what holds and the Landlock backend's seccomp filter refuses
	// executable memfds itself; the BPF backend's exec hook denies them
	// either way.
	_ = seccomp.EnforceMemfdNoExec()
	if err := procReadOnly(); err != nil {
		return err
	}
	for _, p := range spec.Pin {
		if err := unix.Mount(p, p, "", unix.MS_BIND, ""); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("pin %s: %w", p, err)
		}
	}
	for _, p := range spec.ReadOnly {
		if err := bindReadOnly(p, p); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("protect %s: %w", p, err)
		}
	}
	if err := maskPaths(spec.Mask); err != nil {
		return fmt.Errorf("mask hard link: %w", err)
	}
	return nil
}

// bindReadOnly binds src onto dst and makes that mount read-only.
func bindReadOnly(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	const ro = unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV
	if err := unix.Mount("", dst, "", ro, ""); err != nil {
		return fmt.Errorf("read-only: %w", err)
	}
	return nil
}

// dropBounding empties the calling thread's capability bounding and
// ambient sets: no execve can ever give the server a capability back.
func dropBounding() error {
	last := unix.CAP_LAST_CAP
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	return nil
}

// stage2 runs as the server's user (or, under a non-root proxy, as the
// proxy's): it restricts itself and becomes the server.
// args: SPEC HANDOFF PROGRAM ARGV0 ARGS...
func stage2(args []string) error {
	if len(args) < 4 {
		return fmt.Errorf("usage: %s SPEC HANDOFF PROGRAM ARGV0 [ARGS...]", ExecArg)
	}
	spec, err := DecodeSpec(args[0])
	if err != nil {
		return err
	}
	hand, handed, err := parseHandoff(args[1])
	if err != nil {
		return err
	}
	// Never unlocked: a restricted thread must not go back to the
	// scheduler's pool if execve fails.
	runtime.LockOSThread()
	if err := newSessionKeyring(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl no_new_privs: %w", err)
	}
	if spec.Landlock != nil {
		fd, flags, abi := landlockFD, hand.flags, hand.abi
		if !handed {
			if abi, err = ruleset.CheckABI(ruleset.KernelABI); err != nil {
				return err
			}
			if fd, flags, err = ruleset.Build(spec.Landlock, abi); err != nil {
				return err
			}
		}
		if err := ruleset.AddOwnProc(fd); err != nil {
			return err
		}
		if err := ruleset.RestrictSelf(fd, flags, spec.Landlock, abi); err != nil {
			return err
		}
		unix.Close(fd)
	} else if err := seccomp.Install(seccomp.Options{DenyUnix: spec.Seccomp.DenyUnix}); err != nil && !errors.Is(err, seccomp.ErrNoFilter) {
		return err
	}
	if err := inheritNothing(); err != nil {
		return err
	}
	err = syscall.Exec(args[2], args[3:], os.Environ())
	return fmt.Errorf("exec %s: %w", args[2], err)
}

// newSessionKeyring joins a fresh anonymous session keyring (a NULL name:
// an empty one would join an existing keyring of that name), so keys the
// client's session holds (aws-vault, Kerberos KEYRING: caches) are out of
// reach; the seccomp filter then refuses keyctl altogether.
func newSessionKeyring() error {
	_, _, e := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0)
	if e != 0 && e != unix.ENOSYS {
		return fmt.Errorf("join new session keyring: %w", e)
	}
	return nil
}
