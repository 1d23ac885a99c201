//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/bpf"
	"github.com/mcpguard/mcpguard/guard/changes"
	"github.com/mcpguard/mcpguard/guard/launch"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/guard/runtime"
	"github.com/mcpguard/mcpguard/guard/validate"
)

// FileRule admits a file or directory tree (by its inode: a directory
// admits what is below it, across mount points).
type FileRule struct {
	Path   string
	Access uint32 // bpf.AccRead | bpf.AccWrite | bpf.AccLinksOK
}

// NetRule admits a destination prefix on one port (0: any port).
type NetRule struct {
	Prefix netip.Prefix
	Port   uint16
}

// Rules are a policy compiled for the kernel, before paths are turned into
// inodes.
type Rules struct {
	Files []FileRule
	Exec  []string
	Net   []NetRule
}

// Baseline is what every guarded server may read (or write) besides its
// policy: the system list both backends share (runtime.System), /proc
// and /sys (another process's /proc/<pid> stays denied in the kernel), and
// the harmless device nodes. It leaves out the rest of /etc (shadow, ssh
// host keys), home directories, /tmp, /var and /dev/shm. Hard links below
// the system trees are normal (ACC_LINKS_OK).
func Baseline() []FileRule {
	ro := bpf.AccRead | bpf.AccLinksOK
	rw := bpf.AccRead | bpf.AccWrite
	var r []FileRule
	for _, p := range append(runtime.System(), "/proc", "/sys", "/dev/urandom", "/dev/random", "/dev/zero") {
		r = append(r, FileRule{Path: p, Access: ro})
	}
	for _, p := range []string{"/dev/null", "/dev/full", "/dev/tty", "/dev/pts", "/dev/ptmx"} {
		r = append(r, FileRule{Path: p, Access: rw})
	}
	return r
}

// Protected is the protected map: guard/launch's lists of names no guarded
// process may write, create, rename or unlink even inside its write roots,
// because the user's tools run or obey what they contain.
func Protected() map[bpf.NameKey]uint32 {
	m := map[bpf.NameKey]uint32{}
	for _, n := range launch.ProtectedNames {
		m[bpf.MakeNameKey(n, "")] = bpf.ProtName
	}
	for _, n := range launch.ProtectedTrees {
		m[bpf.MakeNameKey(n, "")] = bpf.ProtTree
	}
	for _, r := range launch.MustGitRules() {
		m[bpf.MakeNameKey(r.Name, r.Parent)] = bpf.GitRule + uint32(r.Kind)
	}
	for _, n := range launch.OutsideGitNames {
		m[bpf.MakeNameKey(n, "")] = bpf.ProtOutsideGit
	}
	return m
}

// ExecConfig is the exec_config map's entries for a session whose policy
// refuses writes to the files package changes reports
// (filesystem.protect_exec_config).
func ExecConfig(policy uint64) map[bpf.ExecKey]uint32 {
	m := map[bpf.ExecKey]uint32{}
	for _, n := range changes.Names {
		m[bpf.MakeExecKey(policy, n)] = bpf.ExecName
	}
	for _, n := range changes.Suffixes {
		m[bpf.MakeExecKey(policy, n)] = bpf.ExecSuffix
	}
	for _, n := range changes.Trees {
		m[bpf.MakeExecKey(policy, n)] = bpf.ExecTree
	}
	m[bpf.MakeExecKey(policy, "node_modules")] = bpf.ExecSkip
	return m
}

// Compile turns a policy into kernel rules. Write roots are readable too.
// Each exec allow-list entry is also readable (the kernel opens a binary
// before it runs it). Host names are resolved now (a name is a set of
// addresses to the kernel); "localhost" is 127.0.0.1 and ::1 without DNS.
func Compile(ctx context.Context, p *policy.Policy, r validate.Resolver) (Rules, error) {
	var out Rules
	for _, path := range p.Filesystem.Read {
		if !filepath.IsAbs(path) {
			return Rules{}, fmt.Errorf("filesystem read root %q: not absolute", path)
		}
		out.Files = append(out.Files, FileRule{Path: filepath.Clean(path), Access: bpf.AccRead})
	}
	for _, path := range p.Filesystem.Write {
		if !filepath.IsAbs(path) {
			return Rules{}, fmt.Errorf("filesystem write root %q: not absolute", path)
		}
		out.Files = append(out.Files, FileRule{Path: filepath.Clean(path), Access: bpf.AccRead | bpf.AccWrite})
	}
	for _, path := range p.Exec.Allow {
		if !filepath.IsAbs(path) {
			return Rules{}, fmt.Errorf("exec %q: not absolute", path)
		}
		out.Exec = append(out.Exec, filepath.Clean(path))
		out.Files = append(out.Files, FileRule{Path: filepath.Clean(path), Access: bpf.AccRead | bpf.AccLinksOK})
	}
	for _, rule := range p.Network.Allow {
		prefixes, err := hostPrefixes(ctx, rule.Host, r)
		if err != nil {
			return Rules{}, err
		}
		ports := []uint16{0}
		if len(rule.Ports) > 0 {
			ports = ports[:0]
			for _, port := range rule.Ports {
				if port < 1 || port > 65535 {
					return Rules{}, fmt.Errorf("network rule %q: port %d out of range", rule.Host, port)
				}
				ports = append(ports, uint16(port))
			}
		}
		for _, pr := range prefixes {
			for _, port := range ports {
				out.Net = append(out.Net, NetRule{Prefix: pr, Port: port})
			}
		}
	}
	return out, nil
}

