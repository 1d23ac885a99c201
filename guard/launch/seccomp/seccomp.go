//go:build linux

// Package seccomp builds and installs the seccomp filter every guarded
// server runs under, whichever L3 backend confines it: the system calls no
// MCP server needs are refused outright (Denied), and socket(2) is judged
// by family and type, since neither Landlock nor the kernel's DAC looks at
// what kind of socket a process makes.
//
// The filter is classic BPF, assembled here with forward jumps to labels.
// It is installed on the calling thread only (no TSYNC): the launcher puts
// it on the thread that then calls execve, and the server inherits it.
package seccomp

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Whatever the options: packet sockets and raw IPv4/IPv6 sockets are
// refused (EACCES), since with them a process forges any packet past every
// connect hook; socket families other than unix, IPv4, IPv6 and
// NETLINK_ROUTE get EAFNOSUPPORT (AF_VSOCK reaches the VM host whatever the
// network namespace; NETLINK_USERSOCK and the other netlink families talk
// to host daemons and kernel subsystems), and so do socketpair families
// other than unix; system calls of a foreign ABI (i386's socketcall, x32)
// get EPERM, since their arguments could not be checked.

// Entry is one system call the filter refuses.
type Entry struct {
	Name  string
	Nr    uint32
	Errno unix.Errno
	// Why it is refused, for docs/l3.md and test names.
	Why string
}

// Denied lists the refused system calls (deny.go): the documented list.
func Denied() []Entry { return denied() }

// modeArg is a call that sets a file mode, and the argument that holds it.
// A mode with the setuid or setgid bit gets EPERM: when the server runs as
// a root without capabilities, a setuid-root program it left in the
// workspace would give root to whoever runs it later; no MCP server needs
// one whatever its user.
type modeArg struct {
	Name string
	Nr   uint32
	Arg  int
	// Flags is the argument with open flags, or -1: the mode is only
	// meaningful (and only checked) with O_CREAT or O_TMPFILE, since a
	// caller may leave garbage there otherwise.
	Flags int
}

// selfCall sets a limit, a priority or a CPU set of the process it names,
// in argument Pid (0: the caller; for setpriority and ioprio_set, with
// argument Which equal to Self, else Which is -1). A server may change its
// own only: under a non-root proxy (no pid namespace) another pid is the
// user's shell, editor or the proxy itself, whose limits it could lower
// to nothing (prlimit64's RLIMIT_NOFILE, RLIMIT_CPU) and whose priority
// it could drop; PRIO_PGRP and PRIO_USER reach a group or every process
// of the user. A thread id of its own is refused as well (the filter
// cannot tell it from another process's pid); programs treat these calls
// as best effort.
type selfCall struct {
	Name       string
	Nr         uint32
	Pid, Which int
	Self       uint32
}

// SelfOnlyCalls names the calls that may only name the caller (docs).
func SelfOnlyCalls() []string {
	var out []string
	for _, c := range selfOnly() {
		out = append(out, c.Name)
	}
	return out
}

func selfOnly() []selfCall {
	const ioprioWhoProcess = 1
	return []selfCall{
		{"prlimit64", unix.SYS_PRLIMIT64, 0, -1, 0},
		{"setpriority", unix.SYS_SETPRIORITY, 1, 0, unix.PRIO_PROCESS},
		{"ioprio_set", unix.SYS_IOPRIO_SET, 1, 0, ioprioWhoProcess},
		{"sched_setaffinity", unix.SYS_SCHED_SETAFFINITY, 0, -1, 0},
		{"sched_setscheduler", unix.SYS_SCHED_SETSCHEDULER, 0, -1, 0},
		{"sched_setparam", unix.SYS_SCHED_SETPARAM, 0, -1, 0},
		{"sched_setattr", unix.SYS_SCHED_SETATTR, 0, -1, 0},
	}
}

// createFlags are O_CREAT and O_TMPFILE's own bit (without O_DIRECTORY).
const createFlags = unix.O_CREAT | (unix.O_TMPFILE &^ unix.O_DIRECTORY)

// ModeCalls names the calls whose mode argument is checked (docs).
func ModeCalls() []string {
	var out []string
	for _, m := range modeArgs() {
		out = append(out, m.Name)
	}
	return out
}

// setIDBits are S_ISUID | S_ISGID.
const setIDBits = 0o6000

// nsFlags are clone(2)'s namespace flags: a server may not make new
// namespaces (a user namespace brings capabilities over its own mounts).
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

type asm struct {
	prog   []unix.SockFilter
	labels map[string]int
	fixups []fixup
}

type fixup struct {
	at     int
	jt, jf string
}

func (b *asm) label(name string) { b.labels[name] = len(b.prog) }

