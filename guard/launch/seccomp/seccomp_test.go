//go:build linux

package seccomp_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard/launch/seccomp"
)

// helperEnv turns the test binary into a helper that (optionally) installs
// the filter, makes one system call and prints its errno.
const helperEnv = "MCPGUARD_SECCOMP_HELPER"

func TestMain(m *testing.M) {
	if v := os.Getenv(helperEnv); v != "" {
		os.Exit(helper(v))
	}
	os.Exit(m.Run())
}

// helper: "filter|memfd|none:NR:ARG0,ARG1,ARG2" ("memfd": the filter with
// MemfdNoExec), or "filter|none:modes:DIR".
func helper(v string) int {
	if mode, dir, ok := strings.Cut(v, ":modes:"); ok {
		return modesHelper(mode == "filter", dir)
	}
	parts := strings.Split(v, ":")
	nr, _ := strconv.ParseUint(parts[1], 10, 64)
	var a [3]uintptr
	for i, s := range strings.Split(parts[2], ",") {
		n, _ := strconv.ParseUint(s, 10, 64)
		a[i] = uintptr(n)
	}
	runtime.LockOSThread()
	if parts[0] == "filter" || parts[0] == "memfd" {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			fmt.Println("setup", err)
			return 1
		}
		if err := seccomp.Install(seccomp.Options{MemfdNoExec: parts[0] == "memfd"}); err != nil {
			fmt.Println("setup", err)
			return 1
		}
	}
	// Arguments past the third are zero, never what a register held.
	r, _, e := unix.RawSyscall6(uintptr(nr), a[0], a[1], a[2], 0, 0, 0)
	if e == 0 && nr == unix.SYS_SOCKET {
		unix.Close(int(r))
	}
	fmt.Println(int(e))
	return 0
}

func errnoOf(t *testing.T, mode string, nr uint32, args string) unix.Errno {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d:%s", helperEnv, mode, nr, args))
	out, err := cmd.Output()
	require.NoError(t, err, "helper: %s", out)
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(t, err, "helper output %q", out)
	return unix.Errno(n)
}

// argsFor are harmless arguments: without the filter each call fails
// (bad pointer, bad id) or does nothing lasting, so the helper can make it.
func argsFor(name string) string {
	switch name {
	case "keyctl":
		return "4294967295,0,0" // KEYCTL_? unknown command
	case "ptrace":
		return "4294967295,0,0" // unknown request
	case "clone3":
		return "0,0,0" // NULL args
	case "bpf":
		return "4294967295,0,0"
	case "kexec_load":
		// More segments than the kernel takes: EINVAL, where zero
		// segments would unload a loaded kexec image.
		return "0,4294967295,0"
	case "kexec_file_load", "finit_module":
		return "4294967295,4294967295,0" // bad file descriptors
	}
	return "0,0,0"
}

// TestDenied: each documented entry, called under the filter by a helper
// process, fails with the entry's errno. A control run without the filter
// shows where the kernel alone would answer otherwise (the filter, not
// the arguments, made the difference); where the kernel gives the same
// errno without the filter (lockdown answers kexec with EPERM too), that
// is logged and the filtered run alone is the evidence.
func TestDenied(t *testing.T) {
	if !seccomp.Available() {
		t.Skip("no seccomp filter on " + runtime.GOARCH)
	}
	for _, e := range seccomp.Denied() {
		t.Run(e.Name, func(t *testing.T) {
			args := argsFor(e.Name)
			got := errnoOf(t, "filter", e.Nr, args)
			assert.Equal(t, e.Errno, got, "%s under the filter", e.Name)
			if ctl := errnoOf(t, "none", e.Nr, args); ctl == e.Errno {
				t.Logf("%s: the kernel alone also answers %v here", e.Name, ctl)
			} else {
				assert.NotEqual(t, e.Errno, ctl)
			}
		})
	}
}

