//go:build linux

package ruleset

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard/launch/seccomp"
)

// init serves ExecArg before anything else runs. Doing it here rather than
// as a subcommand of mcpguard means every binary that can build a Landlock
// config can also be its wrapper (test binaries included), and the wrapper
// does no more than runtime start-up before the execve.
func init() {
	if len(os.Args) > 1 && os.Args[1] == ExecArg {
		err := Wrap(os.Args[2:], KernelABI)
		fmt.Fprintf(os.Stderr, "mcpguard landlock: %v\n", err)
		os.Exit(WrapperExitCode)
	}
}

// Wrap is the wrapper: args are RULES-JSON PROGRAM ARGV0 ARGS... It only
// returns on failure; on success the process is the server, restricted.
func Wrap(args []string, probe Probe) error {
	if len(args) < 3 {
		return fmt.Errorf("usage: %s RULES-JSON PROGRAM ARGV0 [ARGS...]", ExecArg)
	}
	r, err := Decode(args[0])
	if err != nil {
		return err
	}
	abi, err := CheckABI(probe)
	if err != nil {
		return err
	}
	r.Paths = append(r.Paths, selfProc())
	fd, flags, err := ruleset(r, abi, os.Stat)
	if err != nil {
		return err
	}
	// The domain is put on this thread only and this thread calls execve:
	// the new program inherits the calling thread's credentials, domain
	// included. Never unlocked: a restricted thread must not go back to the
	// scheduler's pool if execve fails.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl no_new_privs: %w", err)
	}
	memfd := memfdRule()
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	unix.Close(fd)
	if err := socketFilter(r, abi, memfd); err != nil {
		return err
	}
	err = syscall.Exec(args[1], args[2:], os.Environ())
	return fmt.Errorf("exec %s under landlock: %w", args[1], err)
}

// selfProc is the process's own /proc/PID: after execve the server has
// the wrapper's pid, so /proc/self works for it (and only for it).
func selfProc() PathRule {
	return PathRule{Path: fmt.Sprintf("/proc/%d", os.Getpid()), Access: Read, Why: "own /proc/PID"}
}

// File access rights, go-landlock's names for the kernel's bits.
const (
	fsRead  = llsys.AccessFSReadFile | llsys.AccessFSReadDir
	fsWrite = fsRead | llsys.AccessFSWriteFile | llsys.AccessFSTruncate |
		llsys.AccessFSMakeReg | llsys.AccessFSMakeDir | llsys.AccessFSMakeSym |
		llsys.AccessFSMakeSock | llsys.AccessFSMakeFifo |
		llsys.AccessFSRemoveFile | llsys.AccessFSRemoveDir | llsys.AccessFSRefer
	fsExec   = llsys.AccessFSExecute | llsys.AccessFSReadFile
	fsDevice = llsys.AccessFSReadFile | llsys.AccessFSWriteFile
	// fsFileOnly are the rights that apply to a regular file; the kernel
	// rejects directory rights on a rule anchored on a file.
	fsFileOnly = llsys.AccessFSExecute | llsys.AccessFSWriteFile | llsys.AccessFSReadFile |
		llsys.AccessFSTruncate | llsys.AccessFSIoctlDev
)

// mask returns the kernel rights for a.
func mask(a Access) (ll.AccessFSSet, bool) {
	switch a {
	case Read:
		return fsRead, true
	case Write:
		return fsWrite, true
	case Exec:
		return fsExec, true
	case Device:
		return fsDevice, true
	}
	return 0, false
}

// config is what the ruleset handles (denies unless a rule allows it):
// everything the newest known ABI can restrict, lowered to the running
// kernel's ABI by go-landlock's best-effort mode. When a network rule
// admits every port, connecting is left unhandled, since Landlock cannot
// say "this host, any port".
func config(r *Rules) ll.Config {
	c := ll.Config{
		HandledAccessFS:  ll.V11.HandledAccessFS,
		HandledAccessNet: ll.V11.HandledAccessNet,
		Scoped:           ll.V11.Scoped,
	}
	if r.AnyConnect {
		c.HandledAccessNet &^= llsys.AccessNetConnectTCP | llsys.AccessNetConnectSendUDP
	}
	if r.Egress {
		// The server's network namespace is the boundary: what it may
		// reach there is the egress filter's listeners and its own
		// sockets (a local worker on any port), so ports say nothing.
		c.HandledAccessNet = 0
	}
	// Denials by the server (after execve) go to the audit log where the
	// kernel supports it (ABI 7+); best effort drops the flag elsewhere.
	return c.BestEffort().EnableLoggingForSubprocesses()
}

// ruleset builds the kernel ruleset for r at the given ABI, without
// enforcing it. stat is os.Stat (a rule on a regular file may only carry
// file rights).
func ruleset(r *Rules, abi int, stat func(string) (fs.FileInfo, error)) (fd int, flags uint32, err error) {
	cfg := config(r)
	var rules []ll.Rule
	for _, p := range r.Paths {
		m, _ := mask(p.Access)
		if abi < 2 {
			// A rule asking for refer on an ABI 1 kernel makes go-landlock's
			// best effort drop the whole ruleset; moving files across
			// directories is always denied there anyway.
			m &^= llsys.AccessFSRefer
		}
		fi, err := stat(p.Path)
		if err != nil {
			if p.Optional && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return -1, 0, fmt.Errorf("landlock rule %s %s: %w", p.Access, p.Path, err)
		}
		if !fi.IsDir() {
			m &= fsFileOnly
		}
		rules = append(rules, ll.PathAccess(m, p.Path))
	}
	if r.Egress {
		return build(cfg, rules, abi)
	}
	if !r.AnyConnect {
		for _, port := range r.ConnectTCP {
			rules = append(rules, ll.ConnectTCP(port), ll.ConnectSendUDP(port))
		}
	}
	for _, port := range r.BindTCP {
		rules = append(rules, ll.BindTCP(port))
	}
	// Where UDP is restricted (ABI 10+), sending from an unbound socket
	// autobinds it to an ephemeral port: allow that (port 0), so that the
	// connect/send rules above decide.
	rules = append(rules, ll.BindUDP(0))
	return build(cfg, rules, abi)
}