func (b *asm) stmt(code uint16, k uint32) {
	b.prog = append(b.prog, unix.SockFilter{Code: code, K: k})
}

func (b *asm) jump(op uint16, k uint32, jt, jf string) {
	b.fixups = append(b.fixups, fixup{at: len(b.prog), jt: jt, jf: jf})
	b.prog = append(b.prog, unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k})
}

// jeq jumps to jt when A == k, else to jf ("" is the next instruction).
func (b *asm) jeq(k uint32, jt, jf string) { b.jump(unix.BPF_JEQ, k, jt, jf) }

// jge jumps to jt when A >= k, else to jf.
func (b *asm) jge(k uint32, jt, jf string) { b.jump(unix.BPF_JGE, k, jt, jf) }

// jset jumps to jt when A & k != 0, else to jf.
func (b *asm) jset(k uint32, jt, jf string) { b.jump(unix.BPF_JSET, k, jt, jf) }

func (b *asm) resolve() ([]unix.SockFilter, error) {
	for _, f := range b.fixups {
		for _, j := range []struct {
			label string
			dst   *uint8
		}{{f.jt, &b.prog[f.at].Jt}, {f.jf, &b.prog[f.at].Jf}} {
			if j.label == "" {
				continue
			}
			to, ok := b.labels[j.label]
			off := to - f.at - 1
			if !ok || off < 0 || off > 255 {
				return nil, fmt.Errorf("seccomp: bad jump to %q", j.label)
			}
			*j.dst = uint8(off)
		}
	}
	return b.prog, nil
}

// seccomp_data offsets: nr, arch, instruction pointer, args[6] (the low
// 32 bits of each argument on little-endian machines; the kernel truncates
// socket's int arguments to them).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 24
	offArg2 = 32
)

const (
	ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	and = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	ret = unix.BPF_RET | unix.BPF_K
)

func errno(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }

// Program builds the filter for the native architecture.
func Program(o Options) ([]unix.SockFilter, error) {
	if nativeArch == 0 {
		return nil, ErrNoFilter
	}
	b := &asm{labels: map[string]int{}}
	b.stmt(ld, offArch)
	b.jeq(nativeArch, "", "foreign")
	b.stmt(ld, offNr)
	if x32Bit != 0 {
		b.jge(x32Bit, "foreign", "")
	}
	for _, e := range denied() {
		// One return per entry: each keeps its own errno.
		b.jeq(e.Nr, "", "next-"+e.Name)
		b.stmt(ret, errno(e.Errno))
		b.label("next-" + e.Name)
	}
	for _, m := range modeArgs() {
		b.jeq(m.Nr, "mode-"+m.Name, "")
	}
	for _, c := range selfOnly() {
		b.jeq(c.Nr, "self-"+c.Name, "")
	}
	b.jeq(unix.SYS_CLONE, "clone", "")
	if o.MemfdNoExec {
		b.jeq(unix.SYS_MEMFD_CREATE, "memfd", "")
	}
	b.jeq(unix.SYS_SOCKETPAIR, "socketpair", "")
	b.jeq(unix.SYS_SOCKET, "socket", "allow")

	for _, m := range modeArgs() {
		b.label("mode-" + m.Name)
		if m.Flags >= 0 {
			b.stmt(ld, offArg0+8*uint32(m.Flags))
			b.jset(createFlags, "", "allow")
		}
		b.stmt(ld, offArg0+8*uint32(m.Arg))
		b.jset(setIDBits, "deny-perm", "allow")
	}

	for _, c := range selfOnly() {
		b.label("self-" + c.Name)
		if c.Which >= 0 {
			b.stmt(ld, offArg0+8*uint32(c.Which))
			b.jeq(c.Self, "", "deny-perm")
		}
		b.stmt(ld, offArg0+8*uint32(c.Pid))
		b.jeq(0, "allow", "deny-perm")
	}

	b.label("clone")
	b.stmt(ld, offArg0)
	b.jset(nsFlags, "deny-perm", "allow")

	if o.MemfdNoExec {
		// Sealed non-executable (mode 0666, F_SEAL_EXEC) or nothing;
		// MFD_EXEC together with it is the kernel's EINVAL.
		b.label("memfd")
		b.stmt(ld, offArg1)
		b.jset(unix.MFD_NOEXEC_SEAL, "allow", "nosys")
	}

	b.sockets(o)

	b.label("allow")
	b.stmt(ret, unix.SECCOMP_RET_ALLOW)
	b.label("deny")
	b.stmt(ret, errno(unix.EACCES))
	b.label("noproto")
	b.stmt(ret, errno(unix.EPROTONOSUPPORT))
	b.label("nofamily")
	b.stmt(ret, errno(unix.EAFNOSUPPORT))
	b.label("nosys")
	b.stmt(ret, errno(unix.ENOSYS))
	b.label("deny-perm")
	b.stmt(ret, errno(unix.EPERM))
	b.label("foreign")
	b.stmt(ret, errno(unix.EPERM))
	return b.resolve()
}

