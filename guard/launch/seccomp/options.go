package seccomp

import "errors"

// ErrNoFilter is returned where the filter is not implemented (GOARCH).
var ErrNoFilter = errors.New("no seccomp filter for this architecture")

// Options choose how socket(2) is judged.
type Options struct {
	// StrictInet narrows IPv4/IPv6 to what Landlock's port rules can see:
	// stream sockets must be plain TCP (MPTCP gets EPROTONOSUPPORT, so
	// programs fall back to TCP; SCTP gets EACCES), and datagram sockets
	// are refused unless AllowUDP. The BPF backend judges every inet
	// connect itself and leaves this off.
	StrictInet bool
	// AllowUDP admits UDP datagram sockets under StrictInet (Landlock
	// filters UDP by port from ABI 10, or the policy admits DNS).
	AllowUDP bool
	// DenyUnix refuses socket(AF_UNIX) (socketpair stays allowed): where
	// the backend cannot judge which unix socket a connect reaches
	// (Landlock below ABI 9 sees neither pathname nor abstract names), a
	// server that may not name one gets none.
	DenyUnix bool
	// MemfdNoExec admits memfd_create only with MFD_NOEXEC_SEAL (ENOSYS
	// otherwise, so that programs fall back as on a kernel without it):
	// a memfd lives on a kernel-internal mount, which Landlock does not
	// judge, so an executable one runs a program exec.allow does not
	// name. For the Landlock backend where the kernel does not already
	// make every memfd of the server's pid namespace non-executable
	// (vm.memfd_noexec=2; KernelMemfdNoExec).
	MemfdNoExec bool
}
