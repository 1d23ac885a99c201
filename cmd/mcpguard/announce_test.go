package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/guard/policy"
)

// A tool L2 removes from a listing is announced on the session's stderr
// with the reason and the command that restores it; that command, run as
// printed, writes the override, and the next session lists the tool.
func TestRemovalAnnouncedAndRestored(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "mode.txt"), []byte("plain_poison\n"), 0o644))
	polDir := t.TempDir()
	pol := filepath.Join(polDir, "js-protocol.json")
	b, err := os.ReadFile("../../testdata/policies/js-protocol.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(pol, b, 0o644))
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	server, err := filepath.Abs("../../testdata/servers/js/protocol/server.js")
	require.NoError(t, err)

	list := func() ([]string, string) {
		f, err := os.OpenFile(auditFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		require.NoError(t, err)
		defer f.Close()
		setup, err := configs.Build(configs.CApp, configs.Options{Server: "js-protocol", PolicyFile: pol, Audit: audit.New(f),
			Vars: map[string]string{"WS": ws}})
		require.NoError(t, err)
		var stderr syncBuf
		s, err := guard.Open(context.Background(), &guard.Proxy{Command: []string{node, server, "--ws", ws},
			Server: "js-protocol", Config: setup.Name, Stages: setup.Stages, ServerHooks: setup.ServerHooks,
			Prepare: setup.Prepare, Stderr: &stderr, Grace: 500 * time.Millisecond})
		require.NoError(t, err)
		defer s.Close()
		res, err := s.ListTools(context.Background(), mcp.ListToolsRequest{})
		require.NoError(t, err)
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		return names, stderr.String()
	}

	names, stderr := list()
	assert.NotContains(t, names, "format_note")
	assert.Contains(t, stderr, `L2 tool removed from tools/list "format_note" (rule tool.poisoned)`)
	assert.Contains(t, stderr, "credential_instruction")
	const cmd = "mcpguard policy override --audit FILE --tool format_note --write DIR"
	require.Contains(t, stderr, cmd)

	// The command as printed, FILE and DIR filled in.
	var out, errOut bytes.Buffer
	args := strings.Fields(strings.NewReplacer("FILE", auditFile, "DIR", filepath.Join(polDir, policy.OverridesDir)).Replace(cmd))[2:]
	require.NoError(t, cmdPolicy(context.Background(), stdio{in: strings.NewReader(""), out: &out, err: &errOut}, args), errOut.String())
	assert.Contains(t, out.String(), `"rule": "tool.poisoned"`)

	names, _ = list()
	assert.Contains(t, names, "format_note", "the override restores it")
}

// syncBuf is a bytes.Buffer safe for the proxy's writers.
type syncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
