// Package egress is the guard's egress filter: the one way out of a
// guarded server's network namespace.
//
// The launcher gives every guarded server a network namespace of its own
// (package launch). When the policy grants network, the guard joins that
// namespace from outside (setns on one locked thread of its own), makes
// every address local to its loopback (an "AnyIP" route for 0.0.0.0/0 and
// ::/0), and creates there the only listeners the namespace has:
//
//   - for an address rule with ports (a database at 127.0.0.1:5432), a TCP
//     and a UDP listener on exactly that address and port, forwarded from
//     the host's namespace to the same address and port;
//   - for every other rule (a prefix, an address without ports, a host
//     name), one catch-all TCP listener per family, to which a BPF
//     sk_lookup program (package bpf/steer) attached to the namespace
//     steers connections bound for a destination the rule may admit,
//     whatever the address and port; the filter decides again from the
//     connection's original destination;
//   - for host name rules (api.github.com, *.example.com), a DNS responder
//     on the address the server's resolv.conf names, which answers a
//     granted name with a fake address of its own (198.18.0.0/15) and
//     every other name with NXDOMAIN, never asking anyone; a connection to
//     a fake address goes to the name as the host resolves it, loopback
//     and private addresses refused unless the rule says private, and a
//     TLS ClientHello's server name must agree with it;
//   - an HTTP CONNECT, HTTP forward and SOCKS5 proxy on 127.0.0.1 (Proxy
//     port), for clients that honour HTTPS_PROXY/ALL_PROXY, which checks
//     the host each request names.
//
// Every other address and port in the namespace has no listener: a connect
// (plain, TCP Fast Open, IPv4 or IPv6) is refused by the server's own
// kernel stack, a datagram gets port unreachable, a listening socket the
// server opens is reachable from nothing outside. The guard dials out from
// the host's namespace only to what the Plan admits.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/mcpguard/mcpguard/guard/policy"
)

// ErrBadRule is wrapped for a network rule the filter cannot apply.
var ErrBadRule = errors.New("egress: bad network rule")

// FakeRange is where the DNS responder's fake addresses come from (RFC
// 2544's benchmarking range: routed nowhere).
var FakeRange = netip.MustParsePrefix("198.18.0.0/15")

// ProxyAddr is where the proxy listens inside the namespace (the first
// port from ProxyPort that no rule grants on 127.0.0.1).
var proxyIP = netip.MustParseAddr("127.0.0.1")

// ProxyPort is the proxy's preferred port (squid's).
const ProxyPort uint16 = 3128

// Rule admits destinations: a host name (exact, lowercase, or "*.suffix")
// or an address prefix, on Ports (any port when empty).
type Rule struct {
	Name   string
	Prefix netip.Prefix
	Ports  []uint16
	// Private admits loopback, private and link-local addresses a name
	// resolves to (policy.NetRule.Private).
	Private bool
	// Resolve pins a name to addresses (policy.NetRule.Resolve).
	Resolve []netip.Addr
}

func (r Rule) String() string {
	h := r.Name
	if h == "" {
		h = r.Prefix.String()
	}
	if len(r.Ports) == 0 {
		return h
	}
	return fmt.Sprintf("%s:%v", h, r.Ports)
}

// single reports whether an address rule names one address.
func (r Rule) single() bool { return r.Name == "" && r.Prefix.Bits() == r.Prefix.Addr().BitLen() }

// admitsPort reports whether r admits port.
func (r Rule) admitsPort(port uint16) bool {
	return len(r.Ports) == 0 || slices.Contains(r.Ports, port)
}

// exact reports whether r is served by exact listeners: one address, with
// ports.
func (r Rule) exact() bool { return r.single() && len(r.Ports) > 0 }

// matchName reports whether r admits host name h (lowercase, no trailing
// dot).
func (r Rule) matchName(h string) bool {
	if r.Name == "" {
		return false
	}
	if suffix, ok := strings.CutPrefix(r.Name, "*"); ok {
		return strings.HasSuffix(h, suffix) && len(h) > len(suffix)
	}
	return r.Name == h
}

// Plan is a policy's network grants, as the egress filter applies them.
type Plan struct {
	Rules []Rule
}