// TestSockets: packet and raw sockets are refused by family and type; TCP,
// UDP and unix sockets are not (their destinations are the LSM's to judge).
func TestSockets(t *testing.T) {
	if !seccomp.Available() {
		t.Skip("no seccomp filter on " + runtime.GOARCH)
	}
	for _, tc := range []struct {
		name             string
		family, typ, pro int
		want             unix.Errno
	}{
		{"packet", unix.AF_PACKET, unix.SOCK_RAW, 0, unix.EACCES},
		{"packet-dgram", unix.AF_PACKET, unix.SOCK_DGRAM, 0, unix.EACCES},
		{"raw4", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP, unix.EACCES},
		{"raw6", unix.AF_INET6, unix.SOCK_RAW | unix.SOCK_CLOEXEC, unix.IPPROTO_ICMPV6, unix.EACCES},
		{"sock-packet", unix.AF_INET, unix.SOCK_PACKET, 0, unix.EACCES},
		{"tcp", unix.AF_INET, unix.SOCK_STREAM, 0, 0},
		{"udp", unix.AF_INET, unix.SOCK_DGRAM, 0, 0},
		{"unix", unix.AF_UNIX, unix.SOCK_STREAM, 0, 0},
		{"netlink-route", unix.AF_NETLINK, unix.SOCK_RAW | unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE, 0},
		{"netlink-usersock", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_USERSOCK, unix.EAFNOSUPPORT},
		{"netlink-audit", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT, unix.EAFNOSUPPORT},
		{"netlink-uevent", unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_KOBJECT_UEVENT, unix.EAFNOSUPPORT},
		{"vsock", unix.AF_VSOCK, unix.SOCK_STREAM, 0, unix.EAFNOSUPPORT},
		{"alg", unix.AF_ALG, unix.SOCK_SEQPACKET, 0, unix.EAFNOSUPPORT},
		{"tipc", unix.AF_TIPC, unix.SOCK_RDM, 0, unix.EAFNOSUPPORT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := fmt.Sprintf("%d,%d,%d", tc.family, tc.typ, tc.pro)
			assert.Equal(t, tc.want, errnoOf(t, "filter", unix.SYS_SOCKET, args))
			if tc.want != 0 && os.Geteuid() == 0 {
				// As root the kernel alone would have made it, or
				// refused it otherwise (a family this kernel lacks).
				ctl := errnoOf(t, "none", unix.SYS_SOCKET, args)
				if ctl == tc.want {
					t.Logf("%s: the kernel alone also answers %v here", tc.name, ctl)
				} else {
					assert.NotEqual(t, tc.want, ctl)
				}
			}
		})
	}
}

// TestSocketpair: only unix pairs.
func TestSocketpair(t *testing.T) {
	if !seccomp.Available() {
		t.Skip("no seccomp filter on " + runtime.GOARCH)
	}
	for _, tc := range []struct {
		name   string
		family int
		want   unix.Errno
	}{
		// A bad pointer (0) makes the allowed call fail with EFAULT after
		// the filter admitted it; the refused one never gets that far.
		{"unix", unix.AF_UNIX, unix.EFAULT},
		{"inet", unix.AF_INET, unix.EAFNOSUPPORT},
		{"vsock", unix.AF_VSOCK, unix.EAFNOSUPPORT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := fmt.Sprintf("%d,%d,0", tc.family, unix.SOCK_STREAM)
			assert.Equal(t, tc.want, errnoOf(t, "filter", unix.SYS_SOCKETPAIR, args))
		})
	}
}

// TestCloneNamespaces: clone with a namespace flag is refused; a plain
// fork-like clone is not (the helper's parent would see a child, so only
// the refused case is made).
func TestCloneNamespaces(t *testing.T) {
	if !seccomp.Available() {
		t.Skip("no seccomp filter on " + runtime.GOARCH)
	}
	args := fmt.Sprintf("%d,0,0", unix.CLONE_NEWUSER|unix.CLONE_NEWNS|uint32(unix.SIGCHLD))
	assert.Equal(t, unix.EPERM, errnoOf(t, "filter", unix.SYS_CLONE, args))
}

