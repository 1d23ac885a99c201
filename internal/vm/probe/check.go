//go:build linux

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

	"github.com/mcpguard/mcpguard/internal/testenv"
)

// Check shows the kernel enforcing a BPF LSM program: this process is denied
// opening one file, by that program (its counter moves), while it may open
// others and other processes may open that one; detaching lifts the denial.
// It needs -bpf and root, and skips with the kernel's reason where the
// kernel refuses BPF LSM. It is exported so that any package's
// TestVMProbe can run it (go test stops reading packages at -bpf, so
// `go test -run TestVMProbe -bpf ./...` tests only the current directory).
func Check(tb testing.TB) {
	tb.Helper()
	testenv.RequireBPF(tb)
	dir := tb.TempDir()
	secret, other := filepath.Join(dir, "secret"), filepath.Join(dir, "other")
	require.NoError(tb, os.WriteFile(secret, []byte("s3cret\n"), 0o644))
	require.NoError(tb, os.WriteFile(other, []byte("fine\n"), 0o644))

	d, err := DenyOpen(os.Getpid(), secret)
	testenv.SkipIfNotSupported(tb, err)
	tb.Cleanup(func() { d.Close() })
	if lsm, err := os.ReadFile("/sys/kernel/security/lsm"); err == nil {
		tb.Logf("active LSMs: %s", lsm)
	}

	_, err = os.ReadFile(secret)
	require.ErrorIs(tb, err, syscall.EPERM, "open denied by the program, though we are root")
	require.ErrorIs(tb, err, fs.ErrPermission)
	n, err := d.Denials()
	require.NoError(tb, err)
	assert.Equal(tb, uint64(1), n, "the program counted its denial")
	tb.Logf("denied: %v", err)

	b, err := os.ReadFile(other)
	require.NoError(tb, err, "other files open")
	assert.Equal(tb, "fine\n", string(b))

	out, err := exec.Command("cat", secret).Output()
	require.NoError(tb, err, "another process is not targeted")
	assert.Equal(tb, "s3cret\n", string(out))

	_, err = os.Open(secret)
	require.ErrorIs(tb, err, syscall.EPERM)
	n, err = d.Denials()
	require.NoError(tb, err)
	assert.Equal(tb, uint64(2), n)

	require.NoError(tb, d.Close())
	b, err = os.ReadFile(secret)
	require.NoError(tb, err, "detaching lifts the denial")
	assert.Equal(tb, "s3cret\n", string(b))
}
