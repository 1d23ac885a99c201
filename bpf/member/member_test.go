//go:build linux

package member

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

func TestServeBadInput(t *testing.T) {
	for _, v := range []string{"", "1:2", "x:2:/p", "1:-3:/p", "1:2:/nonexistent/tasks"} {
		var out bytes.Buffer
		code := serve(v, strings.NewReader("join\n"), &out)
		require.NotZero(t, code, "%q", v)
		require.NotEmpty(t, out.String(), "%q says why", v)
	}
}

// tasksMap pins a hash map shaped like guard.bpf.c's tasks in a bpf file
// system of its own (root and bpf() needed; skipped otherwise).
func tasksMap(t *testing.T) (*ebpf.Map, string) {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, ""); err != nil {
		t.Skipf("cannot mount a bpf file system here: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 16})
	if err != nil {
		t.Skipf("cannot create a BPF map here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	pin := filepath.Join(dir, "tasks")
	require.NoError(t, m.Pin(pin))
	return m, pin
}

func TestHelperJoinLeave(t *testing.T) {
	m, pin := tasksMap(t)
	const policy = uint64(0x5eed)
	pid := os.Getpid()
	h, err := Start(pin, policy, pid)
	require.NoError(t, err)
	defer h.Close()

	var got uint64
	require.NoError(t, h.Join())
	require.NoError(t, m.Lookup(uint32(pid), &got))
	require.Equal(t, policy, got)
	require.NoError(t, h.Leave())
	require.ErrorIs(t, m.Lookup(uint32(pid), &got), ebpf.ErrKeyNotExist)
	// Leaving twice: the helper reports the map's error and keeps serving.
	require.ErrorIs(t, h.Leave(), ErrHelper)
	require.NoError(t, h.Join())
	require.NoError(t, m.Lookup(uint32(pid), &got))
	require.NoError(t, h.Close())
}

func TestHelperMissingPin(t *testing.T) {
	h, err := Start(filepath.Join(t.TempDir(), "tasks"), 1, os.Getpid())
	require.NoError(t, err)
	defer h.Close()
	require.ErrorIs(t, h.Join(), ErrHelper)
}
