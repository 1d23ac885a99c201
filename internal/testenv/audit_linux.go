//go:build linux

package testenv

import (
	"encoding/binary"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// KernelAudit switches the kernel's audit on for the test (AUDIT_SET, which
// needs CAP_AUDIT_CONTROL) and back off at cleanup if it was off, so that
// Landlock's denial records are emitted; it skips tb where that is not
// allowed. The switch is the whole machine's: while a test runs, other
// sandboxes' Landlock denials are logged too.
func KernelAudit(tb testing.TB) {
	tb.Helper()
	was, err := auditEnabled()
	if err != nil {
		tb.Skipf("cannot ask the kernel's audit status (needs CAP_AUDIT_CONTROL): %v", err)
	}
	if was {
		return
	}
	if err := setAudit(true); err != nil {
		tb.Skipf("cannot switch the kernel's audit on (needs CAP_AUDIT_CONTROL): %v", err)
	}
	tb.Cleanup(func() {
		if err := setAudit(false); err != nil {
			tb.Errorf("switch the kernel's audit back off: %v", err)
		}
	})
}

// auditRequest sends one audit netlink request and returns the reply's
// payload (an error for a negative NLMSG_ERROR).
func auditRequest(typ uint16, payload []byte, flags uint16) ([]byte, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(time.Second.Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	msg := make([]byte, unix.NLMSG_HDRLEN+len(payload))
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|flags)
	copy(msg[unix.NLMSG_HDRLEN:], payload)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return nil, err
	}
	if n < unix.NLMSG_HDRLEN {
		return nil, syscall.EINVAL
	}
	data := buf[unix.NLMSG_HDRLEN:n]
	if binary.NativeEndian.Uint16(buf[4:6]) == unix.NLMSG_ERROR && len(data) >= 4 {
		if e := int32(binary.NativeEndian.Uint32(data)); e < 0 {
			return nil, syscall.Errno(-e)
		}
	}
	return data, nil
}

func auditEnabled() (bool, error) {
	data, err := auditRequest(1000, nil, 0) // AUDIT_GET: the status is the reply
	if err != nil {
		return false, err
	}
	if len(data) < 8 {
		return false, syscall.EINVAL
	}
	return binary.NativeEndian.Uint32(data[4:8]) != 0, nil
}

func setAudit(on bool) error {
	p := make([]byte, 40)                   // struct audit_status, mask and enabled set
	binary.NativeEndian.PutUint32(p[0:], 1) // AUDIT_STATUS_ENABLED
	if on {
		binary.NativeEndian.PutUint32(p[4:], 1)
	}
	_, err := auditRequest(1001, p, unix.NLM_F_ACK) // AUDIT_SET: the reply is the ack
	return err
}
