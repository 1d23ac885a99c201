package eval

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// NetlinkSink is a NETLINK_USERSOCK socket bound to a port id: a process
// on the host that a server could message over netlink, whatever network
// rules say (netlink is not IP). It records every message received.
type NetlinkSink struct {
	fd     int
	log    sinkLog
	wg     sync.WaitGroup
	closed atomic.Bool
}

// NewNetlinkSink binds a NETLINK_USERSOCK socket to port id portID.
func NewNetlinkSink(portID int) (*NetlinkSink, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_USERSOCK)
	if err != nil {
		return nil, fmt.Errorf("netlink sink: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: uint32(portID)}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink sink: bind port id %d: %w", portID, err)
	}
	// A receive timeout lets the reader notice Close.
	tv := unix.Timeval{Usec: 200000}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	s := &NetlinkSink{fd: fd}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if n > 0 {
				s.log.add(buf[:n])
			}
			if (err == unix.EAGAIN || err == unix.EINTR) && !s.closed.Load() {
				continue
			}
			if err != nil {
				return
			}
		}
	}()
	return s, nil
}

// Received returns every message received so far, concatenated.
func (s *NetlinkSink) Received() []byte {
	if s == nil {
		return nil
	}
	b, _ := s.log.snapshot()
	return b
}

// LastActivity is when the sink last received a message.
func (s *NetlinkSink) LastActivity() time.Time {
	if s == nil {
		return time.Time{}
	}
	_, t := s.log.snapshot()
	return t
}

// Close stops the sink.
func (s *NetlinkSink) Close() error {
	if s == nil {
		return nil
	}
	// The reader sees the flag at its next timeout; the descriptor is
	// closed only after it stopped, so its number is never reused under it.
	s.closed.Store(true)
	s.wg.Wait()
	return unix.Close(s.fd)
}
