package policy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// protectedPolicy writes in the workspace; one tool has the editor's
// settings directory as a root of its own, one waives the rule.
const protectedPolicy = `{
  "server": "w", "workdir": "${WS}",
  "tools": {
    "write_file": {"args": {"path": {"kind": "path", "access": "write"}}},
    "read_file": {"args": {"path": {"kind": "path", "access": "read"}}},
    "note": {"schema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    "settings": {"args": {"path": {"kind": "path", "access": "write"}}, "write": ["${WS}/.vscode"]},
    "hooks": {"args": {"path": {"kind": "path", "access": "write"}}, "waive": ["path.protected"]}
  },
  "filesystem": {"read": ["${WS}"], "write": ["${WS}"]}
}`

// TestProtectedWrites: a write inside a write root to a name the launcher
// protects (launch.IsProtected, the one list both L3 backends use) is
// refused by L2 too, through symlinks and in any slot judged for write;
// inside a .git only git's own data (objects, refs, index, HEAD, lock
// files) is writable, so redirections nobody listed (commondir, info,
// objects/info/alternates) and even git's inert hook samples are refused;
// reads of them and look-alike names pass; a root that names the entry
// itself admits it, and the rule can be waived.
func TestProtectedWrites(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, os.MkdirAll(filepath.Join(f.ws, ".git", "hooks"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, ".git", "config"), []byte("[core]\n"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(f.ws, ".git", "hooks", "post-checkout"), filepath.Join(f.ws, "innocent")))
	e := f.engine(t, protectedPolicy, true)
	var calls []engineCall
	for _, p := range []string{".git/hooks/pre-commit", ".git/config", ".envrc", "sub/.envrc", ".bashrc",
		".profile", ".vscode/tasks.json", "innocent", f.ws + "/.git/hooks", "./.git/../.envrc",
		".git/commondir", ".git/info/attributes", ".git/objects/info/alternates", ".git/modules/sub/config",
		".git/hooks/pre-commit.sample", ".git/something-new"} {
		calls = append(calls, engineCall{"write_file", map[string]any{"path": p}, RulePathProtected, "L2"})
	}
	for _, p := range []string{"notes.txt", ".envrc.example", "docs/.gitignore", "envrc",
		".git/index", ".git/refs/heads/main", ".git/objects/ab/cdef", ".git/index.lock", ".git/COMMIT_EDITMSG"} {
		calls = append(calls, engineCall{"write_file", map[string]any{"path": p}, "", ""})
	}
	calls = append(calls,
		engineCall{"read_file", map[string]any{"path": ".git/config"}, "", ""},
		engineCall{"note", map[string]any{"text": f.ws + "/.git/hooks/pre-commit"}, RulePathProtected, "L2"}, // by value, write: the tool is not read-only
		engineCall{"settings", map[string]any{"path": ".vscode/tasks.json"}, "", ""},
		engineCall{"settings", map[string]any{"path": ".envrc"}, RulePathProtected, "L2"},
		engineCall{"hooks", map[string]any{"path": ".git/hooks/pre-commit"}, "", ""},
	)
	checkCalls(t, e, calls)
	checkCalls(t, f.engine(t, protectedPolicy, false), []engineCall{
		{"write_file", map[string]any{"path": ".envrc"}, "", ""}, // L1 alone: the policy grants the root
	})
}
