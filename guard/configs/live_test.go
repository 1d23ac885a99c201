package configs

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// TestExplainer: kernel events, the server's stderr (line by line, as it
// is written) and tool answers are each reported once, with the policy
// line that would allow them; EROFS (a write outside the write roots under
// the launcher's read-only mounts) is a write.
func TestExplainer(t *testing.T) {
	var out bytes.Buffer
	r := hostTree(t, "home/u/.claude-server-commander", "srv/db")
	x := NewExplainer(&out, "landlock")
	x.Event(audit.Event{Layer: "L3", Decision: audit.Deny, Rule: "net.connect_denied", Target: "127.0.0.1:5432", Reason: "python3 was refused net.connect_tcp"})
	x.Write([]byte(r.Replace("Error: EROFS: read-only file system, open '/home/u/.claude-server-commander/config.json'\nhalf a li")))
	assert.NotContains(t, out.String(), "half")
	x.Write([]byte("ne\n"))
	st := x.Stage()
	req := &guard.Request{Method: "tools/call", Tool: "query"}
	st.Response(context.Background(), req, &guard.Response{Result: []byte(r.Replace(`{"content":[{"type":"text","text":"[Errno 30] Read-only file system: '/srv/db/app.sqlite-journal'"}],"isError":true}`))})
	st.Response(context.Background(), req, &guard.Response{Error: &jsonrpc.Error{Code: -32603, Message: "open /etc/app/secret.toml: permission denied"}})
	st.Response(context.Background(), &guard.Request{Method: "tools/list"}, &guard.Response{Result: []byte(`"EACCES: permission denied, open '/x/y'"`)})
	x.Event(audit.Event{Layer: "L3", Decision: audit.Deny, Rule: "net.connect_denied", Target: "127.0.0.1:5432"})

	got := out.String()
	assert.Equal(t, 1, strings.Count(got, "127.0.0.1:5432 [kernel]"), got)
	assert.Contains(t, got, `allow: "network": {"allow": [{"host": "127.0.0.1", "ports": [5432]}]}`)
	assert.Contains(t, got, r.Replace("denied write /home/u/.claude-server-commander/config.json [server stderr]"))
	assert.Contains(t, got, r.Replace(`allow: "filesystem": {"write": ["/home/u/.claude-server-commander"]}`))
	assert.Contains(t, got, r.Replace("denied write /srv/db/app.sqlite-journal [tool query answered]"))
	assert.Contains(t, got, "denied open /etc/app/secret.toml [tool query answered]")
	assert.NotContains(t, got, "/x/y", "only tool calls' answers are read")
	assert.Len(t, x.Explained(), 4)
}

// TestExplainerLogs: what only the server reported reaches the audit log,
// as an L3 denial that `mcpguard audit` explains the same way; a kernel
// event (already logged by its backend) is not logged twice.
func TestExplainerLogs(t *testing.T) {
	var out, log bytes.Buffer
	x := NewExplainer(&out, "landlock")
	x.LogTo(audit.New(&log), "pg", "C-full-landlock")
	x.Event(audit.Event{Layer: "L3", Decision: audit.Deny, Rule: "net.connect_denied", Target: "10.0.0.1:443"})
	r := hostTree(t, "srv/data")
	x.Write([]byte(r.Replace("Error: connect ECONNREFUSED 127.0.0.1:5432\nError: EROFS: read-only file system, open '/srv/data/x.db'\n")))
	var events []audit.Event
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var e audit.Event
		require.NoError(t, json.Unmarshal([]byte(line), &e))
		events = append(events, e)
	}
	require.Len(t, events, 2, log.String())
	assert.Equal(t, RuleReportedConnect, events[0].Rule)
	assert.Equal(t, "127.0.0.1:5432", events[0].Target)
	assert.Equal(t, RuleReportedWrite, events[1].Rule)
	for _, e := range events {
		assert.Equal(t, "L3", e.Layer)
		assert.Equal(t, "pg", e.Server)
		assert.Contains(t, e.Reason, "the kernel reported nothing")
	}
	ds := Denials(events, nil, 10)
	require.Len(t, ds, 2)
	assert.Equal(t, Denial{Kind: "write", Target: r.Replace("/srv/data/x.db"), From: "server's own report", Allow: r.Replace(`"filesystem": {"write": ["/srv/data"]}`)}, ds[1])
	assert.Equal(t, "connect", ds[0].Kind)
}

