package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/guard/runtime"
	"github.com/mcpguard/mcpguard/lab/servers"
)

// buildServer builds one corpus Go server and returns its argv.
func buildServer(t *testing.T, name string) []string {
	t.Helper()
	bin := t.TempDir()
	argv, err := servers.Command(context.Background(), name, bin)
	require.NoError(t, err)
	return argv
}

func callText(t *testing.T, s *guard.Session, tool string, args map[string]any) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := s.CallTool(ctx, req)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), nil
}

// TestOverrideWorkflow is the operator's loop, end to end on the corpus's
// filesystem server behind C-app: a legitimate read of a shared directory
// the policy does not grant is denied and audited; `mcpguard policy
// override` turns the audit event into a scoped override saved beside the
// policy; in a new session the same call passes, while a neighbouring file
// in the same directory, and the same file through another tool, stay
// denied.
func TestOverrideWorkflow(t *testing.T) {
	argv := buildServer(t, "filesystem")
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	ws, shared := filepath.Join(base, "ws"), filepath.Join(base, "shared")
	require.NoError(t, os.MkdirAll(ws, 0o755))
	require.NoError(t, os.MkdirAll(shared, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(shared, "reference.txt"), []byte("the reference text"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(shared, "other.txt"), []byte("other text"), 0o644))

	polDir := t.TempDir()
	pol := filepath.Join(polDir, "filesystem.json")
	b, err := os.ReadFile("../../testdata/policies/filesystem.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(pol, b, 0o644))
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	vars := map[string]string{"WS": ws, "HOME": base, "TMP": base}

	open := func() *guard.Session {
		f, err := os.OpenFile(auditFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		setup, err := configs.Build(configs.CApp, configs.Options{Server: "filesystem", PolicyFile: pol, Audit: audit.New(f), Vars: vars})
		require.NoError(t, err)
		// The server serves both directories; the policy grants only WS.
		s, err := guard.Open(context.Background(), &guard.Proxy{
			Command: append(append([]string{}, argv...), "--ws", ws, "--ws", shared),
			Server:  "filesystem", Config: setup.Name, Stages: setup.Stages, Prepare: setup.Prepare,
			Stderr: os.Stderr, Grace: 500 * time.Millisecond,
		})
		require.NoError(t, err)
		return s
	}
	ref := filepath.Join(shared, "reference.txt")

	// 1. Denied, with the rule named, and audited.
	s := open()
	_, err = callText(t, s, "read_file", map[string]any{"path": ref})
	require.Error(t, err)
	msg, denied := guard.IsDenied(err)
	require.True(t, denied, "%v", err)
	assert.Contains(t, msg, policy.RulePathOutside)
	s.Close()

	// 2. The CLI turns the last audit event into an override and saves it.
	var out, stderr bytes.Buffer
	st := stdio{in: strings.NewReader(""), out: &out, err: &stderr}
	require.NoError(t, cmdPolicy(context.Background(), st,
		[]string{"override", "--audit", auditFile, "--last", "--write", filepath.Join(polDir, policy.OverridesDir)}), stderr.String())
	var o policy.Override
	require.NoError(t, json.Unmarshal(out.Bytes(), &o))
	assert.Equal(t, policy.Override{Server: "filesystem", Tool: "read_file", Rule: policy.RulePathOutside, Path: ref,
		Reason: o.Reason, Event: o.Event}, o)
	files, err := filepath.Glob(filepath.Join(polDir, policy.OverridesDir, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)

	// 3. A new session picks the override up: the call passes ...
	s = open()
	defer s.Close()
	text, err := callText(t, s, "read_file", map[string]any{"path": ref})
	require.NoError(t, err)
	assert.Contains(t, text, "the reference text")
	// ... and what is outside its scope stays denied: the file next to it,
	// and the same file through another tool.
	_, err = callText(t, s, "read_file", map[string]any{"path": filepath.Join(shared, "other.txt")})
	_, denied = guard.IsDenied(err)
	assert.True(t, denied, "neighbouring file: %v", err)
	_, err = callText(t, s, "write_file", map[string]any{"path": ref, "content": "overwritten"})
	_, denied = guard.IsDenied(err)
	assert.True(t, denied, "another tool: %v", err)
	got, err := os.ReadFile(ref)
	require.NoError(t, err)
	assert.Equal(t, "the reference text", string(got))
}

func TestPolicyInit(t *testing.T) {
	argv := buildServer(t, "filesystem")
	ws := t.TempDir()
	t.Chdir(ws) // init reads the working directory (the workspace) only
	var out, stderr bytes.Buffer
	st := stdio{in: strings.NewReader(""), out: &out, err: &stderr}
	args := append([]string{"init", "--server", "filesystem", "--"}, argv...)
	args = append(args, "--ws", ws)
	require.NoError(t, cmdPolicy(context.Background(), st, args), stderr.String())
	p, err := policy.Parse(out.Bytes(), map[string]string{"WS": ws})
	require.NoError(t, err)
	assert.Equal(t, "filesystem", p.Server)
	assert.Equal(t, policy.Arg{Kind: policy.KindPath, Access: policy.Read}, p.Tools["read_file"].Args["path"])
	assert.Equal(t, policy.Arg{Kind: policy.KindPath, Access: policy.Write}, p.Tools["write_file"].Args["path"])
	assert.Equal(t, policy.Arg{Kind: policy.KindPath, Access: policy.Write}, p.Tools["move_file"].Args["destination"])
	assert.Len(t, p.Tools, 9)
	_, err = policy.Compile(p, policy.EngineOptions{L2: true})
	require.NoError(t, err)

	// Usage errors.
	assert.ErrorIs(t, cmdPolicy(context.Background(), st, []string{"init"}), errUsage)
	assert.ErrorIs(t, cmdPolicy(context.Background(), st, []string{"nope"}), errUsage)
	assert.ErrorIs(t, cmdPolicy(context.Background(), st, []string{"override"}), errUsage)
	assert.Error(t, cmdPolicy(context.Background(), st, []string{"init", "--", "/nonexistent/server"}))
}

func TestPolicyCheckAndOverrideErrors(t *testing.T) {
	var out, stderr bytes.Buffer
	st := stdio{in: strings.NewReader(""), out: &out, err: &stderr}
	dir := t.TempDir()
	require.NoError(t, cmdPolicy(context.Background(), st, []string{"check", "--var", "WS=" + dir, "--var", "HOME=" + dir, "--var", "TMP=" + dir, "../../testdata/policies/shell.json"}))
	assert.Contains(t, out.String(), "ok: server shell")
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"server":"x","tools":{"t":{"args":{"a":{"kind":"weird"}}}}}`), 0o644))
	assert.Error(t, cmdPolicy(context.Background(), st, []string{"check", bad}))

	log := filepath.Join(dir, "audit.jsonl")
	require.NoError(t, os.WriteFile(log, []byte(`{"server":"x","layer":"L1","rule":"schema.invalid","tool":"t","decision":"deny"}`+"\n"), 0o644))
	err := cmdPolicy(context.Background(), st, []string{"override", "--audit", log, "--event", "1"})
	assert.ErrorIs(t, err, policy.ErrNotOverridable)
	assert.ErrorIs(t, cmdPolicy(context.Background(), st, []string{"override", "--audit", log, "--event", "2"}), errUsage)
	require.NoError(t, os.WriteFile(log, []byte("not json\n"), 0o644))
	assert.ErrorContains(t, cmdPolicy(context.Background(), st, []string{"override", "--audit", log}), ":1:")
}

// TestPolicyInitPin: a policy pinned by `policy init --pin` lists every
// tool of the unchanged server through C-app; with one pin changed (the
// server "changed" since approval) that tool is hidden and refused.
func TestPolicyInitPin(t *testing.T) {
	argv := buildServer(t, "filesystem")
	ws := t.TempDir()
	t.Chdir(ws) // init reads the working directory (the workspace) only
	pol := filepath.Join(t.TempDir(), "filesystem.json")
	var out, stderr bytes.Buffer
	st := stdio{in: strings.NewReader(""), out: &out, err: &stderr}
	args := append([]string{"init", "--pin", "--server", "filesystem", "--out", pol, "--"}, argv...)
	require.NoError(t, cmdPolicy(context.Background(), st, append(args, "--ws", ws)), stderr.String())

	list := func() ([]string, *guard.Session) {
		setup, err := configs.Build(configs.CApp, configs.Options{Server: "filesystem", PolicyFile: pol,
			Vars: map[string]string{"WS": ws, "HOME": ws, "TMP": ws}})
		require.NoError(t, err)
		s, err := guard.Open(context.Background(), &guard.Proxy{Command: append(append([]string{}, argv...), "--ws", ws),
			Server: "filesystem", Config: setup.Name, Stages: setup.Stages, Prepare: setup.Prepare, Grace: 500 * time.Millisecond})
		require.NoError(t, err)
		res, err := s.ListTools(context.Background(), mcp.ListToolsRequest{})
		require.NoError(t, err)
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		return names, s
	}
	names, s := list()
	s.Close()
	assert.Len(t, names, 9)

	p, err := policy.Load(pol, map[string]string{"WS": ws})
	require.NoError(t, err)
	require.NotEmpty(t, p.Tools["read_file"].Pin)
	b, err := os.ReadFile(pol)
	require.NoError(t, err)
	b = bytes.Replace(b, []byte(p.Tools["read_file"].Pin), []byte("sha256:0000"), 1)
	require.NoError(t, os.WriteFile(pol, b, 0o644))
	names, s = list()
	defer s.Close()
	assert.Len(t, names, 8)
	assert.NotContains(t, names, "read_file")
	_, err = callText(t, s, "read_file", map[string]any{"path": "x"})
	msg, denied := guard.IsDenied(err)
	require.True(t, denied, "%v", err)
	assert.Contains(t, msg, "tool.rug_pull")
}

func TestServerName(t *testing.T) {
	dir := t.TempDir()
	entry := filepath.Join(dir, "node_modules", "@acme", "srv", "dist", "index.js")
	require.NoError(t, os.MkdirAll(filepath.Dir(entry), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "node_modules", "@acme", "srv", "package.json"), []byte(`{"name":"@acme/srv"}`), 0o644))
	require.NoError(t, os.WriteFile(entry, nil, 0o644))
	for argv, want := range map[string]string{
		"npx -y @modelcontextprotocol/server-memory@1.0 /x": "@modelcontextprotocol/server-memory",
		"npm exec -y pkg":                 "pkg",
		"node " + entry:                   "@acme/srv",
		"python3 -u /srv/notes/server.py": "server",
		"node ./relative/entry.js":        "entry",
		"/usr/local/bin/mcp-go-server":    "mcp-go-server",
		"uvx mcp-server-fetch@1.2 --x":    "mcp-server-fetch",
		"uvx --from pkg[cli]==2 cmd":      "pkg",
		"pipx run --spec notes==1 notes":  "notes",
		"pipx run notes-server":           "notes-server",
		"uvx @":                           "@",
	} {
		assert.Equal(t, want, serverName(strings.Fields(argv)), argv)
	}
}

func TestStateRoot(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, "state.json"), nil, 0o644))
	for v, want := range map[string]string{
		filepath.Join(dir, "memory.jsonl"): dir, // a state file: its directory
		dir:                                dir, // a state directory: itself
		filepath.Join(dir, "new", "memory.jsonl"): filepath.Join(dir, "new"),            // a directory to be made: itself
		filepath.Join(home, ".memory.jsonl"):      filepath.Join(home, ".memory.jsonl"), // in $HOME: the file alone, never $HOME
		filepath.Join(home, "state.json"):         filepath.Join(home, "state.json"),
		home:                                      "",
		"relative/x":                              "",
		"/memory.json":                            "/memory.json", // in /: the file alone, never /
		"/usr/lib/node_modules":                   "",             // a system tree is runtime, not state
		"/etc/app/state.json":                     "",
	} {
		assert.Equal(t, want, stateRoot(v, home), v)
	}
}

func TestClientReply(t *testing.T) {
	var m map[string]any
	require.NoError(t, json.Unmarshal(clientReply(json.RawMessage(`7`), "roots/list"), &m))
	assert.Equal(t, map[string]any{"roots": []any{}}, m["result"])
	require.NoError(t, json.Unmarshal(clientReply(json.RawMessage(`"a"`), "sampling/createMessage"), &m))
	assert.Contains(t, m, "error")
}

// `run` names the session after the policy's server field, not the file:
// overrides made from its audit events then apply.
func TestRunNamesSessionByPolicy(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "policy.json")
	require.NoError(t, os.WriteFile(pol, []byte(`{"server":"node","tools":{}}`), 0o644))
	g := guardFlags{config: "C-app", policy: pol, vars: varsFlag{}}
	p, closeFn, err := g.proxy(stdio{strings.NewReader(""), io.Discard, io.Discard}, []string{"true"})
	require.NoError(t, err)
	defer closeFn()
	assert.Equal(t, "node", p.Server)
}

// policy init --learn: the server runs confined under the observer; the
// data file a call read is reported, not granted, and nothing the
// resolver already grants (nor the launcher) is proposed again.
func TestPolicyInitLearn(t *testing.T) {
	o, err := runtime.Observe()
	if errors.Is(err, runtime.ErrNoObserver) {
		t.Skipf("learn mode unavailable here: %v", err)
	}
	require.NoError(t, err)
	o.Stop()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	ws := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "notes"), 0o755))
	note := filepath.Join(ws, "notes", "todo.txt")
	require.NoError(t, os.WriteFile(note, []byte("buy tea"), 0o644))
	out := filepath.Join(t.TempDir(), "p.json")
	srv, err := filepath.Abs("../../testdata/servers/py/notes/server.py")
	require.NoError(t, err)
	// policy init runs the server confined, with the working directory
	// (the workspace, as docs/policy.md says to run it) read-only.
	t.Chdir(ws)
	code, _, stderr := runIn(t, nil, "policy", "init", "--learn", "--call", `read_note={"name":"todo"}`, "--out", out, "--",
		py, "-B", srv, "--ws", ws)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "learned: data "+note+" (reported, not granted")
	assert.NotContains(t, stderr, "learned: runtime.read", "the resolver already grants what python loads")
	p, err := policy.Load(out, map[string]string{"WS": ws})
	require.NoError(t, err)
	assert.Empty(t, p.Runtime.Read)
	assert.NotContains(t, p.Filesystem.Write, filepath.Dir(note))
}