// TestMemfdNoExec: with MemfdNoExec, memfd_create reaches the kernel only
// with MFD_NOEXEC_SEAL (a non-executable, sealed memfd); without it, or
// with MFD_EXEC, the filter answers ENOSYS. A bad name pointer (0) makes
// an admitted call fail with EFAULT, before the kernel makes anything;
// unfiltered, or under the filter without the option, every form gets
// that far.
func TestMemfdNoExec(t *testing.T) {
	if !seccomp.Available() {
		t.Skip("no seccomp filter on " + runtime.GOARCH)
	}
	for _, tc := range []struct {
		name  string
		flags int
		want  unix.Errno
	}{
		{"unflagged", 0, unix.ENOSYS},
		{"cloexec", unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING, unix.ENOSYS},
		{"exec", unix.MFD_EXEC, unix.ENOSYS},
		{"hugetlb", unix.MFD_HUGETLB, unix.ENOSYS},
		{"noexec-seal", unix.MFD_NOEXEC_SEAL | unix.MFD_CLOEXEC, unix.EFAULT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := fmt.Sprintf("0,%d,0", tc.flags)
			assert.Equal(t, tc.want, errnoOf(t, "memfd", unix.SYS_MEMFD_CREATE, args))
			for _, mode := range []string{"none", "filter"} {
				ctl := errnoOf(t, mode, unix.SYS_MEMFD_CREATE, args)
				assert.NotEqual(t, unix.ENOSYS, ctl, "%s: the kernel (%s) answered ENOSYS itself", tc.name, mode)
			}
		})
	}
}

// modesHelper sets file modes under dir in every way the filter checks and
// prints each call's errno.
func modesHelper(filter bool, dir string) int {
	runtime.LockOSThread()
	if filter {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return 1
		}
		if err := seccomp.Install(seccomp.Options{}); err != nil {
			return 1
		}
	}
	p := func(n string) string { return dir + "/" + n }
	report := func(name string, err error) {
		e := 0
		if errno, ok := err.(unix.Errno); ok {
			e = int(errno)
		} else if err != nil {
			e = -1
		}
		fmt.Printf("%s %d\n", name, e)
	}
	report("fchmodat-suid", unix.Fchmodat(unix.AT_FDCWD, p("a"), 0o4755, 0))
	fd, err := unix.Open(p("b"), unix.O_RDONLY, 0)
	if err == nil {
		report("fchmod-sgid", unix.Fchmod(fd, 0o2755))
		unix.Close(fd)
	}
	fd, err = unix.Openat(unix.AT_FDCWD, p("c"), unix.O_CREAT|unix.O_WRONLY, 0o4755)
	report("openat-creat-suid", err)
	if err == nil {
		unix.Close(fd)
	}
	report("mknodat-fifo-suid", unix.Mknodat(unix.AT_FDCWD, p("d"), unix.S_IFIFO|0o4644, 0))
	// Allowed: plain modes, and a mode argument that means nothing
	// without O_CREAT.
	report("fchmodat-plain", unix.Fchmodat(unix.AT_FDCWD, p("e"), 0o755, 0))
	fd, err = unix.Openat(unix.AT_FDCWD, p("e"), unix.O_RDONLY, 0o4755)
	report("openat-read-garbage-mode", err)
	if err == nil {
		unix.Close(fd)
	}
	fd, err = unix.Openat(unix.AT_FDCWD, p("f"), unix.O_CREAT|unix.O_WRONLY, 0o644)
	report("openat-creat-plain", err)
	if err == nil {
		unix.Close(fd)
	}
	return 0
}

