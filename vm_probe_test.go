//go:build linux

package mcpguard_test

import (
	"testing"

	"github.com/mcpguard/mcpguard/internal/testenv"
	"github.com/mcpguard/mcpguard/lab/vm/probe"
)

// TestVMProbe shows a BPF LSM denial where the kernel enforces BPF LSM
// (`mcpguard vm -- go test -run TestVMProbe ./... -bpf`) and skips with the
// kernel's reason elsewhere. It is here as well as in vm/probe because
// `go test -run TestVMProbe -bpf ./...` tests only this package: go test
// reads no packages after a flag it does not know.
func TestVMProbe(t *testing.T) {
	testenv.RequireBPF(t)
	testenv.SkipIfNotSupported(t, probe.Check(t.TempDir()))
}
