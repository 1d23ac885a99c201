package egress

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/bpf/steer"
)

// nsThread runs functions on one OS thread that has joined the server's
// network namespace, so that the sockets they create live there. The
// thread is locked to its goroutine and never unlocked: when the goroutine
// returns, the Go runtime ends the thread rather than reuse it elsewhere.
// Everything else of the guard, dialling out included, runs on the
// host's namespace.
type nsThread struct {
	// fd is the namespace (for attaching the steering program to it).
	fd   int
	reqs chan func()
	stop chan struct{}
	done chan struct{}
}

// joinNetns starts the thread in the network namespace at path (the
// launcher's /proc/PID/ns/net).
func joinNetns(path string) (*nsThread, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("egress: open network namespace: %w", err)
	}
	t := &nsThread{fd: fd, reqs: make(chan func()), stop: make(chan struct{}), done: make(chan struct{})}
	errc := make(chan error, 1)
	go func() {
		defer close(t.done)
		runtime.LockOSThread()
		err := unix.Setns(fd, unix.CLONE_NEWNET)
		errc <- err
		if err != nil {
			return
		}
		for {
			select {
			case f := <-t.reqs:
				f()
			case <-t.stop:
				return
			}
		}
	}()
	if err := <-errc; err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("egress: join network namespace: %w", err)
	}
	return t, nil
}

// errThreadGone is do's error once the thread has ended.
var errThreadGone = errors.New("egress: namespace thread ended")

// do runs f on the thread and returns its error.
func (t *nsThread) do(f func() error) error {
	errc := make(chan error, 1)
	select {
	case t.reqs <- func() { errc <- f() }:
		return <-errc
	case <-t.done:
		return errThreadGone
	}
}

func (t *nsThread) close() {
	close(t.stop)
	<-t.done
	unix.Close(t.fd)
}

// setupLoopback brings lo up and makes every address local to it (AnyIP
// routes for 0.0.0.0/0 and ::/0 in the local table): the listeners can
// then bind any address, a connect to any other address meets the
// namespace's own stack (refused at once) instead of "network
// unreachable", and nothing is routed anywhere else, since lo is the only
// interface. Runs on the namespace's thread.
func setupLoopback() error {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return fmt.Errorf("egress: loopback: %w", err)
	}
	if lo.Flags&net.FlagUp == 0 {
		if err := linkUp(lo.Name); err != nil {
			return err
		}
	}
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if err := addLocalRoute(family, lo.Index); err != nil {
			return err
		}
	}
	return nil
}

func linkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("egress: loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return fmt.Errorf("egress: loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("egress: loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("egress: loopback up: %w", err)
	}
	return nil
}

// addLocalRoute adds "local 0.0.0.0/0 dev lo table local" (or ::/0) with
// one RTM_NEWROUTE message.
func addLocalRoute(family uint8, ifindex int) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("egress: netlink: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("egress: netlink bind: %w", err)
	}
	rt := unix.RtMsg{
		Family:   family,
		Table:    unix.RT_TABLE_LOCAL,
		Protocol: unix.RTPROT_BOOT,
		Scope:    unix.RT_SCOPE_HOST,
		Type:     unix.RTN_LOCAL,
	}
	oif := make([]byte, unix.SizeofRtAttr+4)
	*(*unix.RtAttr)(unsafe.Pointer(&oif[0])) = unix.RtAttr{Len: uint16(len(oif)), Type: unix.RTA_OIF}
	*(*uint32)(unsafe.Pointer(&oif[unix.SizeofRtAttr])) = uint32(ifindex)
	body := append((*[unix.SizeofRtMsg]byte)(unsafe.Pointer(&rt))[:], oif...)
	hdr := unix.NlMsghdr{
		Len:   uint32(unix.NLMSG_HDRLEN + len(body)),
		Type:  unix.RTM_NEWROUTE,
		Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK | unix.NLM_F_CREATE | unix.NLM_F_EXCL,
		Seq:   1,
	}
	msg := append((*[unix.NLMSG_HDRLEN]byte)(unsafe.Pointer(&hdr))[:], body...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("egress: add local route: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("egress: add local route: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return fmt.Errorf("egress: add local route: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 {
			continue
		}
		code := *(*int32)(unsafe.Pointer(&m.Data[0]))
		if code == 0 || unix.Errno(-code) == unix.EEXIST {
			return nil
		}
		if family == unix.AF_INET6 && errors.Is(unix.Errno(-code), unix.EAFNOSUPPORT) {
			return nil // IPv6 disabled: nothing to route
		}
		return fmt.Errorf("egress: add local route (family %d): %w", family, unix.Errno(-code))
	}
	return fmt.Errorf("egress: add local route: no answer from the kernel")
}

// nsPath is the network namespace of a process.
func nsPath(pid int) string { return fmt.Sprintf("/proc/%d/ns/net", pid) }

// steer attaches the steering program to the namespace, handing the
// rules' connections, and every one bound outside loopback, to the
// catch-all listeners.
func (t *nsThread) steer(rules []InsideRule, ln4, ln6 *net.TCPListener) (io.Closer, error) {
	var sr []steer.Rule
	for _, r := range rules {
		sr = append(sr, steer.Rule{Prefix: r.Prefix, Port: r.Port})
	}
	fd4, fd6 := -1, -1
	var s *steer.Steering
	var err error
	raw4, err4 := ln4.SyscallConn()
	if err4 != nil {
		return nil, err4
	}
	attach := func() {
		s, err = steer.Attach(t.fd, sr, true, fd4, fd6)
	}
	cerr := raw4.Control(func(fd uintptr) {
		fd4 = int(fd)
		if ln6 == nil {
			attach()
			return
		}
		raw6, err6 := ln6.SyscallConn()
		if err6 != nil {
			err = err6
			return
		}
		if e := raw6.Control(func(fd uintptr) { fd6 = int(fd); attach() }); e != nil {
			err = e
		}
	})
	if cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	return s, nil
}
