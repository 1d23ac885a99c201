package landlock

import (
	"fmt"
	"strings"

	"github.com/mcpguard/mcpguard/guard/landlock/ruleset"
)

// Feature is something Landlock enforces from some ABI version on.
type Feature struct {
	ABI  int
	What string
}

// features lists, per ABI version, what the backend gets from the kernel.
// The ones past the running kernel's ABI are its limits.
func features() []Feature {
	return []Feature{
		{1, "filesystem read, write, execute and directory changes"},
		{2, "moving and linking files between directories (refer)"},
		{3, "truncation"},
		{4, "TCP connect and bind by port"},
		{5, "ioctl on device files"},
		{6, "scoping of signals and abstract unix sockets to the sandbox"},
		{7, "denials in the audit log after exec"},
		{9, "connect and send on pathname unix sockets"},
		{10, "UDP bind, connect and send by port"},
	}
}

// Enforced lists the features the given ABI gives.
func Enforced(abi int) []string {
	var out []string
	for _, f := range features() {
		if f.ABI <= abi {
			out = append(out, fmt.Sprintf("%s (ABI %d)", f.What, f.ABI))
		}
	}
	return out
}

// Missing lists the features the given ABI lacks, each with the ABI that
// brings it.
func Missing(abi int) []string {
	var out []string
	for _, f := range features() {
		if f.ABI > abi {
			out = append(out, fmt.Sprintf("%s (needs ABI %d)", f.What, f.ABI))
		}
	}
	return out
}

// limits returns the short text the results table shows for this backend
// on the given ABI with the given rules: what it cannot stop.
// With namespaces (a root proxy) the server's network is its own
// namespace, whose only way out is the egress filter: addresses, names
// and UDP are judged there, whatever the ABI.
func limits(abi int, r *Rules, namespaces bool) string {
	filter := ruleset.HasSocketFilter()
	parts := []string{fmt.Sprintf("landlock ABI %d", abi)}
	if namespaces {
		parts = append(parts, "network through the egress filter (own network namespace)")
	} else {
		parts = append(parts, "no network namespace (non-root proxy): network by port only, no IP filtering")
	}
	if abi < 4 && !namespaces {
		parts = append(parts, "no TCP rules (needs ABI 4)")
	}
	if r != nil && r.AnyConnect && !namespaces {
		parts = append(parts, "TCP connect unrestricted (a network rule has no ports)")
	}
	switch {
	case abi >= 10 || namespaces:
	case !filter || (r != nil && r.AllowUDP):
		parts = append(parts, "UDP not covered (needs ABI 10)")
	default:
		parts = append(parts, "UDP sockets refused outright (seccomp; by port needs ABI 10)")
	}
	if !filter {
		parts = append(parts, "MPTCP, SCTP and raw sockets not covered")
	}
	switch {
	case abi >= 9:
	case filter:
		// SeccompOptions' DenyUnix: what Landlock cannot judge is refused.
		parts = append(parts, "unix sockets refused outright (seccomp; socketpair kept; by path needs ABI 9)")
	default:
		parts = append(parts, "pathname unix sockets not covered (needs ABI 9)")
	}
	if abi < 6 {
		parts = append(parts, "signals and abstract unix sockets not scoped (needs ABI 6)")
	}
	return strings.Join(parts, "; ")
}