// TestExplainerEscapes: a path the server printed cannot carry terminal
// control sequences into mcpguard's own lines (red team 5: ESC[1A ESC[2K
// erased the lines above).
func TestExplainerEscapes(t *testing.T) {
	var out bytes.Buffer
	x := NewExplainer(&out, "landlock")
	x.Write([]byte("Error: EACCES: permission denied, open '/srv/x\x1b[1A\x1b[2Kok'\n"))
	require.NotEmpty(t, out.String())
	assert.NotContains(t, out.String(), "\x1b")
	assert.Contains(t, out.String(), `/srv/x\x1b[1A\x1b[2Kok`)
}

// TestExplainerFetchFailed: a tool that answers node's bare "fetch failed"
// for a loopback URL in its arguments was refused a host service under L3
// (its loopback is its own): the rule that reaches it is proposed (issue
// 33's matrix, kazuph-fetch under C-landlock).
func TestExplainerFetchFailed(t *testing.T) {
	var out bytes.Buffer
	x := NewExplainer(&out, "landlock")
	st := x.Stage()
	req := &guard.Request{Method: "tools/call", Tool: "fetch", Arguments: []byte(`{"url":"http://127.0.0.1:8765/page.html","also":"https://localhost/x"}`)}
	st.Response(context.Background(), req, &guard.Response{Result: []byte(`{"content":[{"type":"text","text":"Error: TypeError: fetch failed"}],"isError":true}`)})
	got := out.String()
	assert.Contains(t, got, `allow: "network": {"allow": [{"host": "127.0.0.1", "ports": [8765]}]}`)
	assert.Contains(t, got, `allow: "network": {"allow": [{"host": "127.0.0.1", "ports": [443]}]}`)
	out.Reset()
	st.Response(context.Background(), &guard.Request{Method: "tools/call", Tool: "fetch", Arguments: []byte(`{"url":"http://example.com:8765/"}`)},
		&guard.Response{Result: []byte(`"fetch failed"`)})
	assert.Empty(t, out.String(), "only loopback: elsewhere a failed fetch says nothing about L3")
}

// TestExplainerHidden: "not found" for a path the host has is the launcher
// hiding it (an open if the file exists, a write if only its directory
// does); for a path the host lacks too it is nothing.
func TestExplainerHidden(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.txt")
	require.NoError(t, os.WriteFile(secret, nil, 0o600))
	var out bytes.Buffer
	x := NewExplainer(&out, "landlock")
	x.Text([]byte("[Errno 2] No such file or directory: '"+secret+"'\n"+
		"Error: ENOENT: no such file or directory, open '"+filepath.Join(dir, "new.txt")+"'\n"+
		"open /nonexistent/dir/x: no such file or directory\n"), "tool t answered")
	got := out.String()
	assert.Contains(t, got, "denied open "+secret+" [tool t answered, hidden from the server]")
	assert.Contains(t, got, "denied write "+filepath.Join(dir, "new.txt"))
	assert.NotContains(t, got, "/nonexistent")
}

// TestExplainerCreate: a permission error for a file that does not exist
// yet in an existing directory is a refused create, so a write; in the
// home directory no policy line allows it, and the report says what does.
func TestExplainerCreate(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	sub := filepath.Join(home, "state")
	require.NoError(t, os.Mkdir(sub, 0o755))
	var out bytes.Buffer
	x := NewExplainer(&out, "landlock")
	x.Text([]byte("EACCES: permission denied, open '"+filepath.Join(home, ".memory.jsonl.1f2e.tmp")+"'\n"+
		"PermissionError: [Errno 13] Permission denied: '"+filepath.Join(sub, "db.sqlite")+"'\n"), "tool t answered")
	got := out.String()
	assert.Contains(t, got, "denied write "+filepath.Join(home, ".memory.jsonl.1f2e.tmp"), got)
	assert.Contains(t, got, "allow: no policy line: "+home+" is the home directory")
	assert.Contains(t, got, "denied write "+filepath.Join(sub, "db.sqlite"))
	assert.Contains(t, got, `allow: "filesystem": {"write": [`+strconv.Quote(sub)+`]}`)
}
