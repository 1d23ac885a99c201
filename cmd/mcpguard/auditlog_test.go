package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/audit"
)

func writeEvents(t *testing.T, file string, events ...audit.Event) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	defer f.Close()
	l := audit.New(f)
	for _, e := range events {
		require.NoError(t, l.Log(e))
	}
}

var auditFixture = []audit.Event{
	{Time: time.Now().Add(-48 * time.Hour), Server: "files", Config: "C-full-landlock", Layer: "L1", Rule: "path.outside_roots", Tool: "read_file", Decision: audit.Deny, Reason: "path /etc/shadow outside roots", Target: "/etc/shadow"},
	{Time: time.Now().Add(-time.Hour), Server: "files", Config: "C-full-landlock", Layer: "L1", Rule: "path.outside_roots", Tool: "read_file", Decision: audit.Deny, Reason: "path /etc/passwd outside roots", Target: "/etc/passwd"},
	{Time: time.Now().Add(-time.Minute), Server: "db", Config: "C-full-landlock", Layer: "L3", Rule: "net.connect_denied", Decision: audit.Deny, Reason: "node connected to 127.0.0.1:5432", Target: "127.0.0.1:5432"},
	{Time: time.Now().Add(-time.Minute), Server: "files", Config: "C-full-landlock", Layer: "L2", Rule: "response.secret", Tool: "read_file", Decision: audit.Rewrite, Reason: "secret redacted"},
}

// TestAuditSummary: events grouped by server and rule, each group with
// what would allow it; filters by server, rule and time.
func TestAuditSummary(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	writeEvents(t, file, auditFixture...)
	code, out, stderr := runIn(t, nil, "audit", "--file", file)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "L1 path.outside_roots  2×")
	assert.Contains(t, out, "read_file /etc/shadow, read_file /etc/passwd")
	assert.Contains(t, out, "mcpguard policy override --audit "+file+" --event 2")
	assert.Contains(t, out, "allow (read_file /etc/shadow): mcpguard policy override --audit "+file+" --event 1",
		"each target its own override: one admits its own target only (issue 33's matrix)")
	assert.Contains(t, out, `"network": {"allow": [{"host": "127.0.0.1", "ports": [5432]}]}`)
	assert.Less(t, strings.Index(out, "\ndb\n"), strings.Index(out, "\nfiles\n"), "servers in order")

	_, out, _ = runIn(t, nil, "audit", "--file", file, "--server", "db")
	assert.NotContains(t, out, "files")
	_, out, _ = runIn(t, nil, "audit", "--file", file, "--rule", "path")
	assert.Contains(t, out, "path.outside_roots")
	assert.NotContains(t, out, "net.connect_denied")
	_, out, _ = runIn(t, nil, "audit", "--file", file, "--since", "2h")
	assert.Contains(t, out, "L1 path.outside_roots  1×")
	code, _, _ = runIn(t, nil, "audit", "--file", file, "--since", "yesterday-ish")
	assert.Equal(t, 2, code)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAuditRoutine: the env allow-list's work in every session is one
// line after the denials, not the first group of every summary (issue
// 33's matrix); --rule env.filtered shows it as a group.
func TestAuditRoutine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	env := audit.Event{Time: time.Now(), Server: "files", Config: "C-app", Layer: "L1", Rule: "env.filtered", Decision: audit.Rewrite,
		Reason: "environment variables not in the policy's env allow-list were not passed to the server", Target: "AWS_SECRET_ACCESS_KEY,SSH_AUTH_SOCK"}
	writeEvents(t, file, env, env)
	code, out, stderr := runIn(t, nil, "audit", "--file", file)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "no denials or rewrites")
	assert.Contains(t, out, "routine: 2 session(s) started without the environment variables the policy's env allow-list leaves out (AWS_SECRET_ACCESS_KEY, SSH_AUTH_SOCK)")
	assert.NotContains(t, out, "L1 env.filtered")

	file = filepath.Join(t.TempDir(), "audit.jsonl")
	writeEvents(t, file, append([]audit.Event{env}, auditFixture...)...)
	_, out, _ = runIn(t, nil, "audit", "--file", file)
	assert.Less(t, strings.Index(out, "path.outside_roots"), strings.Index(out, "routine: 1 session(s)"))
	_, out, _ = runIn(t, nil, "audit", "--file", file, "--rule", "env.filtered")
	assert.Contains(t, out, "L1 env.filtered  1×")
	assert.NotContains(t, out, "routine:")
}

// TestAuditFollow: --follow prints an event appended after it started,
// with what would allow it, and only that one.
func TestAuditFollow(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	writeEvents(t, file, auditFixture[:1]...)
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- cmdAudit(ctx, stdio{in: strings.NewReader(""), out: out, err: out}, []string{"--file", file, "--follow"})
	}()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "following") }, 10*time.Second, 20*time.Millisecond)
	ev := auditFixture[2]
	writeEvents(t, file, ev)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "net.connect_denied deny") }, 10*time.Second, 20*time.Millisecond, out.String())
	cancel()
	require.NoError(t, <-done)
	got := out.String()[strings.Index(out.String(), "following"):]
	assert.NotContains(t, got, "/etc/shadow", "events before --follow are in the summary only")
	assert.Contains(t, got, `"ports": [5432]`)
}

// TestAuditWrappedServer: an event of a server wrap put behind mcpguard
// names its client and policy, and its override command writes into that
// policy's own overrides directory; --server takes the name the client's
// file gives the server.
func TestAuditWrappedServer(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MCPGUARD_CONFIG_DIR", dir)
	pol := filepath.Join(dir, "policies", "claude-code", "files-0a1b2c.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(pol), 0o700))
	require.NoError(t, os.WriteFile(pol, []byte(`{"server": "files-0a1b2c"}`), 0o600))
	file := filepath.Join(dir, "audit.jsonl")
	e := auditFixture[1]
	e.Server = "files-0a1b2c"
	other := e
	other.Server = "files-ffffff" // another project's "files": no policy kept here
	writeEvents(t, file, e, other)
	code, out, stderr := runIn(t, nil, "audit", "--server", "files")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "files-0a1b2c (claude-code; policy "+pol+")")
	assert.Contains(t, out, "mcpguard policy override --audit "+file+" --event 1 --write "+filepath.Join(dir, "policies", "claude-code", "overrides"))
	assert.Contains(t, out, "--event 2 --write <the policy's overrides/ directory>")
	_, out, _ = runIn(t, nil, "audit", "--server", "file")
	assert.Contains(t, out, "no denials", "a prefix of a name is not the name")
}

// TestAuditSuppressed: a session's summary of the events it did not write
// (audit.Logger.Limited) adds to its rule's count and does not stand in
// for the rule's last event or what would allow it.
func TestAuditSuppressed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	e := audit.Event{Time: time.Now().Add(-time.Minute), Server: "fs", Config: "C-full-landlock", Layer: "L3",
		Rule: "file.protected_denied", Decision: audit.Deny, Target: "/ws/.bashrc", Reason: "create of a protected name refused"}
	sum := audit.Event{Time: time.Now(), Server: "fs", Config: "C-full-landlock", Layer: "L3",
		Rule: "file.protected_denied", Decision: audit.Deny, Suppressed: 5000, Reason: "5000 more file.protected_denied events suppressed this session"}
	writeEvents(t, file, e, e, sum)
	code, out, stderr := runIn(t, nil, "audit", "--file", file)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "L3 file.protected_denied  2× and 5000 more not written")
	assert.Contains(t, out, "last: create of a protected name refused")
	assert.Contains(t, out, "/ws/.bashrc")
}
