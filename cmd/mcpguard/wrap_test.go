package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tailscale/hujson"

	"github.com/mcpguard/mcpguard/clients"
	"github.com/mcpguard/mcpguard/guard/landlock"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/internal/testenv"
)

// TestMain lets the test binary be mcpguard itself for what wrap starts
// (its start check runs the wrapped command line, whose mcpguard is this
// binary by default): with MCPGUARD_TEST_MAIN=1 it runs main.
func TestMain(m *testing.M) {
	if os.Getenv("MCPGUARD_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// userHome makes a fresh $HOME (and mcpguard's configuration directory in
// it) for the client commands, with files written relative to it.
func userHome(t *testing.T, files map[string]string) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("MCPGUARD_CONFIG_DIR", filepath.Join(home, ".config", "mcpguard"))
	for _, k := range []string{"CLAUDE_CONFIG_DIR", "CODEX_HOME"} {
		t.Setenv(k, "")
	}
	t.Chdir(home)
	for rel, content := range files {
		p := filepath.Join(home, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return home
}

// TestClientsBadInput: a configuration file that does not parse is listed
// with where it fails and never changed; wrap and unwrap say so and exit
// 1 (the other files are still done); a --project that is not a directory
// is a usage error.
func TestClientsBadInput(t *testing.T) {
	broken := map[string]string{
		".cursor/mcp.json":   `{"mcpServers": {"a": {"command": "x",}}`,
		".codex/config.toml": "[mcp_servers.a]\ncommand = \"x\"\n\n[mcp_servers.b\n",
	}
	home := userHome(t, broken)
	code, out, stderr := runIn(t, nil, "clients")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "cannot read: "+filepath.Join(home, ".cursor/mcp.json")+": hujson: line 1, column 40")
	assert.Contains(t, out, "cannot read: "+filepath.Join(home, ".codex/config.toml")+": line 4, column 15: toml:")

	code, _, stderr = runIn(t, nil, "wrap")
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "0 wrapped, 2 not")
	code, _, stderr = runIn(t, nil, "unwrap")
	assert.Equal(t, 0, code, "nothing was wrapped, nothing to put back: %s", stderr)
	for rel, content := range broken {
		b, err := os.ReadFile(filepath.Join(home, rel))
		require.NoError(t, err)
		assert.Equal(t, content, string(b), "%s changed", rel)
	}

	for _, cmd := range []string{"clients", "wrap", "unwrap", "scan"} {
		code, _, stderr = runIn(t, nil, cmd, "--project", filepath.Join(home, "nonexistent"))
		assert.Equal(t, 2, code, "%s: %s", cmd, stderr)
		assert.Contains(t, stderr, "no such file or directory", cmd)
	}
}

// pythonServer is the argv of one of testdata's stdio servers run by
// python3, confined by Landlock in what starts it: it skips where python3
// or Landlock is missing.
func pythonServer(t *testing.T, script string) []string {
	t.Helper()
	if _, err := landlock.KernelABI(); err != nil {
		testenv.SkipIfNotSupported(t, err)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	server, err := filepath.Abs(filepath.Join("testdata", script))
	require.NoError(t, err)
	return []string{py, server}
}

// oserrorsServer is testdata/oserrors_server.py: a server with no checks
// of its own, which answers OS errors as tool errors.
func oserrorsServer(t *testing.T) []string { return pythonServer(t, "oserrors_server.py") }

// TestPolicyInitStateInHome: a state file right in $HOME is granted
// alone, never $HOME (where mcpguard's own policy and audit log live), and
// policy init names the edit that gives the server a directory of its own.
func TestPolicyInitStateInHome(t *testing.T) {
	argv := oserrorsServer(t)
	home := userHome(t, nil)
	state := filepath.Join(home, ".state.json")
	out := filepath.Join(home, ".config", "mcpguard", "p.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(out), 0o755))
	code, _, stderr := runIn(t, nil, append([]string{"policy", "init", "--out", out, "--env", "STATE=" + state, "--"}, argv...)...)
	require.Equal(t, 0, code, stderr)
	p, err := policy.Load(out, map[string]string{"WS": "/ws"})
	require.NoError(t, err)
	assert.Equal(t, []string{"/ws", state}, p.Filesystem.Write, "the tools' ${WS} and the state file, not $HOME")
	assert.Contains(t, stderr, "give it a directory of its own (STATE="+filepath.Join(home, ".oserrors_server", ".state.json"))
}

// TestWrapUnwrap: wrap puts a real (confined) server behind mcpguard in a
// JSON-with-comments file and in a TOML file, after starting each as its
// client will; a second wrap changes no byte; a server whose wrapped
// command would not start (its kept policy makes $HOME writable, which
// mcpguard run refuses) keeps its entry as it was and wrap says why and
// exits 1; unwrap restores both files byte for byte.
func TestWrapUnwrap(t *testing.T) {
	argv := oserrorsServer(t)
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	files := map[string]string{
		".gemini/settings.json": `// Gemini CLI: comments, no trailing commas
{
  "theme": "Default", // kept
  "mcpServers": {
    "os": {
      "command": ` + q(argv[0]) + `,
      "args": [` + q(argv[1]) + `] // the server
    },
    "bad": {"command": ` + q(argv[0]) + `, "args": [` + q(argv[1]) + `, "bad"]}
  }
}
`,
		".codex/config.toml": "# Codex\n[mcp_servers.os]\ncommand = " + q(argv[0]) + " # python\nargs = [" + q(argv[1]) + "]\n",
	}
	home := userHome(t, files)
	t.Setenv("MCPGUARD_TEST_MAIN", "1")
	st, err := clients.DefaultStore()
	require.NoError(t, err)
	env, err := clients.HostEnv()
	require.NoError(t, err)
	for _, f := range clients.Discover(env) {
		for _, srv := range f.Servers {
			if srv.Name == "bad" {
				p := st.PolicyPath(f.File, srv)
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
				require.NoError(t, os.WriteFile(p, []byte(`{"server": "bad", "filesystem": {"write": [`+q(home)+`]}}`), 0o600))
			}
		}
	}

	code, out, stderr := runIn(t, nil, "wrap")
	require.Equal(t, 1, code, "bad is not wrapped: %s%s", out, stderr)
	assert.Contains(t, out, "gemini ~/.gemini/settings.json os: wrapped (C-full-landlock)")
	assert.Contains(t, out, "codex ~/.codex/config.toml os: wrapped (C-full-landlock)")
	assert.Contains(t, out, "gemini ~/.gemini/settings.json bad: not wrapped: it does not start through mcpguard")
	assert.Contains(t, out, "a write root reaches the guard's own files", "mcpguard run's own reason")
	assert.Contains(t, stderr, "gemini os: 3 tools through mcpguard")
	assert.Contains(t, stderr, "2 wrapped, 1 not")
	wrapped := map[string][]byte{}
	for rel := range files {
		b, err := os.ReadFile(filepath.Join(home, rel))
		require.NoError(t, err)
		assert.Contains(t, string(b), `"run", "--config", "C-full-landlock"`, rel)
		wrapped[rel] = b
	}
	assert.Contains(t, string(wrapped[".gemini/settings.json"]), `"bad": {"command": `+q(argv[0])+`, "args": [`+q(argv[1])+`, "bad"]}`, "bad's entry as it was")
	assert.True(t, json.Valid(stripComments(t, wrapped[".gemini/settings.json"])), "JSON once its comments are taken out:\n%s", wrapped[".gemini/settings.json"])

	code, out, stderr = runIn(t, nil, "wrap", "--server", "os")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "os: not wrapped: already guarded")
	for rel, b := range wrapped {
		again, err := os.ReadFile(filepath.Join(home, rel))
		require.NoError(t, err)
		assert.Equal(t, string(b), string(again), "a second wrap changed %s", rel)
	}

	code, out, stderr = runIn(t, nil, "unwrap")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, 2, strings.Count(out, "restored byte for byte"), out)
	for rel, before := range files {
		b, err := os.ReadFile(filepath.Join(home, rel))
		require.NoError(t, err)
		assert.Equal(t, before, string(b), "%s not restored byte for byte", rel)
	}
}

// stripComments is b as strict JSON reads it, comments taken out.
func stripComments(t *testing.T, b []byte) []byte {
	t.Helper()
	v, err := hujson.Parse(bytes.Clone(b)) // Standardize writes over its input
	require.NoError(t, err)
	v.Standardize()
	return v.Pack()
}

// TestWrapKeepsConcurrentEdit: what the client wrote to its file while
// wrap derived and checked the policies (Claude Code rewrites
// ~/.claude.json whenever it starts) is kept: wrap edits the file as it is
// when it writes, wraps an entry only if it still starts the server that
// was checked, and says which ones changed.
func TestWrapKeepsConcurrentEdit(t *testing.T) {
	home := userHome(t, nil)
	path := filepath.Join(home, ".claude.json")
	before := `{"numStartups": 1, "mcpServers": {"a": {"command": "srv-a", "args": []}, "b": {"command": "srv-b", "args": ["x"]}}}` + "\n"
	require.NoError(t, os.WriteFile(path, []byte(before), 0o644))
	st, err := clients.DefaultStore()
	require.NoError(t, err)
	env, err := clients.HostEnv()
	require.NoError(t, err)
	var f clients.Found
	for _, fd := range clients.Discover(env) {
		if fd.Path == path {
			f = fd
		}
	}
	require.Len(t, f.Servers, 2)
	// Meanwhile the client starts, counts it and changes b's args.
	during := `{"numStartups": 2, "mcpServers": {"a": {"command": "srv-a", "args": []}, "b": {"command": "srv-b", "args": ["y"]}}, "userID": "u"}` + "\n"
	require.NoError(t, os.WriteFile(path, []byte(during), 0o644))

	var out, errb bytes.Buffer
	w := wrapper{s: stdio{nil, &out, &errb}, st: st, env: env, o: wrapOptions{config: "C-app"}}
	prefix := []string{"/bin/mcpguard", "run", "--"}
	changes, moved, err := w.write(f, map[string][]string{
		clients.KeyString(f.Servers[0].Key): prefix, clients.KeyString(f.Servers[1].Key): prefix})
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, moved, "b changed since it was checked")
	require.Len(t, changes, 1)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, `{"numStartups": 2, "mcpServers": {"a": {"command": "/bin/mcpguard", "args": ["run", "--", "srv-a"]}, "b": {"command": "srv-b", "args": ["y"]}}, "userID": "u"}`+"\n", string(got))

	// unwrap too edits the file as it is now.
	after := strings.Replace(string(got), `"numStartups": 2`, `"numStartups": 3`, 1)
	require.NoError(t, os.WriteFile(path, []byte(after), 0o644))
	code, _, stderr := runIn(t, nil, "unwrap")
	require.Equal(t, 0, code, stderr)
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, strings.Replace(during, `"numStartups": 2`, `"numStartups": 3`, 1), string(got))
}

