//go:build linux

package eval

import (
	"bytes"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// readProc reads a /proc file whole into buf (grown as needed, and
// returned for the next read); nil if it cannot be read. Raw system calls:
// os.ReadFile adds a stat, a poller registration and an allocation to each
// of the few hundred reads of a scan, which under emulation is most of
// its cost.
func readProc(path string, buf []byte) (data, next []byte) {
	return readProcAt(unix.AT_FDCWD, path, buf)
}

// readProcAt is readProc of path relative to the directory dirfd.
func readProcAt(dirfd int, path string, buf []byte) (data, next []byte) {
	fd, err := unix.Openat(dirfd, path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, buf
	}
	defer unix.Close(fd)
	n := 0
	for {
		if n == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, buf
		}
		if m == 0 {
			return buf[:n], buf
		}
		n += m
	}
}

// kernelThreads are the kernel threads a scan found, each held by a
// handle on its /proc directory: a handle outlives its thread (a lookup
// through it fails once the thread is gone), so a pid that a new process
// reuses is never taken for the thread that had it.
type kernelThreads struct{ fds map[int]int }

func newKernelThreads() *kernelThreads { return &kernelThreads{fds: map[int]int{}} }

// pfKthread is PF_KTHREAD, in the flags of /proc/PID/stat.
const pfKthread = 0x00200000

// known reports whether pid is a kernel thread seen before and still alive.
func (k *kernelThreads) known(pid int) bool {
	fd, ok := k.fds[pid]
	if !ok {
		return false
	}
	if unix.Faccessat(fd, "stat", unix.F_OK, 0) == nil {
		return true
	}
	unix.Close(fd)
	delete(k.fds, pid)
	return false
}

// check reports whether the process in dir is a kernel thread, and if so
// holds it (known). buf is readProc's.
func (k *kernelThreads) check(pid int, dir string, buf []byte) (bool, []byte) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, buf
	}
	// Read through the handle: the flags are those of the process it holds.
	stat, buf := readProcAt(fd, "stat", buf)
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		unix.Close(fd)
		return false, buf
	}
	// After "pid (comm) ": state, ppid, pgrp, session, tty_nr, tpgid, flags.
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 7 {
		unix.Close(fd)
		return false, buf
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil || flags&pfKthread == 0 {
		unix.Close(fd)
		return false, buf
	}
	k.fds[pid] = fd
	return true, buf
}

func (k *kernelThreads) close() {
	for pid, fd := range k.fds {
		unix.Close(fd)
		delete(k.fds, pid)
	}
}