// TestSetIDModes: under the filter no call leaves a setuid or setgid file;
// plain modes still work. Without the filter (the control) the same calls
// do set the bits, so the filter made the difference.
func TestSetIDModes(t *testing.T) {
	if !seccomp.Available() {
		t.Skip("no seccomp filter on " + runtime.GOARCH)
	}
	run := func(mode string) (string, map[string]os.FileMode) {
		dir := t.TempDir()
		for _, n := range []string{"a", "b", "e"} {
			require.NoError(t, os.WriteFile(dir+"/"+n, nil, 0o644))
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:modes:%s", helperEnv, mode, dir))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		require.NoError(t, err)
		modes := map[string]os.FileMode{}
		for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
			if fi, err := os.Lstat(dir + "/" + n); err == nil {
				modes[n] = fi.Mode()
			}
		}
		return string(out), modes
	}
	out, modes := run("filter")
	t.Logf("filtered:\n%s", out)
	for n, m := range modes {
		assert.Zero(t, m&(os.ModeSetuid|os.ModeSetgid), "%s has mode %v", n, m)
	}
	for _, line := range []string{"fchmodat-suid 1", "fchmod-sgid 1", "openat-creat-suid 1", "mknodat-fifo-suid 1",
		"fchmodat-plain 0", "openat-read-garbage-mode 0", "openat-creat-plain 0"} {
		assert.Contains(t, out, line+"\n")
	}
	assert.Contains(t, modes, "f", "a plain O_CREAT open made its file")
	if os.Geteuid() == 0 {
		_, ctl := run("none")
		assert.NotZero(t, ctl["a"]&os.ModeSetuid, "control: fchmodat sets setuid")
		assert.NotZero(t, ctl["c"]&os.ModeSetuid, "control: openat(O_CREAT) sets setuid")
	}
}

// TestSelfOnly: the calls that set a limit, a priority or a CPU set are
// refused when they name another process (here the test process, the
// helper's parent, which the control run shows the kernel alone lets the
// helper change), and reach the kernel when they name the caller.
func TestSelfOnly(t *testing.T) {
	if !seccomp.Available() {
		t.Skip("no seccomp filter on " + runtime.GOARCH)
	}
	parent := strconv.Itoa(os.Getpid())
	// The nice value this process has (the raw call returns 20 - nice),
	// as the 32-bit int the kernel reads.
	raw, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	require.NoError(t, err)
	nice := strconv.FormatUint(uint64(uint32(int32(20-raw))), 10)
	for _, tc := range []struct {
		name        string
		nr          uint32
		other, self string
		control     bool // the control run changes nothing lasting
	}{
		// prlimit64(pid, RLIMIT_CORE, NULL, NULL): reads nothing, sets
		// nothing.
		{"prlimit64", unix.SYS_PRLIMIT64, parent + ",4,0", "0,4,0", true},
		// setpriority(PRIO_PROCESS, pid, nice): the value it has.
		{"setpriority", unix.SYS_SETPRIORITY, "0," + parent + "," + nice, "0,0," + nice, true},
		// PRIO_USER, 0: every process of the caller's user (no control:
		// it would renice them all).
		{"setpriority PRIO_USER", unix.SYS_SETPRIORITY, "2,0," + nice, "0,0," + nice, false},
		// sched_setparam(pid, NULL): EINVAL from the kernel.
		{"sched_setparam", unix.SYS_SCHED_SETPARAM, parent + ",0,0", "0,0,0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, unix.EPERM, errnoOf(t, "filter", tc.nr, tc.other))
			if tc.control {
				assert.NotEqual(t, unix.EPERM, errnoOf(t, "none", tc.nr, tc.other), "control: the kernel alone admits it")
			}
			assert.NotEqual(t, unix.EPERM, errnoOf(t, "filter", tc.nr, tc.self), "the caller's own")
		})
	}
	assert.ElementsMatch(t, []string{"prlimit64", "setpriority", "ioprio_set", "sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr"}, seccomp.SelfOnlyCalls())
}
