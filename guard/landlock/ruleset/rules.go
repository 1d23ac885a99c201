// Package ruleset holds a compiled Landlock ruleset, its wire form, and the
// re-exec wrapper that enforces it: a binary started with the hidden first
// argument "__landlock-exec" restricts itself and execve()s the server.
//
// It depends on nothing heavier than go-landlock, so its init runs early in
// any binary that links it (the wrapper does no more than runtime start-up
// before the execve); policy compilation lives in the parent package.
package ruleset

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mcpguard/mcpguard/guard/baseline"
)

// Access is what a path rule grants. The kernel masks are in apply.go.
type Access string

// Accesses a path rule can grant.
const (
	// Read grants read_file and read_dir.
	Read Access = "read"
	// Write grants Read plus write_file, truncate, make_{reg,dir,sym,sock,
	// fifo}, remove_{file,dir} and refer (moving files between write
	// roots). Never make_char or make_block: a device node in the
	// workspace would open the raw disk.
	Write Access = "write"
	// Exec grants execute and read_file (the kernel opens an executable
	// for reading too).
	Exec Access = "exec"
	// Device grants read_file and write_file on a device file (/dev/null).
	Device Access = "device"
)

// PathRule grants Access to Path and everything below it.
type PathRule struct {
	Path   string `json:"path"`
	Access Access `json:"access"`
	// Optional rules are skipped when the path does not exist (runtime
	// paths that differ between distributions). A policy root is not
	// optional: Compile drops a missing one with a note instead.
	Optional bool `json:"optional,omitempty"`
	// Why says where the rule came from (policy, runtime, program), for
	// Describe and for the operator reading a denial.
	Why string `json:"why,omitempty"`
}

// Rules is a compiled ruleset: what the wrapper hands to the kernel. It
// travels to the wrapper as JSON on its command line.
type Rules struct {
	Paths []PathRule `json:"paths"`
	// ConnectTCP lists the TCP ports the server may connect to. When the
	// kernel restricts UDP (ABI 10+), the same ports admit UDP sends.
	ConnectTCP []uint16 `json:"connect_tcp,omitempty"`
	// AnyConnect is set when a policy rule admits a host on any port:
	// Landlock cannot express "this host, every port", so connecting is
	// not restricted at all. Compile notes it.
	AnyConnect bool `json:"any_connect,omitempty"`
	// AllowUDP lets the server open UDP sockets on kernels where Landlock
	// cannot filter UDP by port (below ABI 10): set when the policy admits
	// port 53 (DNS). Otherwise the wrapper's socket filter refuses UDP
	// sockets there.
	AllowUDP bool `json:"allow_udp,omitempty"`
	// BindTCP lists the TCP ports the server may bind. The policy has no
	// listen rules, so it is empty for stdio servers: every bind is denied.
	BindTCP []uint16 `json:"bind_tcp,omitempty"`
	// Egress is set when the server is in a network namespace of its own
	// whose only way out is the guard's egress filter (a root proxy):
	// the ports above are its listeners', and addresses and names are
	// the filter's to judge.
	Egress bool `json:"egress,omitempty"`
	// Notes say what Compile could not express or dropped.
	Notes []string `json:"notes,omitempty"`
}

// Errors callers branch on.
var (
	// ErrBadRules is wrapped by Decode and Compile for rules that cannot
	// be applied (relative path, unknown access, port out of range).
	ErrBadRules = errors.New("bad landlock rules")
)

