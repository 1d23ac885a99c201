// Package seatbelt compiles a server's policy into a macOS Seatbelt profile
// (SBPL, the Scheme-like language of sandbox-exec(1) and sandbox_init(3)),
// the design of docs/seatbelt.md. It is a compiler only: it has not been
// run on a Mac, so no config uses it and nothing here claims enforcement.
// The output is pinned by golden files so that its shape can be reviewed.
//
// The profile denies by default and allows what the policy grants: reads
// under the read roots, reads and writes under the write roots, exec of
// the allowed programs, outbound connections by port (Seatbelt's network
// filter knows only "localhost" and "*" as hosts). What the policy says
// and the profile cannot express is returned as notes, as the Landlock
// backend's Limits do.
package seatbelt

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path"
	"slices"
	"strings"

	"github.com/mcpguard/mcpguard/guard/policy"
)

// ErrBadPolicy wraps every reason a policy cannot be compiled.
var ErrBadPolicy = errors.New("policy cannot be compiled to a seatbelt profile")

// Options tune Compile.
type Options struct {
	// Canon maps a policy path to the path Seatbelt matches: the kernel
	// checks resolved paths, so a root under /tmp must be given as
	// /private/tmp. On a Mac this is filepath.EvalSymlinks; nil keeps
	// paths as they are (tests).
	Canon func(string) (string, error)
	// Runtime lists trees the server needs to read and execute to start
	// at all (system libraries, its interpreter): read and exec only,
	// never write. The caller computes them (the runtime resolver).
	Runtime []string
	// Program is the server's executable, allowed to exec and read.
	Program string
	// Tag is added to every denial ("with message"), so that a log
	// stream for it finds this session's denials.
	Tag string
}

// Profile is a compiled profile.
type Profile struct {
	// SBPL is the profile text, for sandbox-exec -p.
	SBPL string
	// Notes lists what the policy asks for and the profile cannot give.
	Notes []string
}

// Compile turns p into a Seatbelt profile.
func Compile(p *policy.Policy, o Options) (*Profile, error) {
	if hasControl(o.Tag) {
		return nil, fmt.Errorf("%w: tag %q holds a control character", ErrBadPolicy, o.Tag)
	}
	canon := o.Canon
	if canon == nil {
		canon = func(s string) (string, error) { return s, nil }
	}
	reads, writes, execs, nets := slices.Clone(p.Filesystem.Read), slices.Clone(p.Filesystem.Write), slices.Clone(p.Exec.Allow), slices.Clone(p.Network.Allow)
	// A tool's own grants are grants to the process: the kernel cannot
	// tell which tool call an open serves.
	for _, name := range slices.Sorted(maps.Keys(p.Tools)) {
		t := p.Tools[name]
		reads = append(reads, t.Read...)
		writes = append(writes, t.Write...)
		execs = append(execs, t.Exec...)
		nets = append(nets, t.Hosts...)
	}
	if o.Program != "" {
		execs = append(execs, o.Program)
	}
	var notes []string
	paths := func(what string, in []string) ([]string, error) {
		var out []string
		for _, s := range in {
			if hasControl(s) {
				return nil, fmt.Errorf("%w: %s %q holds a control character", ErrBadPolicy, what, s)
			}
			if !path.IsAbs(s) {
				return nil, fmt.Errorf("%w: %s %q is not absolute", ErrBadPolicy, what, s)
			}
			c, err := canon(path.Clean(s))
			if err != nil {
				return nil, fmt.Errorf("%w: %s %q: %w", ErrBadPolicy, what, s, err)
			}
			if hasControl(c) {
				return nil, fmt.Errorf("%w: %s %q resolves to %q, which holds a control character", ErrBadPolicy, what, s, c)
			}
			if c == "/" && what != "runtime" {
				return nil, fmt.Errorf("%w: %s %q is the whole filesystem", ErrBadPolicy, what, s)
			}
			out = append(out, c)
		}
		slices.Sort(out)
		return slices.Compact(out), nil
	}
	rt, err := paths("runtime", o.Runtime)
	if err != nil {
		return nil, err
	}
	rd, err := paths("filesystem.read", reads)
	if err != nil {
		return nil, err
	}
	wr, err := paths("filesystem.write", writes)
	if err != nil {
		return nil, err
	}
	ex, err := paths("exec.allow", execs)
	if err != nil {
		return nil, err
	}
	net, netNotes, err := network(nets)
	if err != nil {
		return nil, err
	}
	notes = append(notes, netNotes...)
	notes = append(notes,
		"sysctl-read and file-read-metadata of directories are allowed to all: Seatbelt programs need them to start and to resolve paths",
		"environment, rlimits and the process tree's lifetime are not Seatbelt's: the proxy and the process group handle them")

	var b writer
	b.line("(version 1)")
	b.line("(deny default (with message %s))", quote(o.Tag))
	b.line("")
	b.line("; processes: fork, and signals and inspection only inside the sandbox")
	b.line("(allow process-fork)")
	b.line("(allow signal (target same-sandbox))")
	b.line("(allow process-info* (target same-sandbox))")
	b.line("(allow sysctl-read)")
	b.line("(allow file-read-metadata (vnode-type DIRECTORY))")
	b.line("(allow file-read* file-write-data (literal \"/dev/null\"))")
	b.line("(allow file-read* (literal \"/dev/urandom\") (literal \"/dev/random\"))")
	b.filters("runtime: read and execute, never write", "(allow file-read* process-exec", "subpath", rt)
	b.filters("filesystem.read", "(allow file-read*", "subpath", rd)
	b.filters("filesystem.write (write implies read)", "(allow file-read* file-write*", "subpath", wr)
	b.filters("exec.allow and the server program", "(allow process-exec file-read*", "literal", ex)
	if len(net) > 0 {
		b.line("")
		b.line("; network.allow, by port (hosts are notes)")
		b.line("(allow network-outbound")
		for _, n := range net {
			b.line("  (remote ip %s)", quote(n))
		}
		b.line(")")
	}
	return &Profile{SBPL: b.String(), Notes: notes}, nil
}

