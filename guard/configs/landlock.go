package configs

import (
	"errors"
	"fmt"

	"github.com/mcpguard/mcpguard/guard/landlock"
)

// Configs on the Landlock backend, beside the study's six: the same L3
// policy enforced by Landlock where the kernel refuses BPF LSM.
const (
	// CLandlock is L3 on Landlock only.
	CLandlock = "C-landlock"
	// CFullLandlock is L1+L2 plus L3 on Landlock.
	CFullLandlock = "C-full-landlock"
)

// Values of Options.L3 (`--l3`).
const (
	L3Auto     = "auto"
	L3EBPF     = "ebpf"
	L3Landlock = "landlock"
)

// ErrBadL3 is wrapped for an Options.L3 that is unknown or contradicts the
// config (C-landlock with --l3 ebpf).
var ErrBadL3 = errors.New("bad L3 backend choice")

// extraNames lists configs beyond the study's six (the Landlock backend).
func extraNames() []string { return []string{CLandlock, CFullLandlock} }

// extraBuilder returns the builders for a config beyond the six.
func extraBuilder(name string) ([]builder, bool) {
	switch name {
	case CLandlock:
		return []builder{buildLandlockConfig}, true
	case CFullLandlock:
		return []builder{buildApp, buildLandlockConfig}, true
	}
	return nil, false
}

// buildLandlockConfig is L3 of the Landlock configs: always Landlock, so
// --l3 may be empty, auto or landlock, never ebpf.
func buildLandlockConfig(o Options, s *Setup) error {
	switch o.L3 {
	case "", L3Auto, L3Landlock:
		return buildLandlock(o, s, landlock.Options{})
	}
	return fmt.Errorf("%w: --l3 %q with a Landlock config (use C-ebpf, C-full or C-AB+ebpf for BPF LSM)", ErrBadL3, o.L3)
}

// buildLandlock adds the Landlock sandbox compiled from the server's policy
// (with its overrides, as L1 sees it). It fails closed: no Landlock on this
// kernel is an error wrapping ErrUnavailable and guard.ErrKernelRefused.
// lo lets tests inject a probe for a kernel without Landlock.
func buildLandlock(o Options, s *Setup, lo landlock.Options) error {
	if o.PolicyFile == "" {
		return errors.New("L3 (landlock) needs a policy file (--policy)")
	}
	p, err := loadPolicy(o, s)
	if err != nil {
		return err
	}
	lo.Audit, lo.Server, lo.Config, lo.Report, lo.OnDenial = o.Audit, o.Server, s.Name, o.Report, o.OnDenial
	lo.RuntimeCache = o.RuntimeCache
	sb, err := landlock.New(p, lo)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	s.Sandbox = sb
	return nil
}

// buildL3 is L3 for C-ebpf, C-full and C-AB+ebpf, by Options.L3: empty or
// "ebpf" is BPF LSM (the study's configs), "landlock" is Landlock, "auto"
// is BPF LSM when its preflight passes and Landlock otherwise. The chosen
// backend is Setup.Sandbox.Name(); when auto fell back, the Landlock
// sandbox's Limits() says why.
func buildL3(o Options, s *Setup) error {
	return selectL3(o, s, buildEBPF, landlock.Options{})
}

func selectL3(o Options, s *Setup, ebpf builder, lo landlock.Options) error {
	switch o.L3 {
	case "", L3EBPF:
		return ebpf(o, s)
	case L3Landlock:
		return buildLandlock(o, s, lo)
	case L3Auto:
		err := ebpf(o, s)
		if err == nil || !errors.Is(err, ErrUnavailable) {
			return err
		}
		lo.Note = fmt.Sprintf("--l3 auto chose landlock: %v", err)
		if lerr := buildLandlock(o, s, lo); lerr != nil {
			return fmt.Errorf("--l3 auto: no L3 backend here: ebpf: %v; landlock: %w", err, lerr)
		}
		return nil
	}
	return fmt.Errorf("%w: --l3 %q (want auto, ebpf or landlock)", ErrBadL3, o.L3)
}

// Limits returns what the setup's L3 backend says it cannot stop here
// (e.g. Landlock's "network by port only"), or "" when it says nothing.
// `run` and the eval table print it beside the config's name.
func Limits(s *Setup) string {
	if l, ok := s.Sandbox.(interface{ Limits() string }); ok {
		return l.Limits()
	}
	return ""
}
