package configs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/landlock"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

func writePolicy(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	require.NoError(t, os.Mkdir(ws, 0o755))
	path := filepath.Join(dir, "p.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"server":"s","filesystem":{"write":["${WS}"]},"network":{"allow":[{"host":"127.0.0.2","ports":[8080]}]}}`), 0o644))
	return Options{Server: "s", PolicyFile: path, Vars: map[string]string{"WS": ws}}
}

// A kernel without Landlock, injected: no global state to flip.
func noLandlock() (int, error) { return 0, fmt.Errorf("probe: %w", syscall.ENOSYS) }

func abi7() (int, error) { return 7, nil }

func TestLandlockFailsClosed(t *testing.T) {
	o := writePolicy(t)
	s := &Setup{Name: CLandlock}
	err := buildLandlock(o, s, landlock.Options{Probe: noLandlock})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorIs(t, err, guard.ErrKernelRefused)
	assert.Contains(t, err.Error(), "landlock unavailable")
	assert.Nil(t, s.Sandbox, "no sandbox, so the server is never started unguarded")
}

func TestLandlockConfigs(t *testing.T) {
	assert.Contains(t, Names(), CLandlock)
	assert.Contains(t, Names(), CFullLandlock)

	o := writePolicy(t)
	s, err := Build(CLandlock, o)
	if errors.Is(err, guard.ErrKernelRefused) {
		t.Skipf("no Landlock on this kernel: %v", err)
	}
	require.NoError(t, err)
	require.NotNil(t, s.Sandbox)
	assert.Equal(t, "landlock", s.Sandbox.Name())
	assert.Empty(t, s.Stages, "C-landlock is L3 only")
	if os.Geteuid() == 0 {
		assert.Contains(t, Limits(s), "egress filter", "a root proxy gives the server a network namespace")
	} else {
		assert.Contains(t, Limits(s), "by port only")
	}
	assert.Empty(t, Limits(&Setup{Name: C0}))

	full, err := Build(CFullLandlock, o)
	require.NoError(t, err)
	assert.Equal(t, "landlock", full.Sandbox.Name())
	assert.NotEmpty(t, full.Stages, "C-full-landlock has L1 and L2")

	// --l3 auto on a study config: BPF LSM where its preflight passes,
	// Landlock otherwise (this host refuses BPF LSM programs).
	auto := o
	auto.L3 = L3Auto
	s, err = Build(CEBPF, auto)
	require.NoError(t, err)
	assert.Contains(t, []string{"ebpf", "landlock"}, s.Sandbox.Name())
	t.Logf("--l3 auto picked %s", s.Sandbox.Name())

	_, err = Build(CLandlock, Options{Server: "s"})
	assert.ErrorContains(t, err, "policy file")

	o.L3 = L3EBPF
	_, err = Build(CLandlock, o)
	assert.ErrorIs(t, err, ErrBadL3)
}

func TestSelectL3(t *testing.T) {
	o := writePolicy(t)
	lo := landlock.Options{Probe: abi7, Wrapper: "/bin/mcpguard"}
	bpfRefused := func(Options, *Setup) error {
		return fmt.Errorf("%w: bpf lsm: %w", ErrUnavailable, guard.ErrKernelRefused)
	}
	bpfBroken := func(Options, *Setup) error { return errors.New("policy does not compile") }

	t.Run("auto falls back to landlock and says why", func(t *testing.T) {
		o := o
		o.L3 = L3Auto
		s := &Setup{}
		require.NoError(t, selectL3(o, s, bpfRefused, lo))
		require.NotNil(t, s.Sandbox)
		assert.Equal(t, "landlock", s.Sandbox.Name())
		ll := s.Sandbox.(*landlock.Sandbox)
		assert.Contains(t, ll.Limits(), "--l3 auto chose landlock")
		assert.Contains(t, ll.Limits(), "bpf lsm")
	})
	t.Run("auto does not hide other BPF errors", func(t *testing.T) {
		o := o
		o.L3 = L3Auto
		s := &Setup{}
		assert.ErrorContains(t, selectL3(o, s, bpfBroken, lo), "does not compile")
		assert.Nil(t, s.Sandbox)
	})
	t.Run("auto with neither backend fails closed", func(t *testing.T) {
		o := o
		o.L3 = L3Auto
		s := &Setup{}
		err := selectL3(o, s, bpfRefused, landlock.Options{Probe: noLandlock})
		assert.ErrorIs(t, err, ErrUnavailable)
		assert.ErrorContains(t, err, "no L3 backend")
		assert.Nil(t, s.Sandbox)
	})
	t.Run("ebpf is the default and is not replaced", func(t *testing.T) {
		s := &Setup{}
		assert.ErrorIs(t, selectL3(o, s, bpfRefused, lo), ErrUnavailable)
		assert.Nil(t, s.Sandbox)
	})
	t.Run("landlock on request", func(t *testing.T) {
		o := o
		o.L3 = L3Landlock
		s := &Setup{}
		require.NoError(t, selectL3(o, s, bpfRefused, lo))
		assert.Equal(t, "landlock", s.Sandbox.Name())
	})
	t.Run("unknown", func(t *testing.T) {
		o := o
		o.L3 = "seccomp"
		assert.ErrorIs(t, selectL3(o, &Setup{}, bpfRefused, lo), ErrBadL3)
	})
}
