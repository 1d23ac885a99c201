package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/landlock"
	"github.com/mcpguard/mcpguard/internal/testenv"
)

// liveSession runs the oserrors server (it answers OS errors as tool
// errors, as many real servers do) behind `mcpguard run --config
// C-landlock`, makes the calls, and keeps the session open until stderr
// shows want (or 10 s), then returns stderr.
func liveSession(t *testing.T, policy string, calls []string, want string) string {
	t.Helper()
	argv := oserrorsServer(t)
	pr, pw := io.Pipe()
	errb := &syncBuffer{}
	done := make(chan int, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() {
		done <- run(ctx, stdio{pr, io.Discard, errb}, []string{"run", "--config", "C-landlock", "--policy", policy, "--", argv[0], argv[1]})
	}()
	go func() {
		// Written aside: a run that ended early reads nothing.
		fmt.Fprintln(pw, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		fmt.Fprintln(pw, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		for i, c := range calls {
			fmt.Fprintf(pw, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`+"\n", i+2, c)
		}
	}()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && !strings.Contains(errb.String(), want); {
		time.Sleep(50 * time.Millisecond)
	}
	pw.Close()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, errb.String())
	case <-ctx.Done():
		t.Fatalf("mcpguard run did not end: %s", errb.String())
	}
	return errb.String()
}

// TestLiveDenials: L3 denials are explained while the server runs, with
// the policy line that would allow each: from the tool's own answer (an
// EACCES read, an EROFS or EACCES write) wherever Landlock runs, and from
// the kernel's audit record where it can be read (a refused connect,
// whose answer names no address; under a root proxy the egress filter
// refuses it and reports it).
func TestLiveDenials(t *testing.T) {
	if _, err := landlock.KernelABI(); err != nil {
		testenv.SkipIfNotSupported(t, err)
	}
	ws, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("s3cret"), 0o644))
	ln := testenv.Listener(t)
	allowed := ln.Addr().(*net.TCPAddr).Port
	policy := filepath.Join(t.TempDir(), "policy.json") // outside every write root
	require.NoError(t, os.WriteFile(policy, []byte(fmt.Sprintf(
		`{"server":"oserrors","filesystem":{"write":[%q]},"network":{"allow":[{"host":"127.0.0.1","ports":[%d]}]}}`, ws, allowed)), 0o644))
	calls := []string{
		fmt.Sprintf(`{"name":"read_file","arguments":{"path":%q}}`, secret),
		fmt.Sprintf(`{"name":"write_file","arguments":{"path":%q}}`, filepath.Join(outside, "new.txt")),
	}
	t.Run("answers", func(t *testing.T) {
		stderr := liveSession(t, policy, calls, "new.txt")
		// EACCES (Landlock), or not found (a root proxy's mount namespace
		// hides what the policy does not grant).
		assert.Contains(t, stderr, "mcpguard: L3 (landlock) denied open "+secret+" [tool read_file answered")
		assert.Contains(t, stderr, `allow: "filesystem": {"read": [`+fmt.Sprintf("%q", outside)+`]}`)
		assert.Contains(t, stderr, "denied write "+filepath.Join(outside, "new.txt")+" [tool write_file answered")
		assert.Contains(t, stderr, `allow: "filesystem": {"write": [`+fmt.Sprintf("%q", outside)+`]}`)
	})
	t.Run("kernel", func(t *testing.T) {
		testenv.KernelAudit(t)
		if os.Geteuid() != 0 {
			// Landlock refuses the connect (port 1 is not in the policy)
			// and the server answers a bare EACCES.
			stderr := liveSession(t, policy, []string{`{"name":"connect","arguments":{"host":"127.0.0.1","port":1}}`}, "[kernel]")
			assert.Contains(t, stderr, "Landlock's audit records")
			assert.Contains(t, stderr, "mcpguard: L3 (landlock) denied connect 127.0.0.1:1 [kernel]")
			assert.Contains(t, stderr, `allow: "network": {"allow": [{"host": "127.0.0.1", "ports": [1]}]}`)
			return
		}
		// Under a root proxy the server has a network namespace of its
		// own (its loopback is its own) and one way out: the egress
		// filter refuses 192.0.2.1:1, which no rule admits, and says so
		// while the server only sees its connection reset.
		stderr := liveSession(t, policy, []string{`{"name":"connect","arguments":{"host":"192.0.2.1","port":1}}`}, "[egress filter]")
		assert.Contains(t, stderr, "Landlock's audit records")
		assert.Contains(t, stderr, "mcpguard: L3 (landlock) denied connect 192.0.2.1:1 [egress filter]")
		assert.Contains(t, stderr, `allow: "network": {"allow": [{"host": "192.0.2.1", "ports": [1]}]}`)
	})
}
