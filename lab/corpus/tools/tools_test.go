package tools

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/mcpguard/mcpguard/internal/testenv"
	_ "modernc.org/sqlite"
)

// call runs tool name of set in-process and returns its text and isError.
func call(t *testing.T, set Set, name string, args map[string]any) (string, bool) {
	t.Helper()
	h := set.Handler(name)
	require.NotNil(t, h, "no tool %s", name)
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := h(context.Background(), req)
	require.NoError(t, err)
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n"), res.IsError
}

// sandbox returns a workspace and, beside it, a secret outside it.
func sandbox(t *testing.T) (ws, secret string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	ws = filepath.Join(root, "ws")
	require.NoError(t, os.MkdirAll(ws, 0o755))
	secret = filepath.Join(root, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("top secret"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello\n"), 0o644))
	return ws, secret
}

func TestStrictConfinement(t *testing.T) {
	ws, secret := sandbox(t)
	require.NoError(t, os.Symlink(secret, filepath.Join(ws, "link")))
	require.NoError(t, os.Symlink(filepath.Join(ws, "a.txt"), filepath.Join(ws, "inner")))
	f, err := NewFS([]string{ws})
	require.NoError(t, err)

	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"a.txt", true},
		{filepath.Join(ws, "a.txt"), true},
		{"inner", true},                               // symlink staying inside
		{filepath.Join(ws, "new/dir/file.txt"), true}, // does not exist yet
		{filepath.Join(ws, "../secret"), false},
		{ws + "/../../../../../../../../../.." + secret, false},
		{secret, false},
		{"link", false}, // symlink pointing outside
		{filepath.Join(ws, "link/x"), false},
		{"", false},
	} {
		_, err := f.Resolve(tc.path)
		if tc.ok {
			assert.NoError(t, err, tc.path)
		} else {
			assert.Error(t, err, tc.path)
		}
	}
	out, isErr := call(t, f.Tools(), "read_file", map[string]any{"path": "link"})
	assert.True(t, isErr)
	assert.NotContains(t, out, "top secret")
}

// The naive confinement's flaw is documented behaviour that the
// argument-visible cases rely on: keep it.
func TestNaiveConfinement(t *testing.T) {
	ws, secret := sandbox(t)
	f, err := NewNaiveFS([]string{ws})
	require.NoError(t, err)
	out, isErr := call(t, f.Tools(), "read_file", map[string]any{"path": ws + "/../secret"})
	assert.False(t, isErr, out)
	assert.Equal(t, "top secret", out)
	_, err = f.Resolve(secret)
	assert.ErrorIs(t, err, ErrOutsideRoots)
}

func TestFilesystemTools(t *testing.T) {
	ws, _ := sandbox(t)
	f, err := NewFS([]string{ws})
	require.NoError(t, err)
	set := f.Tools()
	_, isErr := call(t, set, "create_directory", map[string]any{"path": "d/e"})
	require.False(t, isErr)
	_, isErr = call(t, set, "write_file", map[string]any{"path": "d/e/x.go", "content": "1\n2\n3\n"})
	require.False(t, isErr)
	out, _ := call(t, set, "read_text_file", map[string]any{"path": "d/e/x.go", "tail": 2})
	assert.Equal(t, "2\n3", out)
	out, _ = call(t, set, "search_files", map[string]any{"path": ws, "pattern": "*.go"})
	assert.Equal(t, filepath.Join(ws, "d/e/x.go"), out)
	out, _ = call(t, set, "list_directory", map[string]any{"path": "d"})
	assert.Equal(t, "[DIR] e\n", out)
	_, isErr = call(t, set, "move_file", map[string]any{"source": "a.txt", "destination": "d/e/x.go"})
	assert.True(t, isErr, "move onto an existing file must fail")
	_, isErr = call(t, set, "write_file", map[string]any{"path": "x.txt"})
	assert.True(t, isErr, "missing content")
}

func TestFixtureNotes(t *testing.T) {
	notes, err := FixtureNotes()
	require.NoError(t, err)
	assert.Greater(t, len(notes), 170)
	seen := map[string]bool{}
	for _, n := range notes {
		assert.False(t, seen[n.ID], "duplicate id %s", n.ID)
		seen[n.ID] = true
		assert.NotEmpty(t, n.Tags, n.ID)
	}
}

func TestNotesTools(t *testing.T) {
	ws, _ := sandbox(t)
	n, err := NewNotes(ws)
	require.NoError(t, err)
	set := n.Tools()
	out, isErr := call(t, set, "add_note", map[string]any{"title": "Standup", "body": "at 10:30", "tags": []any{"zzz"}})
	require.False(t, isErr, out)
	out, _ = call(t, set, "list_notes", map[string]any{"tag": "zzz"})
	assert.Equal(t, "w001: Standup [zzz]\n(1 notes)\n", out)
	out, _ = call(t, set, "get_note", map[string]any{"id": "w001"})
	var got Note
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, "at 10:30", got.Body)
	_, isErr = call(t, set, "get_note", map[string]any{"id": "nope"})
	assert.True(t, isErr)

	// A malformed note in the workspace is an error naming it, not a silent skip.
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes", "bad.json"), []byte("{"), 0o644))
	out, isErr = call(t, set, "list_notes", nil)
	assert.True(t, isErr)
	assert.Contains(t, out, "bad.json")
}