// TestExpandServerEnvFile: VS Code's and Cursor's envFile is read as the
// client reads it, so that policy init and the guarded server get its
// variables (the guard passes a server only the variables its policy
// allows); the entry's own env wins; an envFile that cannot be read
// leaves the entry unwrapped, with why.
func TestExpandServerEnvFile(t *testing.T) {
	project := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(project, ".env"), []byte("# keys\nAPI_KEY=abc\nexport REGION=\"eu west\"\nLEVEL=debug\n"), 0o600))
	f := clients.File{Client: clients.VSCode, Scope: "project", Path: filepath.Join(project, ".vscode", "mcp.json"), Format: clients.JSON}
	e := clients.Env{Home: t.TempDir(), Project: project, GOOS: "linux"}
	srv := clients.Server{Command: "srv", Args: []string{"${workspaceFolder}"}, EnvFile: "${workspaceFolder}/.env", Env: map[string]string{"LEVEL": "info"}}
	argv, env, missing, err := expandServer(f, e, srv)
	require.NoError(t, err)
	assert.Empty(t, missing)
	assert.Equal(t, []string{"srv", project}, argv)
	assert.Equal(t, []string{"API_KEY=abc", "LEVEL=info", "REGION=eu west"}, env)

	srv.EnvFile = ".env.missing"
	_, _, _, err = expandServer(f, e, srv)
	assert.ErrorContains(t, err, "its envFile cannot be read")
}
