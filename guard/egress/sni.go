package egress

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"time"
)

// errSNIRead stops crypto/tls's handshake once it has read the
// ClientHello: the server name is all the filter wants from it.
var errSNIRead = errors.New("client hello read")

// ClientHelloName reads a TLS ClientHello from r and returns the server
// name it asks for ("" when it names none) and every byte it read, for
// the caller to pass on. ok is false when the bytes are not a TLS
// ClientHello. The parsing is crypto/tls's own (a server handshake that
// stops at GetConfigForClient), so the filter reads the name exactly as
// a Go TLS server would.
func ClientHelloName(r io.Reader) (name string, head []byte, ok bool) {
	var buf bytes.Buffer
	tee := io.TeeReader(r, &buf)
	var first [1]byte
	if _, err := io.ReadFull(tee, first[:]); err != nil {
		return "", buf.Bytes(), false
	}
	if first[0] != 0x16 { // not a TLS handshake record
		return "", buf.Bytes(), false
	}
	seen := false
	conn := &readOnlyConn{r: io.MultiReader(bytes.NewReader(first[:]), tee)}
	cfg := &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name, seen = h.ServerName, true
		return nil, errSNIRead
	}}
	tls.Server(conn, cfg).Handshake()
	return strings.ToLower(strings.TrimSuffix(name, ".")), buf.Bytes(), seen
}

// readOnlyConn is the net.Conn crypto/tls reads a ClientHello from; what
// the handshake would write (an alert) goes nowhere.
type readOnlyConn struct{ r io.Reader }

func (c *readOnlyConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *readOnlyConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *readOnlyConn) Close() error                     { return nil }
func (c *readOnlyConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *readOnlyConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (c *readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (c *readOnlyConn) SetWriteDeadline(time.Time) error { return nil }

// checkSNI reads the first bytes the client sends to the granted name
// and, when they are a TLS ClientHello, refuses a server name other than
// name (domain fronting: the fake address pins the destination, the name
// in the ClientHello must agree). A ClientHello without a name, or a
// protocol other than TLS, goes to name as addressed. It returns what it
// read, for the caller to send on. The upstream side is already being
// relayed meanwhile, so protocols where the server speaks first work.
func (f *Filter) checkSNI(c net.Conn, name string) ([]byte, bool) {
	sni, head, isTLS := ClientHelloName(c)
	if isTLS && sni != "" && sni != name {
		f.deny(RuleSNIDenied, sni, "a TLS ClientHello names "+sni+" on a connection to "+name)
		return nil, false
	}
	return head, true
}
