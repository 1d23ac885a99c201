//go:build linux

package auditlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	auditGet         = 1000 // AUDIT_GET
	nlgrpReadlog     = 1    // AUDIT_NLGRP_READLOG
	statusEnabledOff = 0
)

// Reader receives the kernel's audit records from the multicast group and
// hands out Landlock's denials.
type Reader struct {
	fd      int
	mu      sync.Mutex
	closed  bool
	pending []record
}

// Open joins the audit multicast group. It fails with an error wrapping
// ErrUnavailable that says what is missing: CAP_AUDIT_READ, the audit
// subsystem, or the kernel's audit switched on.
func Open() (*Reader, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, fmt.Errorf("%w: audit netlink socket: %v (a kernel without CONFIG_AUDIT)", ErrUnavailable, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: nlgrpReadlog}); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("%w: reading the kernel's audit records needs CAP_AUDIT_READ (run mcpguard as root, or give it the capability)", ErrUnavailable)
		}
		return nil, fmt.Errorf("%w: join the audit multicast group: %v", ErrUnavailable, err)
	}
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	// A large buffer: the whole system's audit records come through here.
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	if on, err := Enabled(); err == nil && !on {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: the kernel's audit is off (auditctl -e 1, or audit=1 on the kernel command line, turns it on)", ErrUnavailable)
	}
	return &Reader{fd: fd}, nil
}

// Enabled asks the kernel whether audit is on (AUDIT_GET, which needs
// CAP_AUDIT_CONTROL: an error when it cannot be asked).
func Enabled() (bool, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return false, err
	}
	tv := unix.NsecToTimeval(time.Second.Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	msg := make([]byte, unix.NLMSG_HDRLEN)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], auditGet)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return false, err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return false, err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil || len(msgs) == 0 {
		return false, fmt.Errorf("audit status: %v", err)
	}
	m := msgs[0]
	if m.Header.Type == unix.NLMSG_ERROR {
		if len(m.Data) >= 4 {
			if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
				return false, syscall.Errno(-e)
			}
		}
		return false, errors.New("audit status: error reply")
	}
	if len(m.Data) < 8 {
		return false, errors.New("audit status: short reply")
	}
	// struct audit_status: mask, enabled, ...
	return binary.NativeEndian.Uint32(m.Data[4:8]) != statusEnabledOff, nil
}

// Next returns the next Landlock denial, blocking until there is one or
// the reader is closed (then an error wrapping os.ErrClosed).
func (r *Reader) Next() (Denial, error) {
	buf := make([]byte, 1<<16)
	for {
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		if closed {
			return Denial{}, os.ErrClosed
		}
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				// Quiet: an event without its end-of-event record is complete.
				if d, ok := r.flush(); ok {
					return d, nil
				}
				continue
			}
			if errors.Is(err, unix.ENOBUFS) {
				continue // records were dropped: go on with the next
			}
			return Denial{}, fmt.Errorf("audit netlink: %w", err)
		}
		// One record per datagram. Its header's length is not to be
		// trusted (the kernel's audit records have long carried lengths
		// that syscall.ParseNetlinkMessage rejects): the type is read from
		// the header, the text is the rest.
		if n < unix.NLMSG_HDRLEN {
			continue
		}
		typ := int(binary.NativeEndian.Uint16(buf[4:6]))
		if d, ok := r.add(typ, strings.TrimRight(string(buf[unix.NLMSG_HDRLEN:n]), "\x00\n")); ok {
			return d, nil
		}
	}
}

// add keeps one record with its event's others; an event is complete at
// its end-of-event record, or when the next event's records begin.
func (r *Reader) add(typ int, text string) (Denial, bool) {
	rec, ok := parseRecord(typ, text)
	if !ok {
		return Denial{}, false
	}
	if len(r.pending) > 0 && r.pending[0].serial != rec.serial {
		d, ok := r.flush()
		if typ != TypeEOE {
			r.pending = []record{rec}
		}
		return d, ok
	}
	r.pending = append(r.pending, rec)
	if typ == TypeEOE {
		return r.flush()
	}
	return Denial{}, false
}

func (r *Reader) flush() (Denial, bool) {
	recs := r.pending
	r.pending = nil
	if len(recs) == 0 {
		return Denial{}, false
	}
	return assemble(recs)
}

// Close stops the reader; a Next in progress returns within 200 ms.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	return unix.Close(r.fd)
}

// pidNamespace is the pid namespace of a process ("" when it is gone).
func pidNamespace(pid int) string {
	s, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return ""
	}
	return s
}

// parent is a process's parent pid (0 when it is gone).
func parent(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}
