package configs

import (
	"fmt"

	"github.com/mcpguard/mcpguard/guard"
)

// errNoBPFLSM is why the eBPF backend cannot run on goos: its programs
// attach to the Linux kernel's LSM hooks. It wraps guard.ErrKernelRefused,
// as a Linux kernel that refuses BPF LSM does, so callers (the eval
// harness, --l3 auto) treat both alike.
func errNoBPFLSM(goos string) error {
	return fmt.Errorf("bpf lsm: needs a Linux kernel with CONFIG_BPF_LSM and lsm=bpf, %s has no such hooks (use C-app for L1+L2 here): %w", goos, guard.ErrKernelRefused)
}