func TestShellAllowList(t *testing.T) {
	ws, _ := sandbox(t)
	s, err := NewShell(ws)
	require.NoError(t, err)
	out, isErr := call(t, s.Tools(), "run_command", map[string]any{"command": "wc", "args": []any{"-c", "a.txt"}})
	assert.False(t, isErr, out)
	assert.Contains(t, out, "6 a.txt")
	for _, bad := range []string{"sh", "bash", "/bin/cat", "python3"} {
		out, isErr = call(t, s.Tools(), "run_command", map[string]any{"command": bad})
		assert.True(t, isErr, bad)
		assert.Contains(t, out, "not allowed", bad)
	}
	out, isErr = call(t, s.Tools(), "run_command", map[string]any{"command": "ls", "args": []any{"missing"}})
	assert.True(t, isErr, "non-zero exit is an error result")
	assert.Contains(t, out, "[exit status 2]")
}

func TestEnvAllowList(t *testing.T) {
	t.Setenv("API_TOKEN", "s3cret")
	t.Setenv("LANG", "C.UTF-8")
	set := NewEnv(DefaultEnvAllow).Tools()
	out, _ := call(t, set, "list_env", nil)
	assert.Contains(t, out, "LANG=C.UTF-8")
	assert.NotContains(t, out, "s3cret")
	out, isErr := call(t, set, "get_env", map[string]any{"name": "API_TOKEN"})
	assert.True(t, isErr)
	assert.NotContains(t, out, "s3cret")
}

func TestSQLite(t *testing.T) {
	ws, _ := sandbox(t)
	set := NewSQLite(filepath.Join(ws, "data.db")).Tools()
	_, isErr := call(t, set, "create_table", map[string]any{"query": "CREATE TABLE t (a TEXT)"})
	require.False(t, isErr)
	out, _ := call(t, set, "write_query", map[string]any{"query": "INSERT INTO t VALUES ('x'), ('y')"})
	assert.Equal(t, "affected rows: 2", out)
	out, _ = call(t, set, "read_query", map[string]any{"query": "SELECT a FROM t ORDER BY a"})
	assert.JSONEq(t, `[{"a":"x"},{"a":"y"}]`, out)
	_, isErr = call(t, set, "read_query", map[string]any{"query": "DELETE FROM t"})
	assert.True(t, isErr)
	_, isErr = call(t, set, "write_query", map[string]any{"query": "select * from t"})
	assert.True(t, isErr)
	_, isErr = call(t, set, "create_table", map[string]any{"query": "DROP TABLE t"})
	assert.True(t, isErr)
	out, _ = call(t, set, "describe_table", map[string]any{"table_name": "t"})
	assert.Contains(t, out, `"name":"a"`)
}

func TestWeather(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/weather" || r.URL.Query().Get("city") == "" {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		json.NewEncoder(w).Encode(Report{City: r.URL.Query().Get("city"), TempC: -2, Conditions: "snow"})
	}))
	defer api.Close()
	w, err := NewWeather(api.URL)
	require.NoError(t, err)
	out, _ := call(t, w.Tools(), "get_alerts", map[string]any{"city": "Oslo"})
	assert.Equal(t, "Advisories for Oslo: snow advisory; frost warning", out)
	out, _ = call(t, w.Tools(), "get_forecast", map[string]any{"city": "Oslo", "days": 2})
	assert.Equal(t, "Forecast for Oslo:\nday 1: snow, -2°C\nday 2: snow, -1°C\n", out)
	out, isErr := call(t, w.Tools(), "get_current_weather", map[string]any{"city": ""})
	assert.True(t, isErr, out)
	_, err = NewWeather("")
	assert.ErrorIs(t, err, ErrNoWeatherURL)
}

func TestGitFixture(t *testing.T) {
	ws, _ := sandbox(t)
	t.Setenv("HOME", t.TempDir())
	g, err := NewGit(ws)
	if err != nil {
		t.Skipf("no git here: %v", err)
	}
	require.NoError(t, g.InitFixture(context.Background()))
	require.NoError(t, g.InitFixture(context.Background()), "idempotent")
	out, _ := call(t, g.Tools(), "git_log", nil)
	assert.Contains(t, out, "Greet the world")
	assert.Contains(t, out, "Initial commit")
	out, _ = call(t, g.Tools(), "git_diff_unstaged", nil)
	assert.Contains(t, out, "+Work in progress")
	_, isErr := call(t, g.Tools(), "git_show", map[string]any{"revision": "no-such-rev"})
	assert.True(t, isErr)
}

func TestParse(t *testing.T) {
	t.Setenv("MCP_SINK_TCP", "127.0.0.1:9")
	cfg, err := Parse("x", []string{"--ws", "a", "--sink-udp", "127.0.0.1:53", "b"}, os.Stderr, nil)
	require.NoError(t, err)
	require.Len(t, cfg.Roots, 2)
	assert.True(t, filepath.IsAbs(cfg.WS()))
	assert.Equal(t, "127.0.0.1:9", cfg.SinkTCP, "env fallback")
	assert.Equal(t, "127.0.0.1:53", cfg.SinkUDP)
	assert.Equal(t, 10*time.Second, cfg.Scale(10*time.Second), "no --timeout-scale: as written")
	cfg, err = Parse("x", []string{"--ws", "a", "--timeout-scale", "2.5"}, os.Stderr, nil)
	require.NoError(t, err)
	assert.Equal(t, 25*time.Second, cfg.Scale(10*time.Second))
	_, err = Parse("x", []string{"--nope"}, &strings.Builder{}, nil)
	assert.Error(t, err)
}
