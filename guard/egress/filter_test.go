//go:build linux

package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/proxy"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/egress"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/internal/testenv"
)

// childEnv turns the test binary into the "server": a process in a new
// network namespace that waits for a line on stdin (the filter is ready),
// runs the steps in the variable (JSON) and prints one result per step.
const childEnv = "MCPGUARD_EGRESS_CHILD"

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		bufio.NewReader(os.Stdin).ReadString('\n')
		var steps [][]string
		if err := json.Unmarshal([]byte(v), &steps); err != nil {
			fmt.Println("bad steps", err)
			os.Exit(2)
		}
		for _, s := range steps {
			fmt.Printf("%s %s\n", s[0], runStep(s))
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// recorder is a host-side TCP listener that records what it receives and
// echoes it back (so a client can tell it got through).
type recorder struct {
	ln   net.Listener
	mu   sync.Mutex
	data []byte
	hits int
}

func newRecorder(t *testing.T, network, addr string) *recorder {
	ln, err := net.Listen(network, addr)
	require.NoError(t, err)
	r := &recorder{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r.mu.Lock()
				r.hits++
				r.mu.Unlock()
				buf := make([]byte, 4096)
				for {
					c.SetReadDeadline(time.Now().Add(5 * time.Second))
					n, err := c.Read(buf)
					if n > 0 {
						r.mu.Lock()
						r.data = append(r.data, buf[:n]...)
						r.mu.Unlock()
						c.Write(buf[:n])
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return r
}

func (r *recorder) port() int { return r.ln.Addr().(*net.TCPAddr).Port }

func (r *recorder) got() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.data), r.hits
}

// udpRecorder echoes and records datagrams.
type udpRecorder struct {
	c    *net.UDPConn
	mu   sync.Mutex
	data []byte
}

func newUDPRecorder(t *testing.T, addr string) *udpRecorder {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	r := &udpRecorder{c: c}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, src, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			r.mu.Lock()
			r.data = append(r.data, buf[:n]...)
			r.mu.Unlock()
			c.WriteToUDPAddrPort(buf[:n], src)
		}
	}()
	return r
}

func (r *udpRecorder) got() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.data)
}

// fakeResolver resolves test names on the host's side.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// stepEnv is what the child's steps share: a resolver that asks the
// namespace's DNS responder.
type stepEnv struct {
	ctx context.Context
	res *net.Resolver
}

func errStr(err error) string {
	switch {
	case err == nil:
		return "ok"
	case strings.Contains(err.Error(), "connection refused"):
		return "refused"
	case strings.Contains(err.Error(), "connection reset"):
		return "reset"
	case strings.Contains(err.Error(), "no such host"):
		return "nxdomain"
	}
	return "err " + strings.ReplaceAll(err.Error(), "\n", " ")
}

// echo sends msg and reads it back (the host-side recorders echo).
func echo(c net.Conn, msg string) string {
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		return errStr(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return errStr(err)
	}
	return "echo " + string(buf)
}

