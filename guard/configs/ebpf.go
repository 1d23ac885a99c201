package configs

import (
	"errors"
	"fmt"
)

// buildEBPF adds the BPF LSM sandbox (L3): the server's policy compiled
// into the kernel's maps, enforced on the whole process tree. It fails
// closed: when the kernel refuses BPF LSM or the pinned maps are not
// there, the error wraps ErrUnavailable (and guard.ErrKernelRefused when
// the kernel said no) and the server is never started.
func buildEBPF(o Options, s *Setup) error {
	switch o.L3 {
	case "", "auto", "ebpf":
	default:
		return fmt.Errorf("%w: config %s uses the ebpf backend, not %q", ErrUnavailable, s.Name, o.L3)
	}
	if o.PolicyFile == "" {
		return errors.New("L3 ebpf: no policy file")
	}
	p, err := loadPolicy(o, s)
	if err != nil {
		return fmt.Errorf("L3 ebpf: %w", err)
	}
	sb, err := newEBPF(p, o, s.Name)
	if err != nil {
		return fmt.Errorf("%w: L3 ebpf: %w", ErrUnavailable, err)
	}
	s.Sandbox = sb
	return nil
}
