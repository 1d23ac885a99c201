//go:build linux

package seccomp

import "golang.org/x/sys/unix"

const (
	nativeArch = unix.AUDIT_ARCH_X86_64
	// x32Bit marks x32 system calls, which share the x86-64 audit arch.
	x32Bit = 0x40000000
)