// steps are the child's actions, by name; each takes the step's
// arguments (after the name).
var steps = map[string]func(e stepEnv, a []string) string{
	"tcp": func(_ stepEnv, a []string) string { // tcp ADDR MSG
		c, err := net.DialTimeout("tcp", a[0], 3*time.Second)
		if err != nil {
			return errStr(err)
		}
		return echo(c, a[1])
	},
	"tfo": stepTFO,
	"udp": func(_ stepEnv, a []string) string { // udp ADDR MSG: send, wait for the echo
		c, err := net.Dial("udp", a[0])
		if err != nil {
			return errStr(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		c.Write([]byte(a[1]))
		buf := make([]byte, 512)
		n, err := c.Read(buf)
		if err != nil {
			return errStr(err)
		}
		return "echo " + string(buf[:n])
	},
	"resolve": func(e stepEnv, a []string) string { // resolve NAME
		addrs, err := e.res.LookupNetIP(e.ctx, "ip4", a[0])
		if err != nil {
			return errStr(err)
		}
		if len(addrs) == 1 && egress.FakeRange.Contains(addrs[0]) {
			return "fake"
		}
		return fmt.Sprint(addrs)
	},
	"named": func(e stepEnv, a []string) string { // named NAME PORT MSG: resolve, then connect
		c, err := dialNamed(e, a[0], a[1])
		if err != nil {
			return errStr(err)
		}
		return echo(c, a[2])
	},
	"sni": func(e stepEnv, a []string) string { // sni NAME PORT SERVERNAME
		c, err := dialNamed(e, a[0], a[1])
		if err != nil {
			return errStr(err)
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		tc := tls.Client(c, &tls.Config{ServerName: a[2], InsecureSkipVerify: true})
		defer tc.Close()
		if err := tc.Handshake(); err != nil {
			return "handshake failed"
		}
		return "handshake ok"
	},
	"connect": stepCONNECT,
	"socks": func(_ stepEnv, a []string) string { // socks PROXY HOST:PORT MSG
		d, err := proxy.SOCKS5("tcp", a[0], nil, proxy.Direct)
		if err != nil {
			return errStr(err)
		}
		c, err := d.Dial("tcp", a[1])
		if err != nil {
			return "socks refused"
		}
		return echo(c, a[2])
	},
	"listen": func(_ stepEnv, a []string) string { // listen PORT: a backdoor the outside must not reach
		ln, err := net.Listen("tcp", "0.0.0.0:"+a[0])
		if err != nil {
			return errStr(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				io.WriteString(c, "BACKDOOR")
				c.Close()
			}
		}()
		return "listening"
	},
	"read": func(_ stepEnv, a []string) string { // read ADDR: what a listener there says
		c, err := net.DialTimeout("tcp", a[0], 3*time.Second)
		if err != nil {
			return errStr(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		b, err := io.ReadAll(c)
		if err != nil {
			return errStr(err)
		}
		return "got " + string(b)
	},
	"sleep": func(_ stepEnv, a []string) string {
		d, _ := time.ParseDuration(a[0])
		time.Sleep(d)
		return "ok"
	},
}

func dialNamed(e stepEnv, name, port string) (net.Conn, error) {
	addrs, err := e.res.LookupNetIP(e.ctx, "ip4", name)
	if err != nil {
		return nil, err
	}
	return net.DialTimeout("tcp", net.JoinHostPort(addrs[0].String(), port), 3*time.Second)
}

// stepTFO: tfo ADDR MSG, sendto(MSG_FASTOPEN) without connect.
func stepTFO(_ stepEnv, a []string) string {
	ap := netip.MustParseAddrPort(a[0])
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		return errStr(err)
	}
	defer unix.Close(fd)
	err = unix.Sendto(fd, []byte(a[1]), unix.MSG_FASTOPEN, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()})
	if err != nil {
		return errStr(err)
	}
	time.Sleep(200 * time.Millisecond)
	var b [1]byte
	_, err = unix.Read(fd, b[:])
	return errStr(err)
}

// stepCONNECT: connect PROXY HOST:PORT MSG, HTTP CONNECT through the proxy.
func stepCONNECT(_ stepEnv, a []string) string {
	c, err := net.DialTimeout("tcp", a[0], 3*time.Second)
	if err != nil {
		return errStr(err)
	}
	c.SetDeadline(time.Now().Add(3 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", a[1], a[1])
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return errStr(err)
	}
	if !strings.Contains(line, " 200 ") {
		c.Close()
		return "status " + strings.Fields(line)[1]
	}
	br.ReadString('\n')
	return echo(brConn{c, br}, a[2])
}

// runStep is one action of the child, inside the namespace.
func runStep(s []string) string {
	dnsAddr := os.Getenv("EGRESS_DNS")
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, dnsAddr)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f, ok := steps[s[0]]
	if !ok {
		return "unknown step"
	}
	return f(stepEnv{ctx, res}, s[1:])
}

// hosts are the host-side endpoints TestFilter's child tries to reach.
type hosts struct {
	api, sink, other, named, private, anyPort, prefix *recorder
	udpAPI, udpSink                                   *udpRecorder
	port                                              int // the api's port, also the sink's on 127.0.0.1
}

func newHosts(t *testing.T) *hosts {
	h := &hosts{api: newRecorder(t, "tcp", "127.0.0.2:0")}
	h.port = h.api.port()
	probe, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", h.port))
	if err != nil {
		t.Skipf("port %d taken on 127.0.0.1: %v", h.port, err)
	}
	probe.Close()
	h.sink = newRecorder(t, "tcp", fmt.Sprintf("127.0.0.1:%d", h.port))
	h.other = newRecorder(t, "tcp", "127.0.0.1:0")
	h.udpAPI = newUDPRecorder(t, fmt.Sprintf("127.0.0.2:%d", h.port))
	h.udpSink = newUDPRecorder(t, "127.0.0.1:0")
	h.named = newRecorder(t, "tcp", "127.0.0.3:0")
	h.private = newRecorder(t, "tcp", "127.0.0.4:0")
	h.anyPort = newRecorder(t, "tcp", "127.0.0.5:0")
	h.prefix = newRecorder(t, "tcp", "127.0.1.7:0")
	return h
}

// policy grants an address on one port, names (exact, wildcard, one
// without private), an address on any port and a prefix.
func (h *hosts) policy() *policy.Policy {
	return &policy.Policy{Network: policy.Network{Allow: []policy.NetRule{
		{Host: "127.0.0.2", Ports: []int{h.port}},
		{Host: "api.test", Ports: []int{h.named.port()}, Private: true},
		{Host: "*.wild.test", Ports: []int{h.named.port()}, Private: true},
		{Host: "noprivate.test", Ports: []int{h.private.port()}},
		{Host: "127.0.0.5"},
		{Host: "127.0.1.0/24", Ports: []int{h.prefix.port()}},
		{Host: "pinned.test", Ports: []int{h.named.port()}, Resolve: []string{"127.0.0.3"}},
	}}}
}

// filterStep is one child action and what it must print ("" for: not
// an echo, whatever the error).
type filterStep struct {
	step []string
	want string
}

func (h *hosts) steps(proxyAddr string) []filterStep {
	a := func(s ...string) []string { return s }
	sp := fmt.Sprint
	np := sp(h.named.port())
	return []filterStep{
		{a("tcp", sp("127.0.0.2:", h.port), "granted"), "echo granted"},
		{a("tcp", sp("127.0.0.1:", h.port), "any-address"), "refused"},
		{a("tcp", "[::1]:"+sp(h.port), "any-address6"), "refused"},
		{a("tcp", sp("127.0.0.2:", h.other.port()), "other-port"), "refused"},
		{a("tfo", sp("127.0.0.1:", h.port), "fastopen"), "refused"},
		{a("udp", sp("127.0.0.2:", h.port), "udp-granted"), "echo udp-granted"},
		{a("udp", h.udpSink.c.LocalAddr().String(), "udp-sink"), ""},
		{a("resolve", "api.test"), "fake"},
		{a("resolve", "secret-label.evil.test"), "nxdomain"},
		{a("named", "api.test", np, "by-name"), "echo by-name"},
		{a("named", "x.wild.test", np, "by-wildcard"), "echo by-wildcard"},
		{a("named", "pinned.test", np, "by-pin"), "echo by-pin"},
		{a("named", "noprivate.test", sp(h.private.port()), "private"), ""},
		{a("sni", "api.test", np, "evil.test"), "handshake failed"},
		{a("connect", proxyAddr, "api.test:"+np, "via-connect"), "echo via-connect"},
		{a("connect", proxyAddr, sp("127.0.0.1:", h.port), "connect-sink"), "status 403"},
		{a("connect", proxyAddr, sp("127.0.0.2:", h.port), "connect-addr"), "echo connect-addr"},
		{a("socks", proxyAddr, "api.test:"+np, "via-socks"), "echo via-socks"},
		{a("socks", proxyAddr, "evil.test:"+np, "socks-evil"), "socks refused"},
		{a("tcp", sp("127.0.0.5:", h.anyPort.port()), "any-port"), "echo any-port"},
		{a("tcp", sp("127.0.1.7:", h.prefix.port()), "in-prefix"), "echo in-prefix"},
		{a("tcp", sp("127.0.1.8:", h.prefix.port()+1), "prefix-other-port"), "refused"},
		{a("tcp", "192.0.2.1:9", "unknown"), "reset"},
		{a("tcp", "[2001:db8::1]:9", "unknown6"), "reset"},
		{a("listen", "45678"), "listening"},
		{a("read", "127.0.0.1:45678"), "got BACKDOOR"},
		{a("sleep", "1s"), "ok"},
	}
}

// runChild runs the steps in a child in a network namespace of its own,
// once f has started on it, and returns one output line per step. While
// the child listens (the "listen" step), the host must not reach it.
func runChild(t *testing.T, f *egress.Filter, steps []filterStep) []string {
	var raw [][]string
	for _, s := range steps {
		raw = append(raw, s.step)
	}
	enc, err := json.Marshal(raw)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(enc), "EGRESS_DNS=10.53.0.1:53")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	if err := f.Start(cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		testenv.SkipIfNotSupported(t, err) // no sk_lookup here
	}
	io.WriteString(stdin, "go\n")
	time.Sleep(300 * time.Millisecond)
	if c, err := net.DialTimeout("tcp", "127.0.0.1:45678", time.Second); err == nil {
		b, _ := io.ReadAll(c)
		c.Close()
		assert.NotContains(t, string(b), "BACKDOOR", "a listener inside is reachable from the host")
	}
	require.NoError(t, cmd.Wait())
	t.Logf("child:\n%s", out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, len(steps))
	return lines
}

// TestFilter: a process in a network namespace of its own reaches exactly
// what the plan grants, by every route, and nothing else; the evidence is
// what host-side listeners received, not the filter's opinion.
func TestFilter(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("joining another network namespace needs root")
	}
	h := newHosts(t)
	resolvConf := filepath.Join(t.TempDir(), "resolv.conf")
	require.NoError(t, os.WriteFile(resolvConf, []byte("nameserver 10.53.0.1\n"), 0o644))
	plan, err := egress.Compile(h.policy())
	require.NoError(t, err)
	var auditBuf strings.Builder
	var auditMu sync.Mutex
	var denied []audit.Event
	f := egress.New(plan, egress.Options{
		Audit: audit.New(lockedWriter{&auditBuf, &auditMu}),
		OnDenial: func(e audit.Event) {
			auditMu.Lock()
			denied = append(denied, e)
			auditMu.Unlock()
		},
		ResolvConf: resolvConf,
		Resolver: fakeResolver{
			"api.test":       {netip.MustParseAddr("127.0.0.3")},
			"x.wild.test":    {netip.MustParseAddr("127.0.0.3")},
			"noprivate.test": {netip.MustParseAddr("127.0.0.4")},
		},
	})
	defer f.Close()
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("10.53.0.1")}, f.DNSAddrs())

	steps := h.steps(plan.ProxyAddr().String())
	lines := runChild(t, f, steps)
	for i, s := range steps {
		_, v, _ := strings.Cut(lines[i], " ")
		if s.want == "" {
			assert.NotContains(t, v, "echo", "step %v", s.step)
			continue
		}
		assert.Equal(t, s.want, v, "step %v", s.step)
	}
	// The evidence outside: nothing reached the sinks or the private
	// address, the granted endpoints got what was sent to them.
	data, hits := h.sink.got()
	assert.Empty(t, data, "bytes at the sink on the granted port of another address")
	assert.Zero(t, hits, "connections at the sink")
	data, _ = h.other.got()
	assert.Empty(t, data)
	assert.Empty(t, h.udpSink.got())
	data, hits = h.private.got()
	assert.Zero(t, hits, "a name resolving to a private address without private: true")
	assert.Empty(t, data)
	data, _ = h.api.got()
	assert.Equal(t, "grantedconnect-addr", data)
	assert.Equal(t, "udp-granted", h.udpAPI.got())
	data, _ = h.named.got()
	assert.Contains(t, data, "by-name")
	assert.Contains(t, data, "by-pin")
	assert.Contains(t, data, "via-socks")
	assert.NotContains(t, data, "evil")
	auditMu.Lock()
	log := auditBuf.String()
	auditMu.Unlock()
	for _, rule := range []string{egress.RuleDNSRefused, egress.RuleSNIDenied, egress.RuleProxyDenied, egress.RulePrivateAddr} {
		assert.Contains(t, log, `"rule":"`+rule+`"`)
	}
	// A destination outside loopback that no rule admits is steered to
	// the filter, refused there and reported, live too.
	auditMu.Lock()
	defer auditMu.Unlock()
	reported := map[string]string{}
	for _, e := range denied {
		assert.True(t, egress.FromFilter(e), "%+v", e)
		reported[e.Target] = e.Rule
	}
	for _, target := range []string{"192.0.2.1:9", "[2001:db8::1]:9"} {
		assert.Contains(t, log, `"target":"`+target+`"`)
		assert.Equal(t, egress.RuleConnectDenied, reported[target], "OnDenial for %s: %v", target, reported)
	}
	assert.Equal(t, egress.RuleDNSRefused, reported["secret-label.evil.test"])
}

// brConn reads through a bufio.Reader that may hold bytes already.
type brConn struct {
	net.Conn
	r *bufio.Reader
}

func (c brConn) Read(p []byte) (int, error) { return c.r.Read(p) }

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
