//go:build linux

package probe

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/internal/testenv"
)

// TestVMProbe passes where the kernel enforces BPF LSM (mcpguard vm) and
// skips with the kernel's reason elsewhere. See Check.
func TestVMProbe(t *testing.T) {
	testenv.RequireBPF(t) // also marks the package for scripts/vmtest
	testenv.SkipIfNotSupported(t, Check(t.TempDir()))
}

func TestRefusedWrapsKernelErrors(t *testing.T) {
	for _, e := range []error{syscall.EPERM, syscall.EOPNOTSUPP, syscall.Errno(524)} {
		err := refused("load", e)
		assert.ErrorIs(t, err, e, "keeps the kernel's reason")
		assert.ErrorIs(t, err, guard.ErrKernelRefused, "tests skip on it: %v", err)
	}
	err := refused("load", syscall.EINVAL)
	assert.ErrorIs(t, err, syscall.EINVAL)
	assert.NotErrorIs(t, err, guard.ErrKernelRefused, "EINVAL is a bug, not a refusal")
}
