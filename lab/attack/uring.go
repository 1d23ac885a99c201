//go:build linux

package attack

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The io_uring attacks: operations submitted through a ring reach the
// kernel without the system call a seccomp filter or a socket(2) hook
// would see, so a guard must judge them where they land.

// URingUDP ("uringudp:PORT#PAYLOAD") makes a UDP socket through io_uring
// (IORING_OP_SOCKET, which socket(2) filters never see) and sends PAYLOAD
// to 127.0.0.1:PORT with a plain sendto.
func URingUDP(arg string) error {
	portS, payload, _ := strings.Cut(arg, "#")
	port, _ := strconv.Atoi(portS)
	var sqe [64]byte
	sqe[0] = 45                                                   // IORING_OP_SOCKET
	*(*int32)(unsafe.Pointer(&sqe[4])) = unix.AF_INET             // fd: domain
	*(*uint64)(unsafe.Pointer(&sqe[8])) = uint64(unix.SOCK_DGRAM) // off: type
	*(*uint32)(unsafe.Pointer(&sqe[24])) = 0                      // len: protocol
	fd, err := uringSubmit(sqe)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Sendto(fd, []byte(payload), 0, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
}

// URingOpen opens path read-only through io_uring (IORING_OP_OPENAT), in
// the submitting task or, with async, in an io-wq worker thread, and
// closes it.
func URingOpen(path string, async bool) error {
	name, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	var sqe [64]byte
	sqe[0] = 18 // IORING_OP_OPENAT
	if async {
		sqe[1] = 1 << 4 // IOSQE_ASYNC
	}
	*(*int32)(unsafe.Pointer(&sqe[4])) = unix.AT_FDCWD                           // fd: dirfd
	*(*uint64)(unsafe.Pointer(&sqe[16])) = uint64(uintptr(unsafe.Pointer(name))) // addr: path
	*(*uint32)(unsafe.Pointer(&sqe[28])) = unix.O_RDONLY | unix.O_CLOEXEC        // open_flags
	fd, err := uringSubmit(sqe)
	// The kernel read name while uringSubmit waited for the completion.
	runtime.KeepAlive(name)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// uringSubmit runs one submission on a fresh ring and returns its result
// (a negative result as its errno).
func uringSubmit(sqe [64]byte) (int, error) {
	var p [120]byte // struct io_uring_params
	fd, _, e := syscall.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&p[0])), 0)
	if e != 0 {
		return -1, fmt.Errorf("io_uring_setup: %w", e)
	}
	defer unix.Close(int(fd))
	u32 := func(off int) uint32 { return *(*uint32)(unsafe.Pointer(&p[off])) }
	sqEntries, cqEntries := u32(0), u32(4)
	const sqOff, cqOff = 40, 80
	sqRing, err := unix.Mmap(int(fd), 0, int(u32(sqOff+24)+sqEntries*4), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return -1, fmt.Errorf("mmap sq: %w", err)
	}
	defer unix.Munmap(sqRing)
	cqRing, err := unix.Mmap(int(fd), 0x8000000, int(u32(cqOff+20)+cqEntries*16), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return -1, fmt.Errorf("mmap cq: %w", err)
	}
	defer unix.Munmap(cqRing)
	sqes, err := unix.Mmap(int(fd), 0x10000000, int(sqEntries*64), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return -1, fmt.Errorf("mmap sqes: %w", err)
	}
	defer unix.Munmap(sqes)
	at := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	copy(sqes[:64], sqe[:])
	tail := at(sqRing, u32(sqOff+4))
	mask := *at(sqRing, u32(sqOff+8))
	*at(sqRing, u32(sqOff+24)+(*tail&mask)*4) = 0
	*tail++
	head, ctail := at(cqRing, u32(cqOff)), at(cqRing, u32(cqOff+4))
	// io_uring_enter reports the submission as a success even when a
	// signal (the Go runtime's preemption) cut its wait short, before the
	// completion was posted: wait until the completion queue has an entry.
	toSubmit := uintptr(1)
	for atomic.LoadUint32(ctail) == atomic.LoadUint32(head) {
		_, _, e = syscall.Syscall6(unix.SYS_IO_URING_ENTER, fd, toSubmit, 1, 1 /* GETEVENTS */, 0, 0)
		switch {
		case e == syscall.EINTR: // nothing submitted yet: the retry submits
		case e != 0:
			return -1, fmt.Errorf("io_uring_enter: %w", e)
		default:
			toSubmit = 0
		}
	}
	cmask := *at(cqRing, u32(cqOff+8))
	cqe := u32(cqOff+20) + (*head&cmask)*16
	res := *(*int32)(unsafe.Pointer(&cqRing[cqe+8]))
	*head++
	if res < 0 {
		return -1, syscall.Errno(-res)
	}
	return int(res), nil
}
