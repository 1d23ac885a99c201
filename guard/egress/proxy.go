package egress

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// serveProxy serves one connection to the proxy port: SOCKS5 when it
// starts with version byte 5, HTTP (CONNECT, or a request in absolute
// form) otherwise.
func (f *Filter) serveProxy(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == 5 {
		f.serveSOCKS(c, br)
		return
	}
	f.serveHTTP(c, br)
}

// target is where a proxy request goes, after the plan admitted it.
type target struct {
	hostport string
	name     string // a granted host name, resolved and checked at dial
}

// admit decides a proxy request for host and port: a name must match a
// name rule, an address an address rule (a fake address stands for its
// name).
func (f *Filter) admit(host string, port uint16) (target, bool) {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	hp := net.JoinHostPort(host, strconv.Itoa(int(port)))
	if a, err := netip.ParseAddr(host); err == nil {
		if name, ok := f.nameOfFake(a); ok {
			host = name
		} else if f.plan.AdmitAddr(a, port) {
			return target{hostport: netip.AddrPortFrom(a.Unmap(), port).String()}, true
		} else {
			f.deny(RuleProxyDenied, hp, "no network rule admits "+hp)
			return target{}, false
		}
	}
	if host == "localhost" {
		// Names for loopback go by the address rules, as a connect would.
		if f.plan.AdmitAddr(netip.MustParseAddr("127.0.0.1"), port) {
			return target{hostport: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port).String()}, true
		}
	}
	if len(f.plan.AdmitName(host, port)) == 0 {
		f.deny(RuleProxyDenied, hp, "no network rule admits "+hp)
		return target{}, false
	}
	return target{hostport: net.JoinHostPort(host, strconv.Itoa(int(port))), name: host}, true
}

// connectTo dials an admitted target and relays c to it; pre are bytes
// the client already sent past the request.
func (f *Filter) connectTo(c net.Conn, br *bufio.Reader, t target, ok func() error) {
	up, err := f.dial(f.ctx, "tcp", t.hostport, t.name)
	if err != nil {
		f.dialDenied(t.hostport, err)
		return
	}
	if err := ok(); err != nil {
		up.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	in := &bufferedConn{Conn: c, r: br}
	var check func(net.Conn) ([]byte, bool)
	if t.name != "" {
		name := t.name
		check = func(c net.Conn) ([]byte, bool) { return f.checkSNI(c, name) }
	}
	f.splice(in, up, check)
}

// bufferedConn reads first what a bufio.Reader already holds.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// WriteTo keeps io.Copy from the connection working (bufio's, then the
// socket's own splice).
func (c *bufferedConn) WriteTo(w io.Writer) (int64, error) { return c.r.WriteTo(w) }

func (c *bufferedConn) CloseWrite() error {
	if tc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return tc.CloseWrite()
	}
	return c.Conn.Close()
}

// serveHTTP handles CONNECT host:port and requests in absolute form
// (GET http://host/...). After the first request the connection is relayed
// as it is: every later byte goes to the host that was admitted.
func (f *Filter) serveHTTP(c net.Conn, br *bufio.Reader) {
	req, err := http.ReadRequest(br)
	if err != nil {
		writeHTTPError(c, http.StatusBadRequest)
		return
	}
	host, portStr := req.URL.Hostname(), req.URL.Port()
	if req.Method == http.MethodConnect {
		host, portStr, err = net.SplitHostPort(req.Host)
		if err != nil {
			writeHTTPError(c, http.StatusBadRequest)
			return
		}
	} else if req.URL.Scheme != "http" || host == "" {
		// Only a proxy request for plain HTTP comes in absolute form;
		// anything else is not for a proxy.
		writeHTTPError(c, http.StatusBadRequest)
		return
	}
	if portStr == "" {
		portStr = "80"
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		writeHTTPError(c, http.StatusBadRequest)
		return
	}
	t, ok := f.admit(host, uint16(port))
	if !ok {
		writeHTTPError(c, http.StatusForbidden)
		return
	}
	if req.Method == http.MethodConnect {
		f.connectTo(c, br, t, func() error {
			_, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
			return err
		})
		return
	}
	up, err := f.dial(f.ctx, "tcp", t.hostport, t.name)
	if err != nil {
		f.dialDenied(t.hostport, err)
		writeHTTPError(c, http.StatusBadGateway)
		return
	}
	// Origin form upstream, the proxy's own headers dropped.
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	if err := req.Write(up); err != nil {
		up.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	f.splice(&bufferedConn{Conn: c, r: br}, up, nil)
}

func writeHTTPError(c net.Conn, code int) {
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", code, http.StatusText(code))
}

// SOCKS5 (RFC 1928), no authentication, CONNECT only.
const (
	socksVersion   = 5
	socksNoAuth    = 0
	socksNoMethod  = 0xff
	socksConnect   = 1
	socksIPv4      = 1
	socksDomain    = 3
	socksIPv6      = 4
	socksOK        = 0
	socksDenied    = 2
	socksCmdUnsupp = 7
	socksAddrUnsup = 8
)

var errSOCKS = errors.New("bad socks5 request")

func (f *Filter) serveSOCKS(c net.Conn, br *bufio.Reader) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || hdr[0] != socksVersion {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	if !strings.ContainsRune(string(methods), socksNoAuth) {
		c.Write([]byte{socksVersion, socksNoMethod})
		return
	}
	if _, err := c.Write([]byte{socksVersion, socksNoAuth}); err != nil {
		return
	}
	host, port, cmd, err := readSOCKSRequest(br)
	if err != nil {
		socksReply(c, socksAddrUnsup)
		return
	}
	if cmd != socksConnect {
		socksReply(c, socksCmdUnsupp)
		return
	}
	t, ok := f.admit(host, port)
	if !ok {
		socksReply(c, socksDenied)
		return
	}
	f.connectTo(c, br, t, func() error { return socksReply(c, socksOK) })
}

func readSOCKSRequest(br *bufio.Reader) (host string, port uint16, cmd byte, err error) {
	var req [4]byte
	if _, err = io.ReadFull(br, req[:]); err != nil {
		return
	}
	if req[0] != socksVersion {
		return "", 0, 0, errSOCKS
	}
	cmd = req[1]
	switch req[3] {
	case socksIPv4:
		var a [4]byte
		if _, err = io.ReadFull(br, a[:]); err != nil {
			return
		}
		host = netip.AddrFrom4(a).String()
	case socksIPv6:
		var a [16]byte
		if _, err = io.ReadFull(br, a[:]); err != nil {
			return
		}
		host = netip.AddrFrom16(a).String()
	case socksDomain:
		var n [1]byte
		if _, err = io.ReadFull(br, n[:]); err != nil {
			return
		}
		name := make([]byte, n[0])
		if _, err = io.ReadFull(br, name); err != nil {
			return
		}
		host = string(name)
	default:
		return "", 0, 0, errSOCKS
	}
	var p [2]byte
	if _, err = io.ReadFull(br, p[:]); err != nil {
		return
	}
	return host, binary.BigEndian.Uint16(p[:]), cmd, nil
}

func socksReply(c net.Conn, code byte) error {
	_, err := c.Write([]byte{socksVersion, code, 0, socksIPv4, 0, 0, 0, 0, 0, 0})
	return err
}
