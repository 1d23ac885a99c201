package validate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// URL errors; the engine maps each to a rule id.
var (
	ErrMalformedURL   = errors.New("malformed URL")
	ErrScheme         = errors.New("URL scheme not allowed")
	ErrUserinfo       = errors.New("URL carries credentials (user@host)")
	ErrObfuscatedHost = errors.New("URL host is an obfuscated address")
)

// DefaultSchemes are the URL schemes admitted when a policy names none.
var DefaultSchemes = []string{"http", "https"}

// Dest is a network destination taken from an argument.
type Dest struct {
	Scheme string
	// Host is lower-case, without brackets or a trailing dot.
	Host string
	Port int
	// IP is set when Host is an address literal.
	IP netip.Addr
}

func (d Dest) String() string { return net.JoinHostPort(d.Host, strconv.Itoa(d.Port)) }

var defaultPorts = map[string]int{"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}

// ParseURL reads a URL argument strictly: no whitespace, control characters
// or backslashes (where parsers disagree, a server's parser may reach a
// host other than the one checked here), no credentials, a scheme from
// schemes (DefaultSchemes when empty), and a host that is either a DNS
// name or a canonical IP literal (not 2130706433, 0x7f.1 or 127.1).
func ParseURL(raw string, schemes []string) (Dest, error) {
	for _, r := range raw {
		if r <= ' ' || r == 0x7f || r == '\\' || (r >= 0x80 && r <= 0x9f) {
			return Dest{}, fmt.Errorf("%w: forbidden character %q", ErrMalformedURL, r)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Dest{}, fmt.Errorf("%w: %w", ErrMalformedURL, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if len(schemes) == 0 {
		schemes = DefaultSchemes
	}
	ok := false
	for _, s := range schemes {
		if strings.EqualFold(s, scheme) {
			ok = true
			break
		}
	}
	if !ok {
		return Dest{}, fmt.Errorf("%w: %q", ErrScheme, u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return Dest{}, fmt.Errorf("%w: no host", ErrMalformedURL)
	}
	if u.User != nil {
		return Dest{}, ErrUserinfo
	}
	d := Dest{Scheme: scheme}
	d.Host, d.IP, err = ParseHost(u.Hostname())
	if err != nil {
		return Dest{}, err
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Dest{}, fmt.Errorf("%w: port %q", ErrMalformedURL, p)
		}
		d.Port = n
	} else {
		d.Port = defaultPorts[scheme]
	}
	return d, nil
}

// ParseHost checks a bare host (name or IP literal, no port) and returns it
// lower-cased, with its address when it is a literal.
func ParseHost(h string) (string, netip.Addr, error) {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" {
		return "", netip.Addr{}, fmt.Errorf("%w: empty host", ErrMalformedURL)
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		if ip.Zone() != "" {
			return "", netip.Addr{}, fmt.Errorf("%w: zoned address %q", ErrObfuscatedHost, h)
		}
		return ip.Unmap().String(), ip.Unmap(), nil
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return "", netip.Addr{}, fmt.Errorf("%w: %q", ErrObfuscatedHost, h)
		}
	}
	// Top-level domains never start with a digit; a "name" whose last
	// label does is an address in a form that inet_aton accepts and a
	// strict parser does not (127.1, 0177.0.0.1, 0x7f000001, 2130706433).
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" || last[0] >= '0' && last[0] <= '9' {
		return "", netip.Addr{}, fmt.Errorf("%w: %q", ErrObfuscatedHost, h)
	}
	return h, netip.Addr{}, nil
}

// Resolver looks up host names; *net.Resolver satisfies it, tests give a
// fixed table.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Addrs returns the addresses d reaches: its literal, or what host resolves to.
func Addrs(ctx context.Context, r Resolver, d Dest) ([]netip.Addr, error) {
	if d.IP.IsValid() {
		return []netip.Addr{d.IP}, nil
	}
	if r == nil {
		r = net.DefaultResolver
	}
	ips, err := r.LookupNetIP(ctx, "ip", d.Host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", d.Host, err)
	}
	for i := range ips {
		ips[i] = ips[i].Unmap()
	}
	return ips, nil
}

var (
	metadataV4 = netip.MustParseAddr("169.254.169.254")
	metadataV6 = netip.MustParseAddr("fd00:ec2::254")
	cgnat      = netip.MustParsePrefix("100.64.0.0/10")
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	benchmark  = netip.MustParsePrefix("198.18.0.0/15")
	thisNet    = netip.MustParsePrefix("0.0.0.0/8")
)

// SpecialClass names why an address must not be reached from an argument
// unless the policy names it: "metadata", "loopback", "link-local",
// "private", "unspecified", "multicast" or "" for an ordinary public address.
// Addresses embedded in IPv4-mapped, NAT64 and 6to4 IPv6 forms are judged by
// the IPv4 address inside.
func SpecialClass(ip netip.Addr) string {
	ip = ip.Unmap()
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip):
			if c := SpecialClass(netip.AddrFrom4([4]byte(b[12:16]))); c != "" {
				return c
			}
		case sixToFour.Contains(ip):
			if c := SpecialClass(netip.AddrFrom4([4]byte(b[2:6]))); c != "" {
				return c
			}
		}
	}
	switch {
	case ip == metadataV4 || ip == metadataV6:
		return "metadata"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsUnspecified() || thisNet.Contains(ip):
		return "unspecified"
	case ip.IsPrivate() || cgnat.Contains(ip) || benchmark.Contains(ip):
		return "private"
	case ip.IsMulticast() || ip.IsInterfaceLocalMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "multicast"
	}
	return ""
}
