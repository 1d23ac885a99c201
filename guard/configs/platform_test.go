package configs

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpguard/mcpguard/guard"
)

// Off Linux the eBPF backend fails closed with the same sentinel as a
// Linux kernel that refuses BPF LSM, and says what is missing.
func TestNoBPFLSMError(t *testing.T) {
	for _, goos := range []string{"darwin", "windows"} {
		err := errNoBPFLSM(goos)
		assert.ErrorIs(t, err, guard.ErrKernelRefused)
		assert.Contains(t, err.Error(), goos)
		assert.Contains(t, err.Error(), "CONFIG_BPF_LSM")
	}
}
