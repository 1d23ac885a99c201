//go:build linux

package sandbox

import (
	"context"
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/bpf"
	"github.com/mcpguard/mcpguard/guard/launch"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/guard/runtime"
	"github.com/mcpguard/mcpguard/internal/testenv"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &os.PathError{Op: "lookup", Path: host, Err: os.ErrNotExist}
}

func TestCompile(t *testing.T) {
	p := &policy.Policy{
		Filesystem: policy.Filesystem{Read: []string{"/ws/ro/"}, Write: []string{"/ws"}},
		Exec:       policy.Exec{Allow: []string{"/usr/bin/git"}},
		Network: policy.Network{Allow: []policy.NetRule{
			{Host: "127.0.0.2", Ports: []int{8080, 8081}},
			{Host: "10.0.0.0/8"},
			{Host: "localhost", Ports: []int{53}},
			{Host: "api.example", Ports: []int{443}},
		}},
	}
	r, err := Compile(context.Background(), p, fakeResolver{"api.example": {netip.MustParseAddr("::ffff:192.0.2.7")}})
	require.NoError(t, err)
	assert.Equal(t, []FileRule{
		{Path: "/ws/ro", Access: bpf.AccRead},
		{Path: "/ws", Access: bpf.AccRead | bpf.AccWrite},
		{Path: "/usr/bin/git", Access: bpf.AccRead | bpf.AccLinksOK},
	}, r.Files)
	assert.Equal(t, []string{"/usr/bin/git"}, r.Exec)
	assert.Equal(t, []NetRule{
		{netip.MustParsePrefix("127.0.0.2/32"), 8080},
		{netip.MustParsePrefix("127.0.0.2/32"), 8081},
		{netip.MustParsePrefix("10.0.0.0/8"), 0},
		{netip.MustParsePrefix("127.0.0.1/32"), 53},
		{netip.MustParsePrefix("::1/128"), 53},
		{netip.MustParsePrefix("192.0.2.7/32"), 443}, // a mapped answer is unmapped
	}, r.Net)
}

