package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clientsHome is a user's home with configurations for Claude Code, Gemini
// CLI, Codex, Cursor and VS Code, each written in its client's documented
// format, all naming the same real servers.
type clientsHome struct {
	home, project string
	bin, clients  string // mcpguard; testdata/clients/node_modules/.bin
	env           []string
	files         map[string][]byte // path -> bytes before wrap
}

// e2eServers are the stdio servers every client's file lists: the memory
// server keeps its state in $HOME, the filesystem server is given a
// directory on its command line.
func e2eServers(e compatEnv, home string) (memory, files []string) {
	memory = []string{filepath.Join(e.nm, ".bin", "mcp-server-memory")}
	files = []string{e.node, filepath.Join(e.nm, "@modelcontextprotocol", "server-filesystem", "dist", "index.js"), filepath.Join(home, "notes")}
	return memory, files
}

func newClientsHome(t *testing.T) *clientsHome {
	e := newCompatEnv(t)
	clientsBin := filepath.Join(e.root, "testdata", "clients", "node_modules", ".bin")
	for _, c := range []string{"claude", "gemini", "codex"} {
		if _, err := os.Stat(filepath.Join(clientsBin, c)); err != nil {
			t.Skipf("the real clients are not installed (scripts/deps.sh installs testdata/clients): %v", err)
		}
	}
	h := &clientsHome{home: t.TempDir(), bin: e.bin, clients: clientsBin, files: map[string][]byte{}}
	h.project = filepath.Join(h.home, "project")
	require.NoError(t, os.MkdirAll(filepath.Join(h.home, "notes"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(h.home, "notes", "todo.txt"), []byte("wrap the clients\n"), 0o644))
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "XDG_CONFIG_HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "MCPGUARD_CONFIG_DIR":
			continue
		}
		h.env = append(h.env, kv)
	}
	// MCP_TIMEOUT: Claude Code's connect timeout (ms), for a loaded CI machine.
	h.env = append(h.env, "HOME="+h.home, "MCP_TIMEOUT=60000")
	mem, fs := e2eServers(e, h.home)
	memJSON, fsJSON := jsonArgv(mem), jsonArgv(fs)
	memState := filepath.Join(h.home, ".memory", "memory.jsonl")
	h.write(t, ".claude.json", fmt.Sprintf(`{
  "numStartups": 3,
  "mcpServers": {
    "memory": {
      "type": "stdio",
      "command": %s,
      "args": [],
      "env": {
        "MEMORY_FILE_PATH": %q
      }
    },
    "files": {
      "type": "stdio",
      "command": %s,
      "args": %s,
      "env": {}
    },
    "remote": {
      "type": "http",
      "url": "http://127.0.0.1:9/mcp"
    }
  }
}
`, memJSON[0], memState, fsJSON[0], jsonList(fsJSON[1:])))
	h.write(t, ".gemini/settings.json", fmt.Sprintf(`{
  "mcpServers": {
    "memory": {"command": %s, "env": {"MEMORY_FILE_PATH": %q}, "timeout": 60000},
    "files": {"command": %s, "args": %s, "timeout": 60000}
  }
}
`, memJSON[0], memState, fsJSON[0], jsonList(fsJSON[1:])))
	h.write(t, ".gemini/trustedFolders.json", fmt.Sprintf(`{%q: "TRUST_FOLDER"}`, h.project))
	h.write(t, ".codex/config.toml", fmt.Sprintf(`# Codex
[mcp_servers.memory]
command = %s
startup_timeout_sec = 60

[mcp_servers.memory.env]
MEMORY_FILE_PATH = %q

[mcp_servers.files]
command = %s # node
args = [
  %s,
]
startup_timeout_sec = 60
`, memJSON[0], memState, fsJSON[0], strings.Join(fsJSON[1:], ",\n  ")))
	h.write(t, ".cursor/mcp.json", fmt.Sprintf(`{
	"mcpServers": {
		"files": {"command": %s, "args": %s}
	}
}
`, fsJSON[0], jsonList(fsJSON[1:])))
	h.write(t, "project/.vscode/mcp.json", fmt.Sprintf(`// VS Code: JSON with comments
{
  "servers": {
    "memory": {
      "type": "stdio",
      "command": %s, // the npm server's shim
      "env": {"MEMORY_FILE_PATH": "${workspaceFolder}/memory.jsonl"},
    },
  },
}
`, memJSON[0]))
	return h
}

func jsonArgv(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		b, _ := json.Marshal(a)
		out[i] = string(b)
	}
	return out
}

func jsonList(quoted []string) string { return "[" + strings.Join(quoted, ", ") + "]" }

