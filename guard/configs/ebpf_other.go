//go:build !linux

package configs

import (
	"runtime"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/policy"
)

// newEBPF fails closed off Linux: BPF LSM is a Linux kernel feature, so
// no kernel here can enforce the policy (see errNoBPFLSM).
func newEBPF(*policy.Policy, Options, string) (guard.Sandbox, error) {
	return nil, errNoBPFLSM(runtime.GOOS)
}