// Runtime is the set every guarded program gets, whatever its policy says,
// because without it nothing starts: the dynamic loader, shared libraries,
// interpreters' standard libraries (all under /usr on a merged-/usr system;
// /lib, /lib64, /bin, /sbin are symlinks into it or their own directories
// elsewhere), the loader cache and the few /etc files libc and TLS stacks
// read, the system-wide /proc files runtimes size themselves by, /sys (CPU
// and cgroup limits), and the harmless character devices.
//
// Not /proc as a whole: Landlock's ptrace scoping denies other processes'
// /proc/PID/mem, cwd and exe, but (measured on 6.18) not their environ,
// which would hand a server the secrets in the environment of the proxy
// or of any other process of the same user. The wrapper adds the server's
// own /proc/PID (what /proc/self resolves to), so a child reading its own
// /proc/self is denied: see docs/landlock.md.
//
// Read is read-only: no execute right. Only the server program, its
// interpreters and the policy's exec.allow entries are executable, so
// /usr/bin/curl or /bin/sh stay denied unless the policy lists them.
// Not included: /tmp, $HOME, the rest of /etc, /var, /root, /dev/shm.
func Runtime() []PathRule {
	var rules []PathRule
	add := func(a Access, paths ...string) {
		for _, p := range paths {
			rules = append(rules, PathRule{Path: p, Access: a, Optional: true, Why: "runtime"})
		}
	}
	add(Read, baseline.System()...) // shared with the BPF backend
	add(Read, "/proc/meminfo", "/proc/cpuinfo", "/proc/stat", "/proc/filesystems",
		"/proc/version", "/proc/uptime", "/proc/loadavg", "/proc/sys")
	add(Read, "/sys")
	add(Read, "/dev/urandom", "/dev/random")
	add(Device, "/dev/null", "/dev/zero", "/dev/full")
	return rules
}

// WriteRoots lists the paths r grants Write to.
func (r *Rules) WriteRoots() []string {
	var out []string
	for _, p := range r.Paths {
		if p.Access == Write {
			out = append(out, p.Path)
		}
	}
	return out
}

// NoNetwork reports whether r grants no network at all (no connect, no
// bind, no UDP): the server can then have a network namespace of its own.
func (r *Rules) NoNetwork() bool {
	return len(r.ConnectTCP) == 0 && !r.AnyConnect && !r.AllowUDP && len(r.BindTCP) == 0
}

// Encode returns the JSON the wrapper takes on its command line.
func (r *Rules) Encode() (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encode landlock rules: %w", err)
	}
	return string(b), nil
}

// Decode parses and checks the wrapper's rules argument.
func Decode(s string) (*Rules, error) {
	var r Rules
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRules, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the rules", ErrBadRules)
	}
	for _, p := range r.Paths {
		if !filepath.IsAbs(p.Path) {
			return nil, fmt.Errorf("%w: path %q is not absolute", ErrBadRules, p.Path)
		}
		if _, ok := mask(p.Access); !ok {
			return nil, fmt.Errorf("%w: path %q: unknown access %q", ErrBadRules, p.Path, p.Access)
		}
	}
	return &r, nil
}

// Describe lists the rules one per line, for docs, -v output and tests.
func (r *Rules) Describe() string {
	var b strings.Builder
	for _, p := range r.Paths {
		opt := ""
		if p.Optional {
			opt = " (if present)"
		}
		fmt.Fprintf(&b, "%-6s %s%s  [%s]\n", p.Access, p.Path, opt, p.Why)
	}
	if r.Egress {
		b.WriteString("network: own namespace, out only through the egress filter (no port rules)\n")
		return describeNotes(&b, r)
	}
	switch {
	case r.AnyConnect:
		b.WriteString("tcp connect: any port\n")
	case len(r.ConnectTCP) == 0:
		b.WriteString("tcp connect: none\n")
	default:
		fmt.Fprintf(&b, "tcp connect: ports %v\n", r.ConnectTCP)
	}
	if r.AllowUDP {
		b.WriteString("udp sockets: allowed (filtered by port from ABI 10)\n")
	} else {
		b.WriteString("udp sockets: denied below ABI 10, by port from ABI 10\n")
	}
	if len(r.BindTCP) == 0 {
		b.WriteString("tcp bind: none\n")
	} else {
		fmt.Fprintf(&b, "tcp bind: ports %v\n", r.BindTCP)
	}
	return describeNotes(&b, r)
}

func describeNotes(b *strings.Builder, r *Rules) string {
	for _, n := range r.Notes {
		fmt.Fprintf(b, "note: %s\n", n)
	}
	return b.String()
}