// Compile turns the policy's network rules (server-wide and every tool's
// hosts: the kernel cannot tell which call a connect serves) into a Plan.
// "localhost" is 127.0.0.1 and ::1; "*" is every address.
func Compile(p *policy.Policy) (Plan, error) {
	rules := slices.Clone(p.Network.Allow)
	for _, name := range sortedKeys(p.Tools) {
		rules = append(rules, p.Tools[name].Hosts...)
	}
	var plan Plan
	for _, nr := range rules {
		ports, err := portList(nr)
		if err != nil {
			return Plan{}, err
		}
		host := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(nr.Host)), ".")
		add := func(pr netip.Prefix) {
			plan.Rules = append(plan.Rules, Rule{Prefix: pr, Ports: ports, Private: nr.Private})
		}
		switch {
		case host == "":
			return Plan{}, fmt.Errorf("%w: empty host", ErrBadRule)
		case host == "*":
			add(netip.MustParsePrefix("0.0.0.0/0"))
			add(netip.MustParsePrefix("::/0"))
		case host == "localhost":
			add(netip.MustParsePrefix("127.0.0.1/32"))
			add(netip.MustParsePrefix("::1/128"))
		case strings.Contains(host, "/"):
			pr, err := netip.ParsePrefix(host)
			if err != nil {
				return Plan{}, fmt.Errorf("%w: %q: %v", ErrBadRule, nr.Host, err)
			}
			add(pr.Masked())
		default:
			if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
				a = a.Unmap()
				add(netip.PrefixFrom(a, a.BitLen()))
				continue
			}
			if err := checkName(host); err != nil {
				return Plan{}, fmt.Errorf("%w: %q: %v", ErrBadRule, nr.Host, err)
			}
			pin, err := resolveList(nr)
			if err != nil {
				return Plan{}, err
			}
			plan.Rules = append(plan.Rules, Rule{Name: host, Ports: ports, Private: nr.Private, Resolve: pin})
		}
	}
	return plan, nil
}

