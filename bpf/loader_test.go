//go:build linux

package bpf_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/bpf"
	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/internal/testenv"
)

// The C structs and the Go types must agree byte for byte.
func TestLayout(t *testing.T) {
	require.Equal(t, uintptr(24), unsafe.Sizeof(bpf.InodeKey{}))
	require.Equal(t, uintptr(32), unsafe.Sizeof(bpf.NetKey{}))
	spec, err := bpf.Spec()
	require.NoError(t, err)
	require.Equal(t, uint32(unsafe.Sizeof(bpf.NetKey{})), spec.Maps["net_rules"].KeySize)
	require.Equal(t, uint32(unsafe.Sizeof(bpf.InodeKey{})), spec.Maps["fs_rules"].KeySize)
	require.Equal(t, ebpf.LPMTrie, spec.Maps["net_rules"].Type)
	require.Equal(t, ebpf.HashOfMaps, spec.Maps["events"].Type)
	require.Equal(t, ebpf.RingBuf, spec.Maps["events"].InnerMap.Type)
	for _, name := range []string{"file_guard", "net_guard", "send_guard", "proc_guard", "fork_guard", "exit_guard", "create_guard", "link_guard"} {
		require.Contains(t, spec.Programs, name)
	}
}

func TestAttachNotBPFFS(t *testing.T) {
	_, err := bpf.Attach(t.TempDir())
	require.ErrorIs(t, err, bpf.ErrNotBPFFS)
}

// TestAttach loads and attaches every program on an enforcing kernel, and a
// second Attach reuses the pins.
func TestAttach(t *testing.T) {
	o, root := attach(t, "mcpguard-test-attach")
	require.True(t, o.Loaded)
	require.NoError(t, o.Close())
	_, err := os.Stat(filepath.Join(root, bpf.Version(), "links", "file_guard"))
	require.NoError(t, err, "links are pinned")

	o2, err := bpf.Attach(root)
	require.NoError(t, err)
	require.False(t, o2.Loaded, "second attach reuses the pinned programs")
	rb, err := o2.NewSessionEvents()
	require.NoError(t, err)
	require.NoError(t, o2.Events.Put(uint64(42), rb))
	require.NoError(t, o2.Events.Delete(uint64(42)))
	require.NoError(t, rb.Close())
	require.NoError(t, o2.Close())
}

// attach loads and attaches the programs with their pins under
// /sys/fs/bpf/<name>, skipping where the kernel refuses BPF LSM; the pins
// are removed at cleanup.
func attach(t *testing.T, name string) (*bpf.Objects, string) {
	t.Helper()
	testenv.RequireBPF(t)
	root := filepath.Join("/sys/fs/bpf", name)
	o, err := bpf.Attach(root)
	if errors.Is(err, unix.EPERM) || errors.Is(err, ebpf.ErrNotSupported) {
		testenv.SkipIfNotSupported(t, errors.Join(guard.ErrKernelRefused, err))
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bpf.Detach(root)) })
	return o, root
}
