// Package landlock is an L3 backend on Landlock, for kernels that refuse
// BPF LSM (locked-down kernels, containers without CAP_BPF, kernels booted
// without lsm=bpf). Landlock needs no privilege and binds every child.
//
// The same per-server policy as the BPF backend compiles to a Landlock
// ruleset (Compile): filesystem read, write and execute rules, TCP connect
// and bind by port, IPC scoping. Prepare rewrites the server command to run
// a re-exec wrapper (this binary with the hidden argument "__landlock-exec")
// that restricts itself and then execve()s the real server, so the server is
// under the ruleset from its first instruction and every child inherits it.
//
// Landlock filters network access by port only: it cannot tell 127.0.0.1
// from 127.0.0.2. Limits lists what the running kernel leaves uncovered.
package landlock

import (
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpguard/mcpguard/guard/landlock/ruleset"
	"github.com/mcpguard/mcpguard/guard/policy"
)

// Compile turns a policy into Landlock rules. It adds the runtime set
// (ruleset.Runtime) that every program needs to start at all, and nothing for the
// server program itself: Prepare adds that from the command it is given.
//
// Tool-scoped grants (tools.NAME.read, write, exec, hosts) join the
// server-wide ones.
//
//   - filesystem.read roots: Read.
//   - filesystem.write roots: Write.
//   - exec.allow entries: Exec on the file, plus Exec on its ELF
//     interpreter or #! interpreter (resolved when the wrapper is prepared).
//   - network.allow: the ports, for TCP connect. Hosts are dropped (noted):
//     Landlock filters by port only. A rule without ports admits every port.
//   - UDP: by the same ports from ABI 10; below it UDP sockets are refused
//     unless the policy admits port 53 (Rules.AllowUDP).
//   - TCP bind: nothing is allowed.
//
// A root that does not exist is dropped with a note, which denies it: the
// kernel needs an existing file to anchor a rule on.
func Compile(p *policy.Policy, exists func(string) bool) (*Rules, error) {
	r := &Rules{Paths: ruleset.Runtime()}
	reads, writes, execs := p.Filesystem.Read, p.Filesystem.Write, p.Exec.Allow
	nets := p.Network.Allow
	// A tool's own grants (operator overrides land there) are grants to the
	// process: the kernel cannot tell which tool call an open serves.
	for _, name := range slices.Sorted(maps.Keys(p.Tools)) {
		t := p.Tools[name]
		reads = append(reads, t.Read...)
		writes = append(writes, t.Write...)
		execs = append(execs, t.Exec...)
		nets = append(nets, t.Hosts...)
	}
	for _, root := range reads {
		if err := addRoot(r, root, Read, "policy filesystem.read", exists); err != nil {
			return nil, err
		}
	}
	for _, root := range writes {
		if err := addRoot(r, root, Write, "policy filesystem.write", exists); err != nil {
			return nil, err
		}
	}
	for _, bin := range execs {
		if err := addRoot(r, bin, Exec, "policy exec.allow", exists); err != nil {
			return nil, err
		}
	}
	var hosts []string
	for _, n := range nets {
		if len(n.Ports) == 0 {
			r.AnyConnect = true
			r.Notes = append(r.Notes, fmt.Sprintf("network.allow %q has no ports: Landlock filters by port only, so TCP connect is not restricted at all", n.Host))
			continue
		}
		for _, port := range n.Ports {
			if port <= 0 || port > math.MaxUint16 {
				return nil, fmt.Errorf("%w: network.allow %q: port %d out of range", ruleset.ErrBadRules, n.Host, port)
			}
			r.ConnectTCP = append(r.ConnectTCP, uint16(port))
		}
		hosts = append(hosts, n.Host)
	}
	if len(hosts) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("network.allow hosts %s reduced to their ports: any host on those ports is reachable", strings.Join(hosts, ", ")))
	}
	// UDP where Landlock cannot filter it by port (below ABI 10): only if
	// the policy admits DNS by name. A host rule without ports stands for
	// the host's TCP services (URLs); it does not open UDP to everyone.
	r.AllowUDP = slices.Contains(r.ConnectTCP, 53)
	slices.Sort(r.ConnectTCP)
	r.ConnectTCP = slices.Compact(r.ConnectTCP)
	return r, nil
}

func addRoot(r *Rules, path string, a Access, why string, exists func(string) bool) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%w: %s root %q is not absolute", ruleset.ErrBadRules, why, path)
	}
	path = filepath.Clean(path)
	if exists != nil && !exists(path) {
		r.Notes = append(r.Notes, fmt.Sprintf("%s root %s does not exist: denied", why, path))
		return nil
	}
	r.Paths = append(r.Paths, ruleset.PathRule{Path: path, Access: a, Why: why})
	return nil
}