// network reduces the policy's destinations to what Seatbelt's filter
// can say: "localhost:PORT" for loopback rules, "*:PORT" for the others,
// "*:*" for a rule without ports.
func network(rules []policy.NetRule) (out, notes []string, err error) {
	var reduced []string
	for _, n := range rules {
		host := "*"
		if isLoopback(n.Host) {
			host = "localhost"
		} else {
			reduced = append(reduced, n.Host)
		}
		if len(n.Ports) == 0 {
			out = append(out, host+":*")
			notes = append(notes, fmt.Sprintf("network.allow %q has no ports: every %s port is reachable", n.Host, map[string]string{"*": "remote", "localhost": "loopback"}[host]))
			continue
		}
		for _, port := range n.Ports {
			if port <= 0 || port > 65535 {
				return nil, nil, fmt.Errorf("%w: network.allow %q: port %d out of range", ErrBadPolicy, n.Host, port)
			}
			out = append(out, fmt.Sprintf("%s:%d", host, port))
		}
	}
	var named []string
	for _, h := range reduced {
		if _, err := netip.ParsePrefix(h); err != nil {
			if _, err := netip.ParseAddr(h); err != nil {
				named = append(named, h)
			}
		}
	}
	if len(named) > 0 {
		notes = append(notes, fmt.Sprintf("host names (%s) need DNS, which on macOS goes through mDNSResponder: the profile opens no mach service for it, so until that is measured on a Mac they may not resolve", strings.Join(named, ", ")))
	}
	if len(reduced) > 0 {
		slices.Sort(reduced)
		notes = append(notes, fmt.Sprintf("network.allow hosts %s reduced to their ports: Seatbelt names no remote host, so any host on those ports is reachable", strings.Join(slices.Compact(reduced), ", ")))
	}
	slices.Sort(out)
	return slices.Compact(out), notes, nil
}

// isLoopback reports whether a rule's host is loopback only (localhost,
// 127.0.0.0/8, ::1), which Seatbelt's "localhost" stands for.
func isLoopback(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	if pr, err := netip.ParsePrefix(h); err == nil {
		return pr.Addr().IsLoopback() && (pr.Addr().Is6() && pr.Bits() == 128 || pr.Addr().Is4() && pr.Bits() >= 8)
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

// quote writes s as an SBPL string literal: a backslash before '"' and
// '\\'. Compile refuses control characters before they get here, since
// no escape of them is documented for Seatbelt's reader.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// hasControl reports whether s holds a control character.
func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

type writer struct{ strings.Builder }

func (w *writer) line(format string, args ...any) {
	fmt.Fprintf(&w.Builder, format, args...)
	w.WriteByte('\n')
}

// filters writes one allow rule with a filter per path, or nothing.
func (w *writer) filters(comment, head, kind string, paths []string) {
	if len(paths) == 0 {
		return
	}
	w.line("")
	w.line("; %s", comment)
	w.line("%s", head)
	for _, p := range paths {
		w.line("  (%s %s)", kind, quote(p))
	}
	w.line(")")
}
