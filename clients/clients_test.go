package clients

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tailscale/hujson"

	"github.com/mcpguard/mcpguard/guard/launch"
	"github.com/mcpguard/mcpguard/internal/testenv"
)

// goldenFiles are the fixtures, one per client format, each written as
// that client documents it.
var goldenFiles = []File{
	{ClaudeDesktop, "user", "claude-desktop.json", JSON, mcpServers},
	{ClaudeCode, "user", "claude-code.json", JSON, [][]string{{"mcpServers"}, {"projects", "*", "mcpServers"}}},
	{ClaudeCode, "project", "claude-code-project.mcp.json", JSON, mcpServers},
	{Cursor, "user", "cursor.json", JSON, mcpServers},
	{VSCode, "project", "vscode-mcp.jsonc", JSON, vsServers},
	{VSCode, "user", "vscode-settings.jsonc", JSON, [][]string{{"mcp", "servers"}}},
	{Windsurf, "user", "windsurf.json", JSON, mcpServers},
	{Gemini, "user", "gemini-settings.json", JSON, mcpServers},
	{Codex, "user", "codex.toml", TOML, [][]string{{"mcp_servers"}}},
}

func testPrefix(f File, s Server) []string {
	return []string{"/opt/mcpguard/bin/mcpguard", "run", "--config", "C-full-landlock",
		"--policy", "/home/alice/.config/mcpguard/policies/" + f.Client + "/" + s.Name + ".json", "--"}
}

// wrapAll wraps every server of data that can be.
func wrapAll(t *testing.T, f File, data []byte) ([]byte, []Change) {
	t.Helper()
	servers, err := Parse(f, data)
	require.NoError(t, err)
	wraps := map[string][]string{}
	for _, s := range servers {
		if s.Problem == "" {
			wraps[KeyString(s.Key)] = testPrefix(f, s)
		}
	}
	out, changes, err := Wrap(f, data, wraps)
	require.NoError(t, err)
	return out, changes
}