// sockets judges socket(2) and socketpair(2) by family, type and protocol
// (the labels "socketpair" and "socket").
func (b *asm) sockets(o Options) {
	// socketpair makes a connected pair of the caller's own: only unix
	// pairs exist for what a server needs.
	b.label("socketpair")
	b.stmt(ld, offArg0)
	b.jeq(unix.AF_UNIX, "allow", "nofamily")

	// socket: the families a server needs and nothing else (AF_VSOCK
	// ignores network namespaces, AF_PACKET and the rest forge or reach
	// what no connect hook sees). AF_PACKET keeps its EACCES; the others
	// get EAFNOSUPPORT, as on a kernel built without them.
	b.label("socket")
	b.stmt(ld, offArg0)
	b.jeq(unix.AF_PACKET, "deny", "")
	if o.DenyUnix {
		b.jeq(unix.AF_UNIX, "deny", "")
	} else {
		b.jeq(unix.AF_UNIX, "allow", "")
	}
	b.jeq(unix.AF_NETLINK, "netlink", "")
	b.jeq(unix.AF_INET, "inet", "")
	b.jeq(unix.AF_INET6, "inet", "nofamily")

	// netlink: NETLINK_ROUTE only (getifaddrs, which Go, libuv and glibc
	// use to list interfaces); the other families talk to host daemons
	// (NETLINK_USERSOCK), audit, udev or the kernel's subsystems.
	b.label("netlink")
	b.stmt(ld, offArg2)
	b.jeq(unix.NETLINK_ROUTE, "allow", "nofamily")

	b.label("inet")
	b.stmt(ld, offArg1)
	b.stmt(and, 0xf) // SOCK_TYPE_MASK: drop SOCK_NONBLOCK, SOCK_CLOEXEC
	b.jeq(unix.SOCK_RAW, "deny", "")
	b.jeq(unix.SOCK_PACKET, "deny", "")
	if !o.StrictInet {
		b.stmt(ret, unix.SECCOMP_RET_ALLOW)
	}
	b.jeq(unix.SOCK_STREAM, "stream", "")
	b.jeq(unix.SOCK_DGRAM, "dgram", "deny")

	b.label("stream")
	b.stmt(ld, offArg2)
	b.jeq(0, "allow", "")
	b.jeq(unix.IPPROTO_TCP, "allow", "")
	b.jeq(unix.IPPROTO_MPTCP, "noproto", "deny")

	b.label("dgram")
	if !o.AllowUDP {
		b.stmt(ret, errno(unix.EACCES))
	}
	b.stmt(ld, offArg2)
	b.jeq(0, "allow", "")
	b.jeq(unix.IPPROTO_UDP, "allow", "deny")
}

// Install puts the filter on the calling thread. no_new_privs must already
// be set (or the thread hold CAP_SYS_ADMIN).
func Install(o Options) error {
	prog, err := Program(o)
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("install seccomp filter: %w", err)
	}
	return nil
}

// memfdNoExecSysctl is the pid-namespaced switch (Linux 6.3+) that makes
// memfds non-executable; 2 enforces it for every memfd_create of the
// namespace and of the namespaces below it, which cannot lower it.
const memfdNoExecSysctl = "/proc/sys/vm/memfd_noexec"

// KernelMemfdNoExec reports whether the kernel makes every memfd the
// calling process's pid namespace creates non-executable
// (vm.memfd_noexec=2, as the launcher's stage 1 sets it; Linux 6.3+).
// Read it before a Landlock domain hides /proc/sys.
func KernelMemfdNoExec() bool {
	b, err := os.ReadFile(memfdNoExecSysctl)
	return err == nil && strings.TrimSpace(string(b)) == "2"
}

// EnforceMemfdNoExec sets vm.memfd_noexec=2 for the calling process's pid
// namespace (its pid 1, with CAP_SYS_ADMIN over it). Kernels before 6.3
// have no such switch (fs.ErrNotExist); KernelMemfdNoExec tells the
// filter what holds either way.
func EnforceMemfdNoExec() error {
	// Not os.WriteFile: its O_CREAT, where the switch does not exist,
	// asks to create a file in /proc/sys, which the BPF backend (stage 1
	// is already guarded) refused and reported as the server's denial.
	f, err := os.OpenFile(memfdNoExecSysctl, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("2")
	return errors.Join(err, f.Close())
}

// Available reports whether this build has the filter (amd64 and arm64).
func Available() bool { return nativeArch != 0 }
