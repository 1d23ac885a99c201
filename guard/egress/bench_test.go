//go:build linux

package egress_test

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard/egress"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/internal/testenv"
)

// dialer dials from inside a network namespace of its own: a locked
// thread that unshared it (never unlocked: the runtime ends the thread
// with its goroutine), on which every dial runs.
type dialer struct {
	reqs chan func()
	path string
}

func newNamespaceDialer(tb testing.TB) *dialer {
	d := &dialer{reqs: make(chan func())}
	errc := make(chan error)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		d.path = fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		errc <- nil
		for f := range d.reqs {
			f()
		}
	}()
	if err := <-errc; err != nil {
		tb.Skipf("no network namespace here: %v", err)
	}
	tb.Cleanup(func() { close(d.reqs) })
	return d
}

func (d *dialer) dial(addr string) (c net.Conn, err error) {
	done := make(chan struct{})
	d.reqs <- func() { c, err = net.DialTimeout("tcp", addr, 5*time.Second); close(done) }
	<-done
	return c, err
}

// echoServer answers each connection's bytes with the same bytes.
func echoServer(tb testing.TB, addr string) string {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip opens a connection with dial and does a one-byte echo: what a
// client pays for each new connection.
func roundTrip(dial func(string) (net.Conn, error), addr string) (time.Duration, error) {
	t0 := time.Now()
	c, err := dial(addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var b [1]byte
	if _, err := c.Write(b[:]); err != nil {
		return 0, err
	}
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// BenchmarkEgress measures what the egress filter adds, paired in the same
// rounds against the same server reached with no filter (from the host's
// namespace): connect plus a one-byte echo per connection, through an
// exact listener (address rule with a port) and through the steering
// program (a name's fake address), and a bulk transfer's throughput.
func BenchmarkEgress(b *testing.B) {
	if testing.Short() {
		b.Skip("needs root and network namespaces")
	}
	srv := echoServer(b, "127.0.0.2:0")
	ap := netip.MustParseAddrPort(srv)
	p := &policy.Policy{Network: policy.Network{Allow: []policy.NetRule{
		{Host: "127.0.0.2", Ports: []int{int(ap.Port())}},
		{Host: "echo.test", Ports: []int{int(ap.Port())}, Resolve: []string{"127.0.0.2"}},
	}}}
	plan, err := egress.Compile(p)
	if err != nil {
		b.Fatal(err)
	}
	d := newNamespaceDialer(b)
	f := egress.New(plan, egress.Options{})
	b.Cleanup(func() { f.Close() })
	if err := f.StartIn(d.path); err != nil {
		testenv.SkipIfNotSupported(b, err)
	}
	// The name's fake address: the first the responder hands out.
	fake := netip.AddrPortFrom(egress.FakeRange.Addr().Next(), ap.Port()).String()
	b.Run("connect", func(b *testing.B) { benchConnect(b, d, srv, fake) })
	b.Run("throughput", func(b *testing.B) { benchThroughput(b, d, srv) })
}

func benchConnect(b *testing.B, d *dialer, srv, fake string) {
	direct := func(a string) (net.Conn, error) { return net.DialTimeout("tcp", a, 5*time.Second) }
	var tDirect, tExact, tSteered []time.Duration
	for b.Loop() {
		for _, c := range []struct {
			dial func(string) (net.Conn, error)
			addr string
			out  *[]time.Duration
		}{{direct, srv, &tDirect}, {d.dial, srv, &tExact}, {d.dial, fake, &tSteered}} {
			t, err := roundTrip(c.dial, c.addr)
			if err != nil {
				b.Fatal(err)
			}
			*c.out = append(*c.out, t)
		}
	}
	md, me, ms := median(tDirect), median(tExact), median(tSteered)
	b.ReportMetric(float64(md.Nanoseconds()), "direct-ns")
	b.ReportMetric(float64(me.Nanoseconds()), "exact-ns")
	b.ReportMetric(float64(ms.Nanoseconds()), "steered-ns")
	b.ReportMetric(float64((me - md).Nanoseconds()), "exact-added-ns")
	b.ReportMetric(float64((ms - md).Nanoseconds()), "steered-added-ns")
	b.ReportMetric(float64(p95(tExact).Nanoseconds()), "exact-p95-ns")
	b.ReportMetric(float64(p95(tDirect).Nanoseconds()), "direct-p95-ns")
}

// benchThroughput sends 16 MiB and reads it back, direct and through the
// exact listener, alternating.
func benchThroughput(b *testing.B, d *dialer, srv string) {
	const n = 16 << 20
	buf := make([]byte, 256<<10)
	run := func(dial func(string) (net.Conn, error)) time.Duration {
		c, err := dial(srv)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		t0 := time.Now()
		go func() {
			for sent := 0; sent < n; sent += len(buf) {
				c.Write(buf)
			}
		}()
		if _, err := io.CopyN(io.Discard, c, n); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	direct := func(a string) (net.Conn, error) { return net.DialTimeout("tcp", a, 5*time.Second) }
	var tDirect, tFiltered []time.Duration
	for b.Loop() {
		tDirect = append(tDirect, run(direct))
		tFiltered = append(tFiltered, run(d.dial))
	}
	mbps := func(t time.Duration) float64 { return float64(n) / t.Seconds() / (1 << 20) }
	b.ReportMetric(mbps(median(tDirect)), "direct-MiB/s")
	b.ReportMetric(mbps(median(tFiltered)), "filtered-MiB/s")
	b.ReportMetric(float64(median(tFiltered))/float64(median(tDirect)), "time-ratio")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func p95(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*95/100]
}
