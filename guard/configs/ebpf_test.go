package configs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

func TestBuildEBPFNeedsPolicy(t *testing.T) {
	s := &Setup{Name: CEBPF}
	require.ErrorContains(t, buildEBPF(Options{}, s), "no policy file")
	require.Nil(t, s.Sandbox)

	require.Error(t, buildEBPF(Options{PolicyFile: filepath.Join(t.TempDir(), "missing.json")}, s))
	require.Nil(t, s.Sandbox)

	err := buildEBPF(Options{L3: L3Landlock, PolicyFile: "x"}, s)
	require.ErrorIs(t, err, ErrUnavailable)
}

// On a kernel without BPF LSM (the build machines), building fails closed
// with both sentinels; where it enforces, a sandbox is set.
func TestBuildEBPFFailsClosed(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "p.json")
	require.NoError(t, os.WriteFile(pol, []byte(`{"server":"x","filesystem":{"read":["${WS}"]}}`), 0o644))
	s := &Setup{Name: CEBPF}
	err := buildEBPF(Options{PolicyFile: pol, Vars: map[string]string{"WS": t.TempDir()}}, s)
	if err == nil {
		require.NotNil(t, s.Sandbox)
		require.NoError(t, s.Sandbox.Close())
		return
	}
	require.ErrorIs(t, err, ErrUnavailable)
	require.Nil(t, s.Sandbox)
	if os.Geteuid() == 0 && errors.Is(err, guard.ErrKernelRefused) {
		t.Logf("kernel refused, as on the build machines: %v", err)
	}
}
