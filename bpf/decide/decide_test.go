//go:build linux

package decide

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard/sandbox"
)

func load(t *testing.T) *decideObjects {
	t.Helper()
	var objs decideObjects
	err := loadDecideObjects(&objs, nil)
	if errors.Is(err, unix.EPERM) || errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("socket filters cannot be loaded here (root: %v): %v", os.Geteuid() == 0, err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { objs.Close() })
	return &objs
}

func run(t *testing.T, objs *decideObjects, req decideDecideReq) uint32 {
	t.Helper()
	// The kernel takes the first 14 bytes as the Ethernet header and
	// hands the program what follows.
	var buf bytes.Buffer
	buf.Write(make([]byte, 14))
	require.NoError(t, binary.Write(&buf, binary.NativeEndian, req))
	data := buf.Bytes()
	ret, err := objs.Decide.Run(&ebpf.RunOptions{Data: data})
	if errors.Is(err, unix.EPERM) || errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("BPF_PROG_TEST_RUN refused: %v", err)
	}
	require.NoError(t, err)
	require.LessOrEqual(t, ret, uint32(1), "the harness did not understand the request")
	return ret
}

// TestSocketDenied: the socket_create rule, as socket_guard applies it.
func TestSocketDenied(t *testing.T) {
	objs := load(t)
	for _, tc := range []struct {
		name        string
		family, typ uint32
		deny        bool
	}{
		{"tcp4", unix.AF_INET, unix.SOCK_STREAM, false},
		{"udp6 cloexec", unix.AF_INET6, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC, false},
		{"raw4", unix.AF_INET, unix.SOCK_RAW, true},
		{"raw6 nonblock", unix.AF_INET6, unix.SOCK_RAW | unix.SOCK_NONBLOCK, true},
		{"packet raw", unix.AF_PACKET, unix.SOCK_RAW, true},
		{"packet dgram", unix.AF_PACKET, unix.SOCK_DGRAM, true},
		{"sock_packet", unix.AF_INET, unix.SOCK_PACKET, true},
		{"unix stream", unix.AF_UNIX, unix.SOCK_STREAM, false},
		{"netlink raw", unix.AF_NETLINK, unix.SOCK_RAW, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := run(t, objs, decideDecideReq{Op: 1, Family: tc.family, Type: tc.typ})
			assert.Equal(t, tc.deny, got == 1)
		})
	}
}

// TestNetLookup: net_rules keys written by the controller
// (guard/sandbox.NetKey), looked up as check_addr does.
func TestNetLookup(t *testing.T) {
	objs := load(t)
	const policy, other = 7, 8
	// Keys as the controller writes them.
	put := func(pol uint64, prefix string, port uint16) {
		require.NoError(t, objs.Rules.Put(sandbox.NetKey(pol, netip.MustParsePrefix(prefix), port), uint32(1)))
	}
	put(policy, "127.0.0.2/32", 8080)
	put(policy, "10.0.0.0/8", 0) // any port
	put(policy, "2001:db8::/32", 443)
	put(other, "192.0.2.1/32", 53)

	req := func(pol uint64, addr string, port uint16) decideDecideReq {
		a := netip.MustParseAddr(addr)
		r := decideDecideReq{Op: 2, Policy: pol, Port: port, Family: unix.AF_INET6}
		if a.Is4() {
			r.Family = unix.AF_INET
			v4 := a.As4()
			copy(r.Addr[:], v4[:])
		} else {
			r.Addr = a.As16()
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		req   decideDecideReq
		allow bool
	}{
		{"exact host and port", req(policy, "127.0.0.2", 8080), true},
		{"same host, other port", req(policy, "127.0.0.2", 8081), false},
		{"neighbour host", req(policy, "127.0.0.1", 8080), false},
		{"any-port prefix", req(policy, "10.1.2.3", 22), true},
		{"outside the prefix", req(policy, "11.0.0.1", 22), false},
		{"v6 prefix", req(policy, "2001:db8:1::5", 443), true},
		{"v6 prefix, other port", req(policy, "2001:db8:1::5", 80), false},
		{"another session's rule", req(policy, "192.0.2.1", 53), false},
		{"that session itself", req(other, "192.0.2.1", 53), true},
		{"v4-mapped v6 destination", req(policy, "::ffff:127.0.0.2", 8080), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.allow, run(t, objs, tc.req) == 1)
		})
	}
}
