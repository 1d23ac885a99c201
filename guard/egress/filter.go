package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/validate"
	"github.com/mcpguard/mcpguard/internal/feature"
)

// Audit rules of the filter's denials.
const (
	RuleDNSRefused    = "net.dns_refused"
	RuleProxyDenied   = "net.proxy_denied"
	RuleSNIDenied     = "net.sni_denied"
	RulePrivateAddr   = "net.private_denied"
	RuleDialFailed    = "net.dial_failed"
	RuleConnectDenied = "net.connect_denied"
	dialTimeout       = 10 * time.Second
	handshakeTimeout  = 10 * time.Second
)

// Resolver resolves host names on the host's side (net.DefaultResolver).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Filter. The zero value is right outside tests.
type Options struct {
	// Audit receives one event per refused name, request or connection:
	// the sandboxes pass their session's audit.Logger.Limited, so that a
	// server cannot flood the log.
	Audit          *audit.Logger
	Server, Config string
	// OnDenial, when set, is called with each refusal Audit gets (the live
	// denial report: configs.Explainer).
	OnDenial func(audit.Event)
	// Resolver resolves granted names when the guard dials them
	// (net.DefaultResolver if nil).
	Resolver Resolver
	// ResolvConf is the resolv.conf the server reads (/etc/resolv.conf):
	// the DNS responder listens on each nameserver it names.
	ResolvConf string
}

// Filter is one server's egress filter.
type Filter struct {
	plan Plan
	o    Options
	dns  []netip.Addr

	ctx    context.Context
	cancel context.CancelFunc
	ns     *nsThread
	wg     sync.WaitGroup

	mu      sync.Mutex
	closers []io.Closer
	fakes   map[string]netip.Addr
	byFake  map[netip.Addr]string
	next    netip.Addr
	conns   map[net.Conn]bool
}

// New makes the filter for plan. It reads the server's resolv.conf now:
// DNSAddrs must be known before the server starts (an address-based L3
// backend admits them).
func New(plan Plan, o Options) *Filter {
	if o.ResolvConf == "" {
		o.ResolvConf = "/etc/resolv.conf"
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Filter{plan: plan, o: o, ctx: ctx, cancel: cancel,
		fakes: map[string]netip.Addr{}, byFake: map[netip.Addr]string{},
		next: FakeRange.Addr().Next(), conns: map[net.Conn]bool{}}
	if plan.HasNames() {
		f.dns = nameservers(o.ResolvConf)
	}
	return f
}

// Plan is what the filter admits.
func (f *Filter) Plan() Plan { return f.plan }

// DNSAddrs are the addresses the DNS responder listens on (none when no
// rule names a host).
func (f *Filter) DNSAddrs() []netip.Addr { return f.dns }

// Env is what the server's environment gets so that clients that honour
// proxy variables go through the proxy (which names the host it checks).
func (f *Filter) Env() []string {
	if f.plan.Empty() {
		return nil
	}
	pa := f.plan.ProxyAddr()
	h := "http://" + pa.String()
	s := "socks5h://" + pa.String()
	return []string{"HTTP_PROXY=" + h, "HTTPS_PROXY=" + h, "http_proxy=" + h, "https_proxy=" + h,
		"ALL_PROXY=" + s, "all_proxy=" + s}
}

// nameservers lists the nameserver addresses of a resolv.conf (127.0.0.1,
// the resolver's default, when it names none).
func nameservers(path string) []netip.Addr {
	var out []netip.Addr
	if b, err := os.ReadFile(path); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 2 || fields[0] != "nameserver" {
				continue
			}
			// A scoped IPv6 address (fe80::1%eth0) names an interface the
			// namespace does not have; the address alone will do on lo.
			a, err := netip.ParseAddr(strings.Split(fields[1], "%")[0])
			if err == nil {
				out = append(out, a.Unmap())
			}
		}
	}
	if len(out) == 0 {
		out = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	}
	return out
}

// Start joins the network namespace of the process pid (the launcher's
// stage 1), sets up its loopback and creates the listeners, and serves
// them until Close. On an error nothing is left running.
func (f *Filter) Start(pid int) error { return f.StartIn(nsPath(pid)) }

