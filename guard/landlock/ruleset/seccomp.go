//go:build linux

package ruleset

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The socket filter covers what Landlock's network rules do not see:
// Landlock checks bind and connect of plain TCP (and of UDP from ABI 10
// on), nothing else. So the wrapper also installs a small seccomp filter
// on socket(2), inherited like the Landlock domain:
//
//   - IPv4/IPv6 stream sockets must be plain TCP (protocol 0 or 6).
//     Multipath TCP (protocol 262) gets EPROTONOSUPPORT, as on a kernel
//     without MPTCP, so programs fall back to TCP, which Landlock checks.
//     SCTP and other stream protocols get EACCES.
//   - IPv4/IPv6 datagram sockets: allowed when Landlock filters UDP by port
//     (ABI 10+) or when the policy admits DNS (a port-53 rule, see
//     Rules.AllowUDP); denied (EACCES) otherwise, so UDP exfiltration is
//     closed on older ABIs too.
//   - Raw and packet sockets (root could forge any packet): EACCES.
//   - Other families (unix, netlink) are left to Landlock's scoping.
//   - System calls of a foreign ABI (i386's socketcall, x32) get EPERM:
//     their arguments could not be checked.

// errNoFilter is returned where the filter is not implemented (GOARCH).
var errNoFilter = errors.New("no seccomp socket filter for this architecture")

// bpf assembles a classic BPF program with forward jumps to labels.
type bpf struct {
	prog   []unix.SockFilter
	labels map[string]int
	fixups []fixup
}

type fixup struct {
	at        int
	jt, jf, k string
}

func (b *bpf) label(name string) { b.labels[name] = len(b.prog) }

func (b *bpf) stmt(code uint16, k uint32) {
	b.prog = append(b.prog, unix.SockFilter{Code: code, K: k})
}

// jeq jumps to jt when A == k, else to jf ("" is the next instruction).
func (b *bpf) jeq(k uint32, jt, jf string) {
	b.fixups = append(b.fixups, fixup{at: len(b.prog), jt: jt, jf: jf})
	b.prog = append(b.prog, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k})
}

// jge jumps to jt when A >= k, else to jf.
func (b *bpf) jge(k uint32, jt, jf string) {
	b.fixups = append(b.fixups, fixup{at: len(b.prog), jt: jt, jf: jf})
	b.prog = append(b.prog, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, K: k})
}

func (b *bpf) resolve() ([]unix.SockFilter, error) {
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
				return nil, fmt.Errorf("bpf: bad jump to %q", j.label)
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

// filterProgram builds the filter for the native architecture.
func filterProgram(allowUDP bool) ([]unix.SockFilter, error) {
	if nativeArch == 0 {
		return nil, errNoFilter
	}
	b := &bpf{labels: map[string]int{}}
	b.stmt(ld, offArch)
	b.jeq(nativeArch, "", "foreign")
	b.stmt(ld, offNr)
	if x32Bit != 0 {
		b.jge(x32Bit, "foreign", "")
	}
	b.jeq(unix.SYS_SOCKET, "", "allow")
	b.stmt(ld, offArg0)
	b.jeq(unix.AF_PACKET, "deny", "")
	b.jeq(unix.AF_INET, "inet", "")
	b.jeq(unix.AF_INET6, "inet", "allow")

	b.label("inet")
	b.stmt(ld, offArg1)
	b.stmt(and, 0xf) // SOCK_TYPE_MASK: drop SOCK_NONBLOCK, SOCK_CLOEXEC
	b.jeq(unix.SOCK_STREAM, "stream", "")
	b.jeq(unix.SOCK_DGRAM, "dgram", "deny")

	b.label("stream")
	b.stmt(ld, offArg2)
	b.jeq(0, "allow", "")
	b.jeq(unix.IPPROTO_TCP, "allow", "")
	b.jeq(unix.IPPROTO_MPTCP, "noproto", "deny")

	b.label("dgram")
	if !allowUDP {
		b.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EACCES))
	}
	b.stmt(ld, offArg2)
	b.jeq(0, "allow", "")
	b.jeq(unix.IPPROTO_UDP, "allow", "deny")

	b.label("allow")
	b.stmt(ret, unix.SECCOMP_RET_ALLOW)
	b.label("deny")
	b.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EACCES))
	b.label("noproto")
	b.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPROTONOSUPPORT))
	b.label("foreign")
	b.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	return b.resolve()
}

// installSocketFilter puts the filter on the calling thread (no TSYNC:
// like the Landlock domain, it reaches the server through this thread's
// execve). no_new_privs must already be set.
func installSocketFilter(allowUDP bool) error {
	prog, err := filterProgram(allowUDP)
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp socket filter: %w", err)
	}
	return nil
}
