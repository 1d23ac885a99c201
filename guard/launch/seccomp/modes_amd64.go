//go:build linux

package seccomp

import "golang.org/x/sys/unix"

// modeArgs lists the calls that set a file mode and which argument holds it.
func modeArgs() []modeArg {
	return append(commonModeArgs(),
		modeArg{"chmod", unix.SYS_CHMOD, 1, -1},
		modeArg{"open", unix.SYS_OPEN, 2, 1},
		modeArg{"creat", unix.SYS_CREAT, 1, -1},
		modeArg{"mknod", unix.SYS_MKNOD, 1, -1},
	)
}
