//go:build linux

package steer

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/mcpguard/mcpguard/internal/feature"
)

// Rule steers TCP connections to Prefix on Port (0: any port).
type Rule struct {
	Prefix netip.Prefix
	Port   uint16
}

// Key is a rule's LPM key: the port's 16 bits, then the address as IPv6
// (IPv4 mapped), as the program looks it up.
func Key(r Rule) steerSteerKey {
	var k steerSteerKey
	a := r.Prefix.Addr()
	bits := r.Prefix.Bits()
	if a.Is4() {
		a = netip.AddrFrom16(a.As16())
		bits += 96
	}
	k.Addr = a.As16()
	k.Port = [2]uint8{uint8(r.Port >> 8), uint8(r.Port)}
	if r.Port == 0 {
		// Any port: the program's second lookup, with port 0.
		k.Port = [2]uint8{}
	}
	k.Prefixlen = uint32(16 + bits)
	return k
}

// Steering is the program attached to one network namespace.
type Steering struct {
	objs steerObjects
	link *link.NetNsLink
}

// Attach loads the program, gives it the rules and the catch-all
// listeners (fd4 for IPv4, fd6 for IPv6, -1 for none), and attaches it to
// the network namespace netns (an fd of /proc/PID/ns/net). With outside,
// every TCP connection bound outside loopback is steered too, whatever
// the rules. A kernel that refuses it gives an error wrapping
// feature.ErrKernelRefused.
func Attach(netns int, rules []Rule, outside bool, fd4, fd6 int) (*Steering, error) {
	s := &Steering{}
	spec, err := loadSteer()
	if err != nil {
		return nil, fmt.Errorf("steer spec: %w", err)
	}
	if outside {
		if err := spec.Variables["steer_outside"].Set(uint32(1)); err != nil {
			return nil, fmt.Errorf("steer_outside: %w", err)
		}
	}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		return nil, refused("load sk_lookup program", err)
	}
	for _, r := range rules {
		if err := s.objs.SteerRules.Put(Key(r), uint32(1)); err != nil {
			s.Close()
			return nil, fmt.Errorf("steer rule %v: %w", r, err)
		}
	}
	for i, fd := range []int{fd4, fd6} {
		if fd < 0 {
			continue
		}
		if err := s.objs.SteerSocks.Put(uint32(i), uint64(fd)); err != nil {
			s.Close()
			return nil, fmt.Errorf("steer socket: %w", err)
		}
	}
	l, err := link.AttachNetNs(netns, s.objs.Steer)
	if err != nil {
		s.Close()
		return nil, refused("attach sk_lookup program", err)
	}
	s.link = l
	return s, nil
}

func refused(step string, err error) error {
	if errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, errPerm) {
		return fmt.Errorf("%s: %w (%w)", step, err, feature.ErrKernelRefused)
	}
	return fmt.Errorf("%s: %w", step, err)
}

// Close detaches the program and frees its maps.
func (s *Steering) Close() error {
	var errs []error
	if s.link != nil {
		errs = append(errs, s.link.Close())
	}
	errs = append(errs, s.objs.Close())
	return errors.Join(errs...)
}

// errPerm is what a kernel that refuses BPF to this process answers.
var errPerm = syscall.EPERM
