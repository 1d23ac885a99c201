package policy

import (
	"context"
	"encoding/json"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzCheckURL: whatever the URL argument, the engine does not panic, and
// a URL it admits names an allowed destination as Go's URL parser reads it
// (the weather API 127.0.0.2:8080, or api.example.com over https), and
// reaches no special address the policy does not name: never the sink on
// 127.0.0.1, the metadata service, or a name rebound to loopback.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"http://127.0.0.2:8080/w?city=Oslo", "https://api.example.com/v1", "http://127.0.0.1:8080/",
		"http://127.0.0.2:8080@127.0.0.1/", "http://[::ffff:127.0.0.2]:8080/", "https://rebind.example.com/", "http://2130706434:8080/",
		"https://API.EXAMPLE.COM./x", "http://169.254.169.254/", "https://api.example.com:443\\@127.0.0.1/", "http://0x7f.0.0.2:8080/"} {
		f.Add(s)
	}
	p, err := Parse([]byte(`{"server":"x","tools":{"fetch":{"args":{"url":{"kind":"url"}}}},
		"network":{"allow":[{"host":"127.0.0.2","ports":[8080]},{"host":"api.example.com","ports":[443]},{"host":"rebind.example.com"}]}}`), nil)
	require.NoError(f, err)
	e, err := Compile(p, EngineOptions{L2: true, Resolver: fakeResolver{
		"api.example.com":    {netip.MustParseAddr("93.184.216.34")},
		"rebind.example.com": {netip.MustParseAddr("127.0.0.1")},
	}})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, raw string) {
		args, err := json.Marshal(map[string]string{"url": raw})
		if err != nil {
			return
		}
		if e.Check(context.Background(), "fetch", args) != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("admitted %q, which url.Parse rejects", raw)
		}
		host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
		if ip, err := netip.ParseAddr(host); err == nil {
			host = ip.Unmap().String()
		}
		port := u.Port()
		switch {
		case host == "127.0.0.2" && port == "8080":
		case host == "api.example.com" && (port == "443" || port == "" && strings.EqualFold(u.Scheme, "https")):
		default:
			t.Fatalf("admitted %q: host %q port %q is not an allowed destination", raw, host, port)
		}
	})
}
