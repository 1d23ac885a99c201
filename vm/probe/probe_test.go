package probe

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/internal/testenv"
)

// TestVMProbe shows the kernel enforcing a BPF LSM program: this process is
// denied opening one file, by that program (its counter moves), while it
// may open others and other processes may open that one; detaching lifts the
// denial. Where the kernel refuses BPF LSM it skips with the kernel's reason.
func TestVMProbe(t *testing.T) {
	testenv.RequireBPF(t)
	dir := t.TempDir()
	secret, other := filepath.Join(dir, "secret"), filepath.Join(dir, "other")
	require.NoError(t, os.WriteFile(secret, []byte("s3cret\n"), 0o644))
	require.NoError(t, os.WriteFile(other, []byte("fine\n"), 0o644))

	d, err := DenyOpen(os.Getpid(), secret)
	testenv.SkipIfNotSupported(t, err)
	t.Cleanup(func() { d.Close() })
	if lsm, err := os.ReadFile("/sys/kernel/security/lsm"); err == nil {
		t.Logf("active LSMs: %s", lsm)
	}

	_, err = os.ReadFile(secret)
	require.ErrorIs(t, err, syscall.EPERM, "open denied by the program, though we are root")
	require.ErrorIs(t, err, fs.ErrPermission)
	n, err := d.Denials()
	require.NoError(t, err)
	assert.Equal(t, uint64(1), n, "the program counted its denial")

	b, err := os.ReadFile(other)
	require.NoError(t, err, "other files open")
	assert.Equal(t, "fine\n", string(b))

	out, err := exec.Command("cat", secret).Output()
	require.NoError(t, err, "another process is not targeted")
	assert.Equal(t, "s3cret\n", string(out))

	_, err = os.Open(secret)
	require.ErrorIs(t, err, syscall.EPERM)
	n, err = d.Denials()
	require.NoError(t, err)
	assert.Equal(t, uint64(2), n)

	require.NoError(t, d.Close())
	b, err = os.ReadFile(secret)
	require.NoError(t, err, "detaching lifts the denial")
	assert.Equal(t, "s3cret\n", string(b))
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