func (h *clientsHome) write(t *testing.T, rel string, content string) {
	t.Helper()
	p := filepath.Join(h.home, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

// snapshot records every client file's bytes (after the clients' own first
// runs, which add their state to ~/.claude.json).
func (h *clientsHome) snapshot(t *testing.T) {
	for _, rel := range []string{".claude.json", ".gemini/settings.json", ".codex/config.toml", ".cursor/mcp.json", "project/.vscode/mcp.json"} {
		b, err := os.ReadFile(filepath.Join(h.home, rel))
		require.NoError(t, err)
		h.files[filepath.Join(h.home, rel)] = b
	}
}

// run runs a program with the test home, in the project directory, and
// returns its stdout.
func (h *clientsHome) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, _ := h.output(t, name, args...)
	return out
}

// output is run, with stderr too (Gemini CLI prints its list there).
func (h *clientsHome) output(t *testing.T, name string, args ...string) (string, string) {
	t.Helper()
	// wrap starts every server twice (policy init, then through mcpguard
	// as the client will): 8 servers take 20 s here idle, minutes on a
	// machine loaded 25 times over.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env, cmd.Dir = h.env, h.project
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, os.MkdirAll(h.project, 0o755))
	out, err := cmd.Output()
	require.NoError(t, err, "%s %s:\n%s\n%s", name, strings.Join(args, " "), out, stderr.String())
	t.Logf("%s %s (%s)", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return string(out), stderr.String()
}

// codexStatus asks Codex's app server (the protocol its IDE extension
// speaks) for its MCP servers' status: it connects to each server and
// lists its tools, no login needed. `codex mcp list` only prints the
// configuration.
func (h *clientsHome) codexStatus(t *testing.T) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(h.clients, "codex"), "app-server")
	cmd.Env, cmd.Dir = h.env, h.project
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { in.Close(); cmd.Process.Kill(); cmd.Wait() }()
	fmt.Fprintln(in, `{"id":1,"method":"initialize","params":{"clientInfo":{"name":"mcpguard-test","version":"1"}}}`)
	fmt.Fprintln(in, `{"method":"initialized"}`)
	fmt.Fprintln(in, `{"id":2,"method":"mcpServerStatus/list","params":{}}`)
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m struct {
			ID     int `json:"id"`
			Result struct {
				Data []struct {
					Name       string          `json:"name"`
					ServerInfo json.RawMessage `json:"serverInfo"`
					Tools      map[string]any  `json:"tools"`
				} `json:"data"`
			} `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID != 2 {
			continue
		}
		got := map[string]int{}
		for _, d := range m.Result.Data {
			if len(d.ServerInfo) > 0 && string(d.ServerInfo) != "null" {
				got[d.Name] = len(d.Tools)
			}
		}
		return got
	}
	t.Fatalf("codex app-server: no answer to mcpServerStatus/list: %v", sc.Err())
	return nil
}

// connectedLines returns the servers a list command reported connected,
// with their line.
func connectedLines(out string, names ...string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		for _, n := range names {
			if strings.Contains(line, n+": ") && strings.Contains(line, "Connected") {
				got[n] = line
			}
		}
	}
	return got
}

// TestWrapRealClients: with configurations for Claude Code, Gemini CLI,
// Codex, Cursor and VS Code in a fresh home, `mcpguard wrap` puts every
// stdio server behind mcpguard (C-full-landlock), each real client's own
// list command then reports every one of them connected through mcpguard,
// and `mcpguard unwrap` restores every file byte for byte.
func TestWrapRealClients(t *testing.T) {
	h := newClientsHome(t)
	claude, gemini := filepath.Join(h.clients, "claude"), filepath.Join(h.clients, "gemini")
	// Unwrapped first: the clients reach the servers as they are, and
	// Claude Code writes its own state into ~/.claude.json once.
	assert.Len(t, connectedLines(h.run(t, claude, "mcp", "list"), "memory", "files"), 2)
	h.snapshot(t)

	out, stderr := h.output(t, h.bin, "wrap", "--mcpguard", h.bin)
	t.Logf("mcpguard wrap:\n%s%s", out, stderr)
	assert.Contains(t, out, "remote: not wrapped: a http server")
	// Cursor and VS Code have no list command here: wrap's own start
	// check runs their entries' wrapped command lines as they would.
	for _, line := range []string{"cursor files: 14 tools", "vscode memory: 9 tools", "codex files: 14 tools"} {
		assert.Contains(t, stderr, line+" through mcpguard (C-full-landlock)")
	}
	for p, before := range h.files {
		after, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.NotEqual(t, string(before), string(after), "%s was not wrapped", p)
	}
	listing := h.run(t, h.bin, "clients", "--json")
	var rows []clientRow
	require.NoError(t, json.Unmarshal([]byte(listing), &rows))
	for _, r := range rows {
		assert.Equal(t, r.Transport == "stdio", r.Guarded, "%s %s %s", r.Client, r.File, r.Server)
	}

	geminiOut, geminiErr := h.output(t, gemini, "mcp", "list")
	for name, line := range map[string]string{"claude": h.run(t, claude, "mcp", "list"), "gemini": geminiOut + geminiErr} {
		got := connectedLines(line, "memory", "files")
		assert.Len(t, got, 2, "%s mcp list:\n%s", name, line)
		for srv, l := range got {
			assert.Contains(t, l, h.bin+" run --config C-full-landlock", "%s: %s is not behind mcpguard", name, srv)
		}
	}
	var codexList []struct {
		Name      string `json:"name"`
		Transport struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"transport"`
	}
	require.NoError(t, json.Unmarshal([]byte(h.run(t, filepath.Join(h.clients, "codex"), "mcp", "list", "--json")), &codexList), "codex mcp list --json")
	require.Len(t, codexList, 2)
	for _, c := range codexList {
		assert.Equal(t, h.bin, c.Transport.Command, "codex: %s", c.Name)
	}
	status := h.codexStatus(t)
	assert.Equal(t, 9, status["memory"], "codex: memory's tools through mcpguard")
	assert.Positive(t, status["files"], "codex: files connected through mcpguard")

	out = h.run(t, h.bin, "unwrap")
	t.Logf("mcpguard unwrap:\n%s", out)
	for p, before := range h.files {
		after, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, string(before), string(after), "%s not restored byte for byte", p)
	}
}