// hostPrefixes turns a rule's host (an IP, a CIDR prefix, "*" or a name)
// into prefixes.
func hostPrefixes(ctx context.Context, host string, r validate.Resolver) ([]netip.Prefix, error) {
	switch host {
	case "":
		return nil, errors.New("network rule: empty host")
	case "*":
		return []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}, nil
	case "localhost":
		return []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}, nil
	}
	if strings.Contains(host, "/") {
		pr, err := netip.ParsePrefix(host)
		if err != nil {
			return nil, fmt.Errorf("network rule %q: %w", host, err)
		}
		return []netip.Prefix{pr.Masked()}, nil
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}, nil
	}
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("network rule %q: resolve: %w", host, err)
	}
	var out []netip.Prefix
	for _, a := range addrs {
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// NetKey encodes a rule as the kernel's LPM key: IPv4 prefixes become
// IPv4-mapped IPv6 prefixes, so an AF_INET6 connect to ::ffff:127.0.0.1
// meets the same rule as an AF_INET connect to 127.0.0.1.
func NetKey(policyID uint64, pr netip.Prefix, port uint16) bpf.NetKey {
	var k bpf.NetKey
	addr := pr.Addr()
	bits := pr.Bits()
	a16 := addr.As16()
	if addr.Is4() {
		bits += 96
		a16 = v4mapped(addr.As4())
	}
	k.Prefixlen = uint32(bpf.NetPrefixBase + bits)
	putPolicy(k.Policy[:], policyID)
	k.Port = [2]uint8{uint8(port >> 8), uint8(port)}
	k.Addr = a16
	return k
}

func v4mapped(a [4]byte) [16]byte {
	var b [16]byte
	b[10], b[11] = 0xff, 0xff
	copy(b[12:], a[:])
	return b
}

// putPolicy writes the policy id in host (little-endian) order, as the BPF
// side copies it from a u64.
func putPolicy(b []byte, id uint64) {
	for i := range 8 {
		b[i] = byte(id >> (8 * i))
	}
}

// KernelDev converts a stat(2) st_dev to the kernel's internal dev_t
// (major << 20 | minor), which is what inode->i_sb->s_dev holds.
func KernelDev(stDev uint64) uint32 {
	return unix.Major(stDev)<<20 | unix.Minor(stDev)
}

// InodeKeyOf names path's inode (following symlinks) for the kernel: the
// (dev, ino) pair the hooks read from the inode they are given.
//
// On overlayfs that is the overlay's inode, whose device is the overlay's
// superblock. stat(2) agrees for directories, but for a file whose layers
// are on different file systems (a container's root, the VM's $HOME
// overlay) without xino, it reports the real inode number with a
// per-layer pseudo device: the file's key then takes the device of its
// directory, which stat reports as the overlay's own. (The inode number
// is the real one on both sides; samefs and xino overlays report the
// overlay's device already.)
func InodeKeyOf(policyID uint64, path string) (bpf.InodeKey, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return bpf.InodeKey{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	dev := st.Dev
	if st.Mode&unix.S_IFMT != unix.S_IFDIR && onOverlay(path) {
		if real, err := filepath.EvalSymlinks(path); err == nil {
			var dst unix.Stat_t
			if dir := filepath.Dir(real); onOverlay(dir) && unix.Stat(dir, &dst) == nil {
				dev = dst.Dev
			}
		}
	}
	return bpf.InodeKey{Policy: policyID, Ino: st.Ino, Dev: KernelDev(dev)}, nil
}

// overlayMagic is OVERLAYFS_SUPER_MAGIC.
const overlayMagic = 0x794c7630

func onOverlay(path string) bool {
	var fs unix.Statfs_t
	return unix.Statfs(path, &fs) == nil && fs.Type == overlayMagic
}

// ServerFiles returns the rules a server's own command needs, from the
// runtime resolver that the Landlock backend uses too: each program of
// the runtime may run (and be read), each runtime tree is readable (hard
// links inside allowed: package stores such as pnpm's link files). It
// also returns the command to start (npx and shims resolved).
func ServerFiles(ctx context.Context, r *runtime.Resolver, c runtime.Command) (files []FileRule, exec []string, argv []string, err error) {
	rt, err := r.Resolve(ctx, c)
	if err != nil {
		return nil, nil, nil, err
	}
	files, exec = RuntimeFiles(rt)
	return files, exec, rt.Argv, nil
}

// RuntimeFiles turns runtime grants into kernel rules.
func RuntimeFiles(rt *runtime.Runtime) (files []FileRule, exec []string) {
	for _, p := range rt.Exec {
		exec = append(exec, p)
		files = append(files, FileRule{Path: p, Access: bpf.AccRead | bpf.AccLinksOK})
	}
	for _, p := range rt.Read {
		files = append(files, FileRule{Path: p, Access: bpf.AccRead | bpf.AccLinksOK})
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, exec
}