// build makes the ruleset fd from cfg and rules.
func build(cfg ll.Config, rules []ll.Rule, abi int) (fd int, flags uint32, err error) {
	fd, flags, err = cfg.NewRulesetFD(rules...)
	if err != nil {
		return -1, 0, fmt.Errorf("landlock ruleset: %w", err)
	}
	if fd < 0 {
		return -1, 0, fmt.Errorf("landlock ruleset: %w: nothing enforceable at ABI %d", ErrUnavailable, abi)
	}
	return fd, flags, nil
}

// RestrictThread puts the calling OS thread (only) under r, for
// benchmarks and tests that measure or probe enforcement in-process. The
// caller must have called runtime.LockOSThread and must never unlock it:
// the Go runtime then ends the thread with its goroutine.
func RestrictThread(r *Rules, probe Probe) error {
	abi, err := CheckABI(probe)
	if err != nil {
		return err
	}
	own := *r
	own.Paths = append(slices.Clone(r.Paths), selfProc())
	fd, flags, err := ruleset(&own, abi, os.Stat)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl no_new_privs: %w", err)
	}
	memfd := memfdRule()
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return socketFilter(&own, abi, memfd)
}

// socketFilter installs the launcher's seccomp filter (package seccomp)
// with the socket rules for r at the given ABI, refusing executable
// memfds when memfd is set (memfdRule). Where it is not
// implemented the Landlock domain stands alone; its limits say so.
func socketFilter(r *Rules, abi int, memfd bool) error {
	o := SeccompOptions(r, abi)
	o.MemfdNoExec = memfd
	err := seccomp.Install(o)
	if errors.Is(err, seccomp.ErrNoFilter) {
		return nil
	}
	return err
}

// SeccompOptions are the socket rules that complete r at the given ABI:
// inet sockets narrowed to what Landlock's port rules see, UDP refused
// where Landlock cannot filter it by port (below ABI 10) unless the policy
// admits DNS, and unix sockets refused where Landlock cannot judge which
// one a connect reaches (below ABI 9).
func SeccompOptions(r *Rules, abi int) seccomp.Options {
	return seccomp.Options{
		StrictInet: true,
		AllowUDP:   r.AllowUDP || r.Egress || abi >= 10,
		DenyUnix:   abi < 9,
	}
}

// HasSocketFilter reports whether this build installs the seccomp socket
// filter (amd64 and arm64).
func HasSocketFilter() bool { return seccomp.Available() }

// Build makes the kernel ruleset for r at the given ABI without enforcing
// it, for a launcher that builds it with privilege (every rule's path must
// be reachable) and enforces it in a less privileged child, which adds its
// own /proc/PID first (AddOwnProc).
func Build(r *Rules, abi int) (fd int, flags uint32, err error) {
	return ruleset(r, abi, os.Stat)
}

// AddOwnProc adds the calling process's /proc/PID (read) to the ruleset
// fd: after execve the server keeps this pid.
func AddOwnProc(fd int) error {
	p := selfProc()
	pfd, err := unix.Open(p.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("landlock rule %s: %w", p.Path, err)
	}
	defer unix.Close(pfd)
	attr := llsys.PathBeneathAttr{AllowedAccess: uint64(fsRead), ParentFd: pfd}
	if err := llsys.LandlockAddPathBeneathRule(fd, &attr, 0); err != nil {
		return fmt.Errorf("landlock rule %s: %w", p.Path, err)
	}
	return nil
}

// RestrictSelf enforces the ruleset fd on the calling thread (which must
// be locked, with no_new_privs set) and installs the seccomp filter for r.
func RestrictSelf(fd int, flags uint32, r *Rules, abi int) error {
	memfd := memfdRule()
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return socketFilter(r, abi, memfd)
}

// memfdRule reports whether the seccomp filter must refuse executable
// memfds itself: Landlock does not judge files on the kernel's internal
// mounts, so a memfd the server fills and runs (through /proc/self/fd or
// execveat) would be a program exec.allow does not name, unless the kernel
// makes every memfd of the server's pid namespace non-executable
// (vm.memfd_noexec=2, which the launcher's stage 1 sets where it can).
// Read before the domain is enforced: it hides /proc/sys.
func memfdRule() bool { return !seccomp.KernelMemfdNoExec() }

// KernelABI is the real probe: landlock_create_ruleset(NULL, 0,
// LANDLOCK_CREATE_RULESET_VERSION).
func KernelABI() (int, error) {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		switch {
		case errors.Is(err, syscall.ENOSYS):
			return 0, fmt.Errorf("landlock_create_ruleset: %w (kernel built without CONFIG_SECURITY_LANDLOCK, or a seccomp filter blocks it)", err)
		case errors.Is(err, syscall.EOPNOTSUPP):
			return 0, fmt.Errorf("landlock_create_ruleset: %w (Landlock is built in but not enabled: add landlock to lsm= on the kernel command line)", err)
		}
		return 0, fmt.Errorf("landlock_create_ruleset: %w", err)
	}
	return v, nil
}