func listing(servers []Server) string {
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s", strings.Join(s.Key, "."), s.Scope, s.Transport, s.Name)
		if s.Transport == Stdio {
			fmt.Fprintf(&b, "\targv=%q", s.Argv())
		} else {
			fmt.Fprintf(&b, "\turl=%s", s.URL)
		}
		if len(s.Env) > 0 {
			keys := make([]string, 0, len(s.Env))
			for k := range s.Env {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			fmt.Fprintf(&b, "\tenv=%s", strings.Join(keys, ","))
		}
		if s.EnvFile != "" {
			fmt.Fprintf(&b, "\tenvFile=%s", s.EnvFile)
		}
		if s.Cwd != "" {
			fmt.Fprintf(&b, "\tcwd=%s", s.Cwd)
		}
		if s.Guarded {
			fmt.Fprintf(&b, "\tguarded inner=%q", s.Inner)
		}
		if s.Problem != "" {
			fmt.Fprintf(&b, "\tnot wrappable: %s", s.Problem)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if testenv.Update() {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to create it")
	assert.Equal(t, string(want), string(got), "%s differs (review, then -update)", path)
}

// TestGoldenRoundTrip: for every client format, the servers listed, the
// wrapped file (golden), wrapping twice changes nothing, the wrapped file
// reads back as the client would read it (mcpguard's command, then the
// server's own), and unwrap restores the original byte for byte.
func TestGoldenRoundTrip(t *testing.T) {
	for _, f := range goldenFiles {
		t.Run(f.Path, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", f.Path))
			require.NoError(t, err)
			before, err := Parse(f, in)
			require.NoError(t, err)
			golden(t, filepath.Join("testdata", "golden", f.Path+".servers"), []byte(listing(before)))

			wrapped, changes := wrapAll(t, f, in)
			golden(t, filepath.Join("testdata", "golden", f.Path+".wrapped"), wrapped)
			require.NotEmpty(t, changes, "the fixture has stdio servers")
			assertParses(t, f, in, wrapped)

			again, more := wrapAll(t, f, wrapped)
			assert.Equal(t, string(wrapped), string(again), "wrapping twice changed the file")
			assert.Empty(t, more)

			after, err := Parse(f, wrapped)
			require.NoError(t, err)
			for i, s := range after {
				b := before[i]
				require.Equal(t, b.Key, s.Key)
				if b.Problem != "" {
					assert.Equal(t, b.Argv(), s.Argv(), "%s is not wrappable and must not change", s.Name)
					continue
				}
				assert.True(t, s.Guarded, s.Name)
				assert.Equal(t, append(testPrefix(f, b), b.Argv()...), s.Argv(), s.Name)
				assert.Equal(t, b.Argv(), s.Inner, s.Name)
				assert.Equal(t, b.Env, s.Env, s.Name)
				assert.Equal(t, b.Cwd, s.Cwd, s.Name)
			}

			restored, done, err := Unwrap(f, wrapped, changes)
			require.NoError(t, err)
			assert.Equal(t, string(in), string(restored), "unwrap did not restore the file byte for byte")
			assert.Len(t, done, len(changes))
			for _, r := range done {
				assert.True(t, r.Exact, "%v", r.Key)
			}
		})
	}
}

// assertParses checks that the wrapped file is still what its client
// accepts: strict JSON stays strict, TOML stays TOML.
func assertParses(t *testing.T, f File, in, out []byte) {
	t.Helper()
	switch f.Format {
	case TOML:
		var m map[string]any
		require.NoError(t, toml.Unmarshal(out, &m))
	default:
		if json.Valid(in) {
			assert.True(t, json.Valid(out), "strict JSON in, strict JSON out:\n%s", out)
		}
		_, err := hujson.Parse(out)
		require.NoError(t, err)
	}
}

// TestUnwrapByValue: an entry changed after wrap (an env added by hand) is
// still unwrapped: its command and args by value, the change kept.
func TestUnwrapByValue(t *testing.T) {
	for _, f := range goldenFiles {
		t.Run(f.Path, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", f.Path))
			require.NoError(t, err)
			wrapped, changes := wrapAll(t, f, in)
			// Change the wrapped command's policy argument: the region
			// no longer matches what wrap wrote.
			edited := bytes.Replace(wrapped, []byte("/policies/"), []byte("/policies/moved/"), 1)
			require.NotEqual(t, wrapped, edited)
			restored, done, err := Unwrap(f, edited, changes)
			require.NoError(t, err)
			inexact := 0
			for _, r := range done {
				if !r.Exact {
					inexact++
				}
			}
			assert.Equal(t, 1, inexact)
			want, err := Parse(f, in)
			require.NoError(t, err)
			got, err := Parse(f, restored)
			require.NoError(t, err)
			require.Len(t, got, len(want))
			for i := range got {
				assert.Equal(t, want[i].Argv(), got[i].Argv(), got[i].Name)
				assert.False(t, got[i].Guarded)
			}
		})
	}
}

// TestWrapRefusesProblems: asking for an entry that cannot be wrapped is
// an error, not a silent skip.
func TestWrapRefusesProblems(t *testing.T) {
	f := goldenFiles[1]
	in, err := os.ReadFile(filepath.Join("testdata", f.Path))
	require.NoError(t, err)
	_, _, err = Wrap(f, in, map[string][]string{KeyString([]string{"mcpServers", "sentry"}): {"mcpguard", "run", "--"}})
	assert.ErrorIs(t, err, ErrNotWrappable)
}

func TestFilesPerPlatform(t *testing.T) {
	env := func(goos string, vars map[string]string) Env {
		return Env{Home: "/h", Project: "/p", GOOS: goos, Getenv: func(k string) string { return vars[k] }}
	}
	paths := func(e Env) []string {
		var out []string
		for _, f := range Files(e) {
			out = append(out, f.Client+" "+f.Path)
		}
		return out
	}
	assert.Contains(t, paths(env("linux", nil)), "claude-desktop /h/.config/Claude/claude_desktop_config.json")
	assert.Contains(t, paths(env("linux", map[string]string{"XDG_CONFIG_HOME": "/x"})), "claude-desktop /x/Claude/claude_desktop_config.json")
	assert.Contains(t, paths(env("darwin", nil)), "claude-desktop /h/Library/Application Support/Claude/claude_desktop_config.json")
	assert.Contains(t, paths(env("windows", map[string]string{"APPDATA": "/appdata"})), "claude-desktop "+filepath.Join("/appdata", "Claude", "claude_desktop_config.json"))
	assert.Contains(t, paths(env("linux", map[string]string{"CODEX_HOME": "/c"})), "codex /c/config.toml")
	assert.Contains(t, paths(env("linux", map[string]string{"CLAUDE_CONFIG_DIR": "/cc"})), "claude-code /cc/.claude.json")
	assert.Contains(t, paths(env("linux", nil)), "vscode /p/.vscode/mcp.json")
	assert.Contains(t, paths(env("linux", nil)), "gemini /p/.gemini/settings.json")
}

// TestReplace: a file is replaced only while it still holds the bytes the
// edit was made from, keeping its mode.
func TestReplace(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mcp.json")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o640))
	assert.ErrorIs(t, Replace(p, []byte("stale"), []byte("new")), ErrChanged)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "old", string(b), "not written over a change")
	require.NoError(t, Replace(p, []byte("old"), []byte("new")))
	b, err = os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "new", string(b))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
	left, err := filepath.Glob(filepath.Join(filepath.Dir(p), ".mcp.json.mcpguard-*"))
	require.NoError(t, err)
	assert.Empty(t, left, "no temporary file left")
}

// TestReplaceKeepsOwner: root editing a user's file leaves it the user's,
// so that their client can still write it.
func TestReplaceKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can give a file to another user")
	}
	p := filepath.Join(t.TempDir(), "settings.json")
	require.NoError(t, os.WriteFile(p, []byte("{}"), 0o600))
	require.NoError(t, os.Chown(p, 65534, 65534))
	require.NoError(t, WriteFile(p, []byte(`{"a": 1}`), 0o600))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	uid, gid := owner(fi)
	assert.Equal(t, [2]int{65534, 65534}, [2]int{uid, gid})
}

// TestProjectConfigsProtected: every project-scope file a client reads as
// MCP servers is a protected name for a guarded server (launch.IsProtected):
// a server with a write grant on the project cannot plant the next
// session's unguarded servers there (red team F3: .gemini and .codex were
// not).
func TestProjectConfigsProtected(t *testing.T) {
	p := t.TempDir()
	n := 0
	for _, f := range Files(Env{Home: t.TempDir(), Project: p}) {
		if f.Scope != "project" {
			continue
		}
		n++
		rel, err := filepath.Rel(p, f.Path)
		require.NoError(t, err)
		assert.True(t, launch.IsProtected(rel), "%s (%s) is not a protected name", rel, f.Client)
	}
	assert.NotZero(t, n, "project-scope files listed")
}
