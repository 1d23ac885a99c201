//go:build linux && (amd64 || arm64)

package seccomp

import "golang.org/x/sys/unix"

// denied is the documented list (docs/l3.md, "seccomp"). io_uring gets
// ENOSYS, as on a kernel built without it, so that runtimes (libuv, tokio)
// fall back to plain system calls, which the LSM hooks see; the rest EPERM.
func denied() []Entry {
	return []Entry{
		{"io_uring_setup", unix.SYS_IO_URING_SETUP, unix.ENOSYS, "io_uring ops (IORING_OP_SOCKET, OPENAT) bypass the seccomp socket rules"},
		{"io_uring_enter", unix.SYS_IO_URING_ENTER, unix.ENOSYS, "io_uring"},
		{"io_uring_register", unix.SYS_IO_URING_REGISTER, unix.ENOSYS, "io_uring"},
		{"keyctl", unix.SYS_KEYCTL, unix.EPERM, "kernel keyrings hold other programs' secrets"},
		{"add_key", unix.SYS_ADD_KEY, unix.EPERM, "kernel keyrings"},
		{"request_key", unix.SYS_REQUEST_KEY, unix.EPERM, "kernel keyrings"},
		{"bpf", unix.SYS_BPF, unix.EPERM, "the guard's own maps and programs"},
		{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, unix.EPERM, "kernel and other processes' data"},
		{"mount", unix.SYS_MOUNT, unix.EPERM, "a bind mount moves a path's rules"},
		{"umount2", unix.SYS_UMOUNT2, unix.EPERM, "mount family"},
		{"move_mount", unix.SYS_MOVE_MOUNT, unix.EPERM, "mount family"},
		{"open_tree", unix.SYS_OPEN_TREE, unix.EPERM, "mount family"},
		{"fsopen", unix.SYS_FSOPEN, unix.EPERM, "mount family"},
		{"fsmount", unix.SYS_FSMOUNT, unix.EPERM, "mount family"},
		{"fsconfig", unix.SYS_FSCONFIG, unix.EPERM, "mount family"},
		{"fspick", unix.SYS_FSPICK, unix.EPERM, "mount family"},
		{"mount_setattr", unix.SYS_MOUNT_SETATTR, unix.EPERM, "mount family"},
		{"pivot_root", unix.SYS_PIVOT_ROOT, unix.EPERM, "mount family"},
		{"chroot", unix.SYS_CHROOT, unix.EPERM, "changes what paths name"},
		{"kexec_load", unix.SYS_KEXEC_LOAD, unix.EPERM, "replaces the kernel"},
		{"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD, unix.EPERM, "replaces the kernel"},
		{"init_module", unix.SYS_INIT_MODULE, unix.EPERM, "kernel code"},
		{"finit_module", unix.SYS_FINIT_MODULE, unix.EPERM, "kernel code"},
		{"delete_module", unix.SYS_DELETE_MODULE, unix.EPERM, "kernel code"},
		{"userfaultfd", unix.SYS_USERFAULTFD, unix.EPERM, "stalls the kernel mid-copy (race exploits)"},
		{"ptrace", unix.SYS_PTRACE, unix.EPERM, "another process's memory and syscalls"},
		{"process_vm_readv", unix.SYS_PROCESS_VM_READV, unix.EPERM, "another process's memory"},
		{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV, unix.EPERM, "another process's memory"},
		{"unshare", unix.SYS_UNSHARE, unix.EPERM, "new namespaces (a user namespace grants capabilities)"},
		{"setns", unix.SYS_SETNS, unix.EPERM, "joining other namespaces"},
		// A POSIX access ACL is a mode by another name: a minimal one is
		// folded into the mode (an execute bit set without chmod, which
		// the LSM hooks and the supervised write roots judge), an
		// extended one grants through its entries (red team 4). Nothing
		// a server does needs an extended attribute: EOPNOTSUPP, what a
		// file system without them answers, which cp -a, rsync -X and
		// Python's shutil.copy2 pass over.
		{"setxattr", unix.SYS_SETXATTR, unix.EOPNOTSUPP, "a POSIX ACL is a mode by another name (an execute bit without chmod)"},
		{"lsetxattr", unix.SYS_LSETXATTR, unix.EOPNOTSUPP, "extended attributes"},
		{"fsetxattr", unix.SYS_FSETXATTR, unix.EOPNOTSUPP, "extended attributes"},
		{"setxattrat", unix.SYS_SETXATTRAT, unix.EOPNOTSUPP, "extended attributes"},
		{"removexattr", unix.SYS_REMOVEXATTR, unix.EOPNOTSUPP, "removing an ACL changes the mode too"},
		{"lremovexattr", unix.SYS_LREMOVEXATTR, unix.EOPNOTSUPP, "extended attributes"},
		{"fremovexattr", unix.SYS_FREMOVEXATTR, unix.EOPNOTSUPP, "extended attributes"},
		{"removexattrat", unix.SYS_REMOVEXATTRAT, unix.EOPNOTSUPP, "extended attributes"},
		// clone3 takes its flags in a struct the filter cannot read:
		// ENOSYS makes glibc and others fall back to clone, whose flags
		// it checks.
		{"clone3", unix.SYS_CLONE3, unix.ENOSYS, "namespace flags hidden in a struct"},
		// openat2 takes its mode in a struct the filter cannot read;
		// programs fall back to openat, whose mode it checks.
		{"openat2", unix.SYS_OPENAT2, unix.ENOSYS, "file mode hidden in a struct"},
	}
}

func commonModeArgs() []modeArg {
	return []modeArg{
		{"fchmod", unix.SYS_FCHMOD, 1, -1},
		{"fchmodat", unix.SYS_FCHMODAT, 2, -1},
		{"fchmodat2", unix.SYS_FCHMODAT2, 2, -1},
		{"openat", unix.SYS_OPENAT, 3, 2},
		{"mknodat", unix.SYS_MKNODAT, 2, -1},
	}
}
