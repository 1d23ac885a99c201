//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard"
)

// Preflight checks, the way Tetragon's detect code does, that this kernel
// runs BPF LSM programs: the program type is supported, "bpf" is among the
// active LSMs, and a no-op LSM program really loads and attaches. The error
// names the step that failed and wraps guard.ErrKernelRefused when the
// kernel refused.
func Preflight() error {
	if err := features.HaveProgramType(ebpf.LSM); err != nil {
		return refused("preflight: program type lsm", err)
	}
	lsms, err := os.ReadFile("/sys/kernel/security/lsm")
	if err != nil {
		return refused("preflight: read active LSMs (is securityfs mounted?)", err)
	}
	if !hasLSM(string(lsms), "bpf") {
		return fmt.Errorf("preflight: active LSMs are %q, without bpf (boot with lsm=...,bpf): %w",
			strings.TrimSpace(string(lsms)), guard.ErrKernelRefused)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:       "mcpguard_noop",
		Type:       ebpf.LSM,
		AttachType: ebpf.AttachLSMMac,
		AttachTo:   "file_open",
		License:    "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		},
	})
	if err != nil {
		return refused("preflight: load a no-op LSM program", err)
	}
	defer prog.Close()
	l, err := link.AttachLSM(link.LSMOptions{Program: prog})
	if err != nil {
		return refused("preflight: attach a no-op LSM program", err)
	}
	return l.Close()
}

func hasLSM(list, name string) bool {
	for _, l := range strings.Split(strings.TrimSpace(list), ",") {
		if l == name {
			return true
		}
	}
	return false
}

// refused wraps err, adding guard.ErrKernelRefused when the kernel said no
// (not supported, not permitted) rather than something going wrong here.
func refused(step string, err error) error {
	if errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EPERM) ||
		errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%s: %w (%w)", step, err, guard.ErrKernelRefused)
	}
	return fmt.Errorf("%s: %w", step, err)
}