func sortedKeys(m map[string]policy.Tool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func portList(nr policy.NetRule) ([]uint16, error) {
	var out []uint16
	for _, p := range nr.Ports {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("%w: %q: port %d out of range", ErrBadRule, nr.Host, p)
		}
		out = append(out, uint16(p))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// resolveList parses a name rule's pinned addresses.
func resolveList(nr policy.NetRule) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range nr.Resolve {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: resolve %q: %v", ErrBadRule, nr.Host, s, err)
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

// checkName admits DNS names and "*." wildcards over them.
func checkName(h string) error {
	rest := strings.TrimPrefix(h, "*.")
	if rest == "" || strings.Contains(rest, "*") || len(rest) > 253 {
		return errors.New("not a host name")
	}
	for _, label := range strings.Split(rest, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("not a host name")
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("character %q in a host name", c)
			}
		}
	}
	return nil
}

// Empty reports whether the plan grants no network at all.
func (p Plan) Empty() bool { return len(p.Rules) == 0 }

// HasNames reports whether a rule names a host (the DNS responder runs).
func (p Plan) HasNames() bool {
	return slices.ContainsFunc(p.Rules, func(r Rule) bool { return r.Name != "" })
}

// Endpoint is one listener inside the namespace.
type Endpoint struct {
	Addr netip.AddrPort
	UDP  bool
}

// Direct lists the exact listeners: TCP and UDP on each port of each
// address rule that names one address and its ports.
func (p Plan) Direct() []Endpoint {
	var out []Endpoint
	seen := map[Endpoint]bool{}
	for _, r := range p.Rules {
		if !r.exact() {
			continue
		}
		for _, port := range r.Ports {
			for _, udp := range []bool{false, true} {
				e := Endpoint{Addr: netip.AddrPortFrom(r.Prefix.Addr(), port), UDP: udp}
				if !seen[e] {
					seen[e] = true
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// NameUDP lists the UDP ports the name rules that admit name give it
// (their explicit ports: a fake address gets a UDP relay on each).
func (p Plan) NameUDP(name string) []uint16 {
	var udp []uint16
	for _, r := range p.Rules {
		if r.matchName(name) {
			udp = append(udp, r.Ports...)
		}
	}
	slices.Sort(udp)
	return slices.Compact(udp)
}

// AdmitName returns the rules that admit name on port.
func (p Plan) AdmitName(name string, port uint16) []Rule {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	var out []Rule
	for _, r := range p.Rules {
		if r.matchName(name) && r.admitsPort(port) {
			out = append(out, r)
		}
	}
	return out
}

// AdmitAddr reports whether an address rule admits a on port.
func (p Plan) AdmitAddr(a netip.Addr, port uint16) bool {
	a = a.Unmap()
	return slices.ContainsFunc(p.Rules, func(r Rule) bool {
		return r.Name == "" && r.Prefix.Contains(a) && r.admitsPort(port)
	})
}

// ProxyAddr is where the proxy listens: 127.0.0.1 on the first port from
// ProxyPort that no exact rule takes there.
func (p Plan) ProxyAddr() netip.AddrPort {
	taken := map[uint16]bool{}
	for _, e := range p.Direct() {
		if e.Addr.Addr() == proxyIP {
			taken[e.Addr.Port()] = true
		}
	}
	port := ProxyPort
	for taken[port] {
		port++
	}
	return netip.AddrPortFrom(proxyIP, port)
}

// InsideRule is a destination inside the namespace that leads somewhere:
// what an address-based L3 backend (BPF) admits there, and what the
// steering program hands to the catch-all listener. Port 0 is any port.
type InsideRule struct {
	Prefix netip.Prefix
	Port   uint16
}

// Steered lists what the steering program sends to the catch-all
// listeners: every rule that exact listeners do not serve (a prefix, an
// address without ports) and, for name rules, the fake range on their
// ports. Empty when no rule needs steering.
func (p Plan) Steered() []InsideRule {
	var out []InsideRule
	add := func(pr netip.Prefix, ports []uint16) {
		if len(ports) == 0 {
			out = append(out, InsideRule{Prefix: pr})
		}
		for _, port := range ports {
			out = append(out, InsideRule{Prefix: pr, Port: port})
		}
	}
	for _, r := range p.Rules {
		switch {
		case r.Name != "":
			add(FakeRange, r.Ports)
		case !r.exact():
			add(r.Prefix, r.Ports)
		}
	}
	return sortRules(out)
}

func sortRules(in []InsideRule) []InsideRule {
	slices.SortFunc(in, func(a, b InsideRule) int {
		if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
			return c
		}
		if c := a.Prefix.Bits() - b.Prefix.Bits(); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})
	return slices.Compact(in)
}

// Loopback is the server's own loopback, on any port: its own listeners
// (a local worker). Nothing outside its namespace is there.
func Loopback() []InsideRule {
	return []InsideRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8")}, {Prefix: netip.MustParsePrefix("::1/128")}}
}

// InsideRules lists every destination inside the namespace that leads
// somewhere: the exact listeners, what is steered, the DNS responders
// (dns) and the proxy.
func (p Plan) InsideRules(dns []netip.Addr) []InsideRule {
	if p.Empty() {
		return nil
	}
	pa := p.ProxyAddr()
	out := append(Loopback(), InsideRule{Prefix: netip.PrefixFrom(pa.Addr(), 32), Port: pa.Port()})
	for _, e := range p.Direct() {
		out = append(out, InsideRule{Prefix: netip.PrefixFrom(e.Addr.Addr(), e.Addr.Addr().BitLen()), Port: e.Addr.Port()})
	}
	out = append(out, p.Steered()...)
	if p.HasNames() {
		for _, a := range dns {
			out = append(out, InsideRule{Prefix: netip.PrefixFrom(a, a.BitLen()), Port: 53})
		}
	}
	return sortRules(out)
}

// InsidePorts lists every TCP port the server may connect to inside its
// namespace, for a port-based L3 backend (Landlock); any is set when a
// steered rule admits every port.
func (p Plan) InsidePorts() (ports []uint16, any bool) {
	for _, r := range p.InsideRules([]netip.Addr{proxyIP}) {
		if r.Port == 0 {
			return nil, true
		}
		ports = append(ports, r.Port)
	}
	slices.Sort(ports)
	return slices.Compact(ports), false
}

// HasUDP reports whether the server may send datagrams anywhere inside
// (DNS for names, or a UDP listener for an address rule with ports).
func (p Plan) HasUDP() bool {
	return p.HasNames() || len(p.Direct()) > 0
}
