package validate

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseURL(t *testing.T) {
	ok := map[string]Dest{
		"http://127.0.0.2:8080/weather?city=Oslo": {Scheme: "http", Host: "127.0.0.2", Port: 8080},
		"https://API.Example.com./v1":             {Scheme: "https", Host: "api.example.com", Port: 443},
		"http://[::1]:9/":                         {Scheme: "http", Host: "::1", Port: 9},
		"http://[::ffff:127.0.0.1]/":              {Scheme: "http", Host: "127.0.0.1", Port: 80},
	}
	for in, want := range ok {
		got, err := ParseURL(in, nil)
		require.NoError(t, err, in)
		got.IP = netip.Addr{}
		assert.Equal(t, want, got, in)
	}
	bad := map[string]error{
		"file:///etc/passwd":                  ErrScheme,
		"gopher://127.0.0.1:70/":              ErrScheme,
		"http://user:pw@example.com/":         ErrUserinfo,
		"http://127.0.0.2@127.0.0.1/":         ErrUserinfo,
		"http://2130706433/":                  ErrObfuscatedHost,
		"http://0x7f.0.0.1/":                  ErrObfuscatedHost,
		"http://127.1/":                       ErrObfuscatedHost,
		"http://0177.0.0.1/":                  ErrObfuscatedHost,
		"http://[fe80::1%25eth0]/":            ErrObfuscatedHost,
		"http://exa mple.com/":                ErrMalformedURL,
		"http://example.com\\@127.0.0.1/":     ErrMalformedURL,
		"http://example.com:99999/":           ErrMalformedURL,
		"http:example.com":                    ErrMalformedURL,
		"http://":                             ErrMalformedURL,
		"http://exa%00mple.com/":              ErrMalformedURL,
		"http://example.com/\n":               ErrMalformedURL,
		"http://\u00e9xample.com/":            ErrObfuscatedHost,
		"http://example.com:-1/":              ErrMalformedURL,
		"https://metadata.google.internal.:0": ErrMalformedURL,
	}
	for in, want := range bad {
		_, err := ParseURL(in, nil)
		assert.ErrorIs(t, err, want, in)
	}
	_, err := ParseURL("ftp://example.com/x", []string{"ftp"})
	assert.NoError(t, err)
}

func TestSpecialClass(t *testing.T) {
	cases := map[string]string{
		"169.254.169.254":  "metadata",
		"fd00:ec2::254":    "metadata",
		"127.0.0.1":        "loopback",
		"::1":              "loopback",
		"::ffff:127.0.0.1": "loopback",
		"64:ff9b::7f00:1":  "loopback",
		"2002:7f00:1::":    "loopback",
		"169.254.1.1":      "link-local",
		"fe80::1":          "link-local",
		"10.1.2.3":         "private",
		"172.16.0.1":       "private",
		"192.168.1.1":      "private",
		"fd12::1":          "private",
		"100.64.0.1":       "private",
		"0.0.0.0":          "unspecified",
		"::":               "unspecified",
		"224.0.0.1":        "link-local",
		"239.1.2.3":        "multicast",
		"8.8.8.8":          "",
		"93.184.216.34":    "",
		"2606:4700::1111":  "",
	}
	for in, want := range cases {
		assert.Equal(t, want, SpecialClass(netip.MustParseAddr(in)), in)
	}
}

// fakeResolver answers from a table, like /etc/hosts; anything else fails.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return append([]netip.Addr(nil), a...), nil
	}
	return nil, errors.New("no such host")
}

// FuzzParseURL: no input panics; a URL that parses names the host Go's own
// URL parser sees (lower-cased), with a scheme from the allow-list, no
// credentials, and a host that is a DNS name or a canonical address; and
// an address it yields is classified consistently with netip.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"http://127.0.0.2:8080/x", "http://2130706433/", "http://a@b/", "http://[::1]/",
		"https://example.com./", "http://0x7f.1/", "http://169.254.169.254/latest", "http://[fd00:ec2::254]/",
		"http://example.com\\@evil/", "HTTP://EXAMPLE.COM:80", "http://%31%32%37.0.0.1/", "http://[::ffff:7f00:1]/"} {
		f.Add(s)
	}
	res := fakeResolver{"example.com": {netip.MustParseAddr("93.184.216.34")}, "evil.test": {netip.MustParseAddr("127.0.0.1")}}
	f.Fuzz(func(t *testing.T, in string) {
		d, err := ParseURL(in, nil)
		if err != nil {
			return
		}
		u, err := url.Parse(in)
		if err != nil {
			t.Fatalf("ParseURL accepted %q that url.Parse rejects", in)
		}
		if u.User != nil {
			t.Fatalf("ParseURL accepted credentials in %q", in)
		}
		if d.Scheme != "http" && d.Scheme != "https" {
			t.Fatalf("ParseURL(%q): scheme %q", in, d.Scheme)
		}
		want := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
		if ip, err := netip.ParseAddr(want); err == nil {
			want = ip.Unmap().String()
		}
		if d.Host != want {
			t.Fatalf("ParseURL(%q) host %q, url.Parse sees %q", in, d.Host, want)
		}
		if strings.ContainsAny(in, "\\ \t\r\n\x00") {
			t.Fatalf("ParseURL accepted a forbidden character in %q", in)
		}
		addrs, err := Addrs(context.Background(), res, d)
		if err != nil {
			return
		}
		for _, a := range addrs {
			if (a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsUnspecified()) && SpecialClass(a) == "" {
				t.Fatalf("%s (from %q) classified as public", a, in)
			}
		}
	})
}