func TestCompileErrors(t *testing.T) {
	for name, p := range map[string]*policy.Policy{
		"relative read":  {Filesystem: policy.Filesystem{Read: []string{"ws"}}},
		"relative write": {Filesystem: policy.Filesystem{Write: []string{"./ws"}}},
		"relative exec":  {Exec: policy.Exec{Allow: []string{"git"}}},
		"bad port":       {Network: policy.Network{Allow: []policy.NetRule{{Host: "127.0.0.1", Ports: []int{70000}}}}},
		"bad cidr":       {Network: policy.Network{Allow: []policy.NetRule{{Host: "10.0.0.0/99"}}}},
		"empty host":     {Network: policy.Network{Allow: []policy.NetRule{{Host: ""}}}},
		"unresolvable":   {Network: policy.Network{Allow: []policy.NetRule{{Host: "nowhere.example"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Compile(context.Background(), p, fakeResolver{})
			require.Error(t, err)
		})
	}
}

// The LPM key must put the policy id, then the port, then the address, so
// that a prefix covers a policy's rules only and IPv4 meets IPv4-mapped.
func TestNetKey(t *testing.T) {
	require.Equal(t, uintptr(32), unsafe.Sizeof(bpf.NetKey{}))
	k := NetKey(0x0102030405060708, netip.MustParsePrefix("127.0.0.0/8"), 8080)
	assert.Equal(t, uint32(64+16+96+8), k.Prefixlen)
	assert.Equal(t, uint64(0x0102030405060708), binary.LittleEndian.Uint64(k.Policy[:]), "policy id in host order, as the BPF side copies a u64")
	assert.Equal(t, [2]uint8{0x1f, 0x90}, k.Port, "port big endian")
	assert.Equal(t, [16]uint8{10: 0xff, 11: 0xff, 12: 127}, k.Addr)

	mapped := NetKey(1, netip.MustParsePrefix("::ffff:127.0.0.1/128"), 0)
	v4 := NetKey(1, netip.MustParsePrefix("127.0.0.1/32"), 0)
	assert.Equal(t, v4, mapped, "IPv4 and IPv4-mapped IPv6 are one key")

	v6 := NetKey(1, netip.MustParsePrefix("::1/128"), 443)
	assert.Equal(t, uint32(64+16+128), v6.Prefixlen)
	assert.Equal(t, [16]uint8{15: 1}, v6.Addr)

	any6 := NetKey(1, netip.MustParsePrefix("::/0"), 0)
	assert.Equal(t, uint32(64+16), any6.Prefixlen)
}

// lpmMatch is the LPM trie's rule: the first prefixlen bits of the key's
// data (after prefixlen) are equal.
func lpmMatch(rule, probe bpf.NetKey) bool {
	rb := (*[32]byte)(unsafe.Pointer(&rule))[4:]
	pb := (*[32]byte)(unsafe.Pointer(&probe))[4:]
	n := int(rule.Prefixlen)
	for i := 0; i < n; i++ {
		if (rb[i/8]>>(7-i%8))&1 != (pb[i/8]>>(7-i%8))&1 {
			return false
		}
	}
	return true
}

// The kernel looks up (policy, port, address) at full length, then with
// port 0; these cases check that the encoded rules admit exactly what they
// should under that scheme.
func TestNetKeyMatching(t *testing.T) {
	rules := []bpf.NetKey{
		NetKey(7, netip.MustParsePrefix("127.0.0.2/32"), 8080),
		NetKey(7, netip.MustParsePrefix("10.0.0.0/8"), 0),
	}
	allowed := func(policyID uint64, addr string, port uint16) bool {
		a := netip.MustParseAddr(addr)
		for _, p := range []uint16{port, 0} {
			probe := NetKey(policyID, netip.PrefixFrom(a, a.BitLen()), p)
			for _, r := range rules {
				if lpmMatch(r, probe) {
					return true
				}
			}
		}
		return false
	}
	assert.True(t, allowed(7, "127.0.0.2", 8080))
	assert.True(t, allowed(7, "::ffff:127.0.0.2", 8080))
	assert.False(t, allowed(7, "127.0.0.2", 8081))
	assert.False(t, allowed(7, "127.0.0.1", 8080), "the sink next door")
	assert.True(t, allowed(7, "10.200.3.4", 1))
	assert.False(t, allowed(7, "11.0.0.1", 1))
	assert.False(t, allowed(8, "127.0.0.2", 8080), "another session's rule")
	assert.False(t, allowed(7, "::1", 8080))
}

func TestKernelDev(t *testing.T) {
	assert.Equal(t, uint32(8<<20|1), KernelDev(unix.Mkdev(8, 1)))
	assert.Equal(t, uint32(259<<20|300), KernelDev(unix.Mkdev(259, 300)))
}

func TestInodeKeyOf(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(f, nil, 0o600))
	require.NoError(t, os.Symlink(f, filepath.Join(dir, "l")))
	k1, err := InodeKeyOf(3, f)
	require.NoError(t, err)
	k2, err := InodeKeyOf(3, filepath.Join(dir, "l"))
	require.NoError(t, err)
	assert.Equal(t, k1, k2, "a symlink names its target")
	assert.Equal(t, uint64(3), k1.Policy)
	_, err = InodeKeyOf(3, filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestServerFiles(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "srv", "server.sh")
	require.NoError(t, os.MkdirAll(filepath.Dir(script), 0o755))
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh -e\necho 1\n"), 0o755))
	res := runtime.New(runtime.Options{})
	files, execs, argv, err := ServerFiles(context.Background(), res, runtime.Command{Argv: []string{script, "--ws", dir}, Dir: dir})
	require.NoError(t, err)
	assert.Equal(t, []string{script, "--ws", dir}, argv)
	assert.Contains(t, execs, script)
	assert.Contains(t, execs, "/bin/sh")
	// The script's directory and the one above it (shared modules): one tree.
	assert.Contains(t, files, FileRule{Path: dir, Access: bpf.AccRead | bpf.AccLinksOK})
	for _, f := range files {
		assert.NotEqual(t, dir+"/data", f.Path, "a later argument is data, not code")
	}

	_, _, _, err = ServerFiles(context.Background(), res, runtime.Command{Argv: []string{"no-such-server-program"}, Env: []string{"PATH=" + dir}})
	require.ErrorIs(t, err, runtime.ErrUnresolved)
}

func TestParseCgroup2Mount(t *testing.T) {
	mi := `25 1 0:23 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw
35 25 0:31 / /sys/fs/cgroup/unified rw,nosuid,nodev - cgroup2 cgroup2 rw
`
	m, err := parseCgroup2Mount([]byte(mi))
	require.NoError(t, err)
	assert.Equal(t, "/sys/fs/cgroup/unified", m)
	_, err = parseCgroup2Mount([]byte("25 1 0:23 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"))
	require.ErrorIs(t, err, ErrNoCgroup2)
}

func TestHasLSM(t *testing.T) {
	assert.True(t, hasLSM("lockdown,capability,landlock,yama,bpf\n", "bpf"))
	assert.False(t, hasLSM("lockdown,capability,bpffoo", "bpf"))
}

func TestProtected(t *testing.T) {
	p := Protected()
	assert.Equal(t, bpf.ProtName, p[bpf.MakeNameKey(".envrc", "")])
	_, listed := p[bpf.MakeNameKey("hooks", ".git")]
	assert.False(t, listed, "below a .git only git's data is listed; hooks is protected as everything else")
	assert.Equal(t, bpf.GitRule+uint32(launch.GitFixedOpen), p[bpf.MakeNameKey("refs", ".git")])
	assert.Equal(t, bpf.GitRule+uint32(launch.GitFixedClosed), p[bpf.MakeNameKey("replace", "refs")])
	assert.Equal(t, bpf.GitRule+uint32(launch.GitDataEntry), p[bpf.MakeNameKey("logs", ".git")])
	assert.Equal(t, bpf.GitRule+uint32(launch.GitFixedClosed), p[bpf.MakeNameKey("info", "objects")])
	assert.Equal(t, bpf.GitRule+uint32(launch.GitFamily), p[bpf.MakeNameKey("index.stash.", ".git")])
	assert.Equal(t, bpf.ProtTree, p[bpf.MakeNameKey(".vscode", "")])
	assert.Equal(t, bpf.ProtOutsideGit, p[bpf.MakeNameKey("HEAD", "")])
	assert.LessOrEqual(t, len(p), 256, "the protected map holds 256 entries (guard.bpf.c)")
	k := bpf.MakeNameKey(".bashrc", "")
	assert.Equal(t, int8('.'), k.Name[0])
	assert.Equal(t, int8(0), k.Name[7], "zero padded, as the kernel's bpf_probe_read_kernel_str leaves it")
	long := bpf.MakeNameKey(strings.Repeat("x", 40), "")
	assert.Equal(t, int8(0), long.Name[31], "always NUL terminated")
}

// On an overlay whose layers are on different file systems, a file's key
// carries the overlay's device (what the hooks see on its inode), not the
// per-layer pseudo device stat reports; a directory's key already does.
func TestInodeKeyOnOverlay(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting an overlay needs root")
	}
	lower := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(lower, "f"), []byte("x"), 0o644))
	mnt := testenv.Overlay(t, lower)

	var root, file unix.Stat_t
	require.NoError(t, unix.Stat(mnt, &root))
	require.NoError(t, unix.Stat(filepath.Join(mnt, "f"), &file))
	k, err := InodeKeyOf(1, filepath.Join(mnt, "f"))
	require.NoError(t, err)
	assert.Equal(t, KernelDev(root.Dev), k.Dev, "the overlay's device")
	assert.Equal(t, file.Ino, k.Ino, "the real inode number, as i_ino holds it")
	if file.Dev == root.Dev {
		t.Log("this overlay reports one device for all (samefs or xino): nothing to correct")
	}
	kd, err := InodeKeyOf(1, mnt)
	require.NoError(t, err)
	assert.Equal(t, bpf.InodeKey{Policy: 1, Ino: root.Ino, Dev: KernelDev(root.Dev)}, kd)
}