// StartIn is Start for the network namespace at path (a /proc/.../ns/net).
func (f *Filter) StartIn(path string) error {
	if f.plan.Empty() {
		return nil
	}
	ns, err := joinNetns(path)
	if err != nil {
		return err
	}
	f.ns = ns
	if err := ns.do(setupLoopback); err != nil {
		f.Close()
		return err
	}
	if err := f.listenAll(); err != nil {
		f.Close()
		return err
	}
	if err := f.steerAll(); err != nil {
		f.Close()
		return err
	}
	return nil
}

func (f *Filter) listenAll() error {
	taken := map[Endpoint]bool{}
	for _, e := range f.plan.Direct() {
		taken[e] = true
		target := e.Addr
		if err := f.listen(e, func(c net.Conn) { f.forward(c, target.String(), "") }, func(p *udpRelay) { p.target = target.String() }); err != nil {
			return err
		}
	}
	pa := f.plan.ProxyAddr()
	if err := f.listen(Endpoint{Addr: pa}, f.serveProxy, nil); err != nil {
		return err
	}
	if !f.plan.HasNames() {
		return nil
	}
	for _, a := range f.dns {
		for _, udp := range []bool{false, true} {
			e := Endpoint{Addr: netip.AddrPortFrom(a, 53), UDP: udp}
			if taken[e] {
				continue // an address rule grants this resolver itself
			}
			if err := f.listenDNS(e); err != nil {
				return err
			}
		}
	}
	// Exact names get their fake address now; wildcards when first asked.
	for _, r := range f.plan.Rules {
		if r.Name != "" && !strings.HasPrefix(r.Name, "*") {
			if _, err := f.fake(r.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// steerAll creates the catch-all listeners and attaches the steering
// program that hands them every connection bound for a steered
// destination, and every one bound outside loopback: a destination no
// rule admits is then refused here and reported (net.connect_denied), not
// answered unseen by the namespace's own stack. Where the kernel refuses
// the program and no rule needs it (exact grants only), the filter runs
// without: such a connection is still refused (no listener), unreported.
func (f *Filter) steerAll() error {
	rules := f.plan.Steered()
	var lns [2]*net.TCPListener
	for i, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		var ln *net.TCPListener
		err := f.ns.do(func() error {
			var err error
			ln, err = listenTCP(netip.MustParseAddrPort(addr))
			return err
		})
		if err != nil {
			if i == 1 {
				continue // no IPv6 in this kernel: IPv4 only
			}
			return fmt.Errorf("egress: catch-all listener: %w", err)
		}
		if err := f.serveListener(ln, f.serveSteered); err != nil {
			return err
		}
		lns[i] = ln
	}
	s, err := f.ns.steer(rules, lns[0], lns[1])
	if err != nil {
		if len(rules) == 0 && errors.Is(err, feature.ErrKernelRefused) {
			return nil
		}
		return err
	}
	f.mu.Lock()
	f.closers = append(f.closers, s)
	f.mu.Unlock()
	return nil
}

// serveSteered serves a connection the steering program handed over:
// decided again from its original destination (the address the server
// connected to, which the accepted socket is bound to).
func (f *Filter) serveSteered(c net.Conn) {
	dst := c.LocalAddr().(*net.TCPAddr).AddrPort()
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	switch {
	case dst == f.plan.ProxyAddr():
		f.serveProxy(c) // a wide rule covers 127.0.0.1
		return
	case dst.Port() == 53 && slices.Contains(f.dns, dst.Addr()):
		f.serveDNSTCP(c)
		return
	}
	if name, ok := f.nameOfFake(dst.Addr()); ok {
		if len(f.plan.AdmitName(name, dst.Port())) == 0 {
			f.deny(RuleConnectDenied, net.JoinHostPort(name, fmt.Sprint(dst.Port())), "no network rule admits "+name+" on this port")
			abort(c)
			return
		}
		f.forward(c, net.JoinHostPort(name, fmt.Sprint(dst.Port())), name)
		return
	}
	if !f.plan.AdmitAddr(dst.Addr(), dst.Port()) {
		f.deny(RuleConnectDenied, dst.String(), "no network rule admits "+dst.String())
		abort(c)
		return
	}
	f.forward(c, dst.String(), "")
}

// listen creates one listener inside the namespace and serves it: TCP
// connections go to tcp, a UDP socket to a relay that udp configures.
func (f *Filter) listen(e Endpoint, tcp func(net.Conn), udp func(*udpRelay)) error {
	var ln io.Closer
	err := f.ns.do(func() error {
		var err error
		if e.UDP {
			ln, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(e.Addr))
		} else {
			ln, err = listenTCP(e.Addr)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("egress: listen on %s inside: %w", e.Addr, err)
	}
	if !e.UDP {
		return f.serveListener(ln.(*net.TCPListener), tcp)
	}
	if err := f.own(ln); err != nil {
		return err
	}
	r := &udpRelay{f: f, inside: ln.(*net.UDPConn), flows: map[netip.AddrPort]*udpFlow{}}
	if udp != nil {
		udp(r)
	}
	go r.serve()
	return nil
}

// own registers a listener for Close and counts its serving goroutine;
// it refuses (and closes the listener) once the filter is closing.
func (f *Filter) own(ln io.Closer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx.Err() != nil {
		ln.Close()
		return fmt.Errorf("egress: %w", net.ErrClosed)
	}
	f.closers = append(f.closers, ln)
	f.wg.Add(1)
	return nil
}

// serveListener accepts on ln until Close, each connection to handle.
func (f *Filter) serveListener(ln *net.TCPListener, handle func(net.Conn)) error {
	if err := f.own(ln); err != nil {
		return err
	}
	go f.acceptLoop(ln, handle)
	return nil
}

func (f *Filter) acceptLoop(ln *net.TCPListener, handle func(net.Conn)) {
	defer f.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || f.ctx.Err() != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !f.track(c) {
			c.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.untrack(c)
			handle(c)
		}()
	}
}

// track records an open connection so that Close ends it; false once
// the filter is closing.
func (f *Filter) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx.Err() != nil {
		return false
	}
	f.conns[c] = true
	return true
}

func (f *Filter) untrack(c net.Conn) {
	c.Close()
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}

// fake returns the fake address of a granted name, allocating it (and
// creating its listeners inside the namespace) on first use.
func (f *Filter) fake(name string) (netip.Addr, error) {
	f.mu.Lock()
	if a, ok := f.fakes[name]; ok {
		f.mu.Unlock()
		return a, nil
	}
	a := f.next
	if !FakeRange.Contains(a) {
		f.mu.Unlock()
		return netip.Addr{}, fmt.Errorf("egress: fake address range exhausted")
	}
	f.next = a.Next()
	f.fakes[name], f.byFake[a] = a, name
	f.mu.Unlock()
	// TCP to the fake address is steered to the catch-all listeners; UDP
	// gets a relay on each port the name's rules list.
	for _, port := range f.plan.NameUDP(name) {
		e := Endpoint{Addr: netip.AddrPortFrom(a, port), UDP: true}
		host := net.JoinHostPort(name, fmt.Sprint(port))
		if err := f.listen(e, nil, func(r *udpRelay) { r.target, r.name = host, name }); err != nil {
			return netip.Addr{}, err
		}
	}
	return a, nil
}

// nameOfFake returns the name a fake address stands for.
func (f *Filter) nameOfFake(a netip.Addr) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.byFake[a.Unmap()]
	return n, ok
}

// ReasonPrefix begins the reason of every event the filter logs, saying
// which part of L3 refused (FromFilter).
const ReasonPrefix = "egress filter: "

// FromFilter reports whether e was logged by an egress filter (and not by
// a kernel backend under the same rule name, e.g. net.connect_denied).
func FromFilter(e audit.Event) bool { return strings.HasPrefix(e.Reason, ReasonPrefix) }

// deny logs a refusal (Options.Audit bounds how many) and hands it to
// OnDenial, but for a granted destination that could not be reached
// (RuleDialFailed: nothing a policy line would change).
func (f *Filter) deny(rule, target, reason string) {
	e := audit.Event{Server: f.o.Server, Config: f.o.Config, Layer: "L3",
		Rule: rule, Decision: audit.Deny, Target: target, Reason: ReasonPrefix + reason}
	f.o.Audit.Log(e)
	if f.o.OnDenial != nil && rule != RuleDialFailed {
		f.o.OnDenial(e)
	}
}

// dial connects from the host's namespace to hostport. name, when set, is
// a granted host name: it is resolved here, and loopback, private and
// link-local addresses are refused unless a rule admitting it says
// private.
func (f *Filter) dial(ctx context.Context, network, hostport, name string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var d net.Dialer
	if name == "" {
		return d.DialContext(ctx, network, hostport)
	}
	_, port, _ := net.SplitHostPort(hostport)
	private := false
	var addrs []netip.Addr
	for _, r := range f.plan.Rules {
		if r.matchName(name) {
			private = private || r.Private
			addrs = append(addrs, r.Resolve...)
		}
	}
	if len(addrs) > 0 {
		private = true // pinned by the policy: its own statement
	} else {
		var err error
		if addrs, err = f.o.Resolver.LookupNetIP(ctx, "ip", name); err != nil {
			return nil, fmt.Errorf("resolve %s: %w", name, err)
		}
	}
	var lastErr error
	for _, a := range addrs {
		if class := validate.SpecialClass(a); class != "" && !private {
			lastErr = fmt.Errorf("%w: %s resolves to %s (%s)", errPrivate, name, a, class)
			continue
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("%s: no address", name)
	}
	return nil, lastErr
}

var errPrivate = errors.New("private address")

// dialDenied logs why a dial failed under the right rule.
func (f *Filter) dialDenied(target string, err error) {
	if errors.Is(err, errPrivate) {
		f.deny(RulePrivateAddr, target, err.Error()+"; the rule does not say private")
		return
	}
	f.deny(RuleDialFailed, target, err.Error())
}

// forward connects an accepted connection to hostport (name: a granted
// host name, which a TLS ClientHello's server name must agree with).
func (f *Filter) forward(c net.Conn, hostport, name string) {
	up, err := f.dial(f.ctx, "tcp", hostport, name)
	if err != nil {
		f.dialDenied(hostport, err)
		abort(c)
		return
	}
	var check func(net.Conn) ([]byte, bool)
	if name != "" {
		check = func(c net.Conn) ([]byte, bool) { return f.checkSNI(c, name) }
	}
	f.splice(c, up, check)
}

// abort closes c with a reset, as a refused connect would look.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// splice copies both ways until both sides are done, passing half-closes
// on (io.Copy between TCP sockets uses splice(2) on Linux). check, when
// set, reads the first bytes from inside before anything of them goes
// out, and may refuse the connection; the outside's bytes flow from the
// start.
func (f *Filter) splice(in, out net.Conn, check func(net.Conn) ([]byte, bool)) {
	if !f.track(out) {
		out.Close()
		return
	}
	defer f.untrack(out)
	var wg sync.WaitGroup
	wg.Add(1)
	half := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if tc, ok := dst.(interface{ CloseWrite() error }); ok {
			tc.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go func() {
		defer wg.Done()
		half(in, out)
	}()
	if check != nil {
		head, ok := check(in)
		if !ok {
			abort(in)
			out.Close()
			wg.Wait()
			return
		}
		if _, err := out.Write(head); err != nil {
			abort(in)
			out.Close()
			wg.Wait()
			return
		}
	}
	half(out, in)
	wg.Wait()
}

// Close stops the listeners and ends every connection.
func (f *Filter) Close() error {
	f.mu.Lock()
	f.cancel()
	closers := f.closers
	f.closers = nil
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	for _, c := range closers {
		c.Close()
	}
	f.wg.Wait()
	if f.ns != nil {
		f.ns.close()
		f.ns = nil
	}
	return nil
}

// listenTCP listens on plain TCP: Go's listeners use Multipath TCP by
// default where the kernel has it, and an MPTCP socket is not one the
// steering program's socket map takes.
func listenTCP(a netip.AddrPort) (*net.TCPListener, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp", a.String())
	if err != nil {
		return nil, err
	}
	return ln.(*net.TCPListener), nil
}
