package launch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGitRules: the git model fits the look-up both backends do, and
// GitRules refuses lists that do not.
func TestGitRules(t *testing.T) {
	rules, err := GitRules()
	require.NoError(t, err)
	assert.Len(t, rules, len(GitData))
	for _, bad := range [][]GitEntry{
		{{"a/b", GitDataEntry}},                      // parent not listed
		{{"a", GitDataEntry}, {"a/b", GitDataEntry}}, // parent not fixed
		{{"a", GitFixedOpen}, {"a/b", GitFixedOpen}, {"a/b/c", GitFixedOpen}, {"a/b/c/d", GitDataEntry}}, // too deep
		{{"a", GitFixedOpen}, {"a/x.", GitFamily}},                                                       // family below the first level
		{{"x", GitFamily}},                         // family without its dot
		{{"a", GitDataEntry}, {"a", GitFixedOpen}}, // twice
		{{"a", GitFixedOpen}, {"b", GitFixedOpen}, {"a/c", GitFixedClosed}, {"b/c", GitFixedClosed}}, // ambiguous third level
		{{"0123456789012345678901234567890123", GitDataEntry}},                                       // too long
	} {
		saved := GitData
		GitData = bad
		_, err := GitRules()
		GitData = saved
		assert.Error(t, err, "%v", bad)
	}
}

// TestIsProtected: the name model on a table of paths relative to a write
// root. Inside a .git only git's own data is writable; everything else
// there (known redirections and code, and names nobody listed) is not.
func TestIsProtected(t *testing.T) {
	protected := []string{
		// protected names and trees anywhere
		".git", "sub/.git", ".gitmodules", ".envrc", "a/b/.bashrc", ".mcp.json", ".vscode",
		".vscode/tasks.json", "x/.claude/settings.json", ".ssh/config", "commondir", "gitdir",
		// a bare repository's HEAD
		"HEAD", "bare/HEAD",
		// git's configuration, code and redirections
		".git/config", ".git/config.worktree", ".git/hooks", ".git/hooks/pre-commit",
		".git/hooks/pre-commit.sample", ".git/commondir", ".git/gitdir", ".git/info",
		".git/info/attributes", ".git/info/exclude", ".git/info/grafts", ".git/info/sparse-checkout",
		".git/objects/info/alternates", ".git/objects/info/http-alternates", ".git/objects/info/x",
		".git/worktrees/w/config.worktree", ".git/worktrees/w/commondir", ".git/worktrees/w/HEAD",
		".git/modules/sub/config", ".git/modules/sub/hooks/post-checkout", ".git/modules/sub/HEAD",
		".git/rebase-merge/git-rebase-todo", ".git/rebase-apply/patch", ".git/sequencer/todo",
		".git/description", ".git/branches/origin", ".git/remotes/origin", ".git/lost-found/x",
		// names nobody listed: refused by construction
		".git/fsmonitor", ".git/something-new", ".git/index2", ".git/HEAD2/config",
		// the fixed directories themselves (a directory renamed into place
		// would bring objects/info/alternates along)
		".git/objects", ".git/objects/info",
		// the nearest .git decides, at any depth
		"proj/.git/config", "a/b/c/.git/hooks/x", ".git/refs/.git/config",
		// a family's name must match up to its last dot
		".git/index.stashx", ".git/xindex.stash.1", ".git/index.stash.1234567890123456789",
		// names of 31 bytes or more are no lock files to the kernel
		".git/hooks/pre-commit-0123456789012345.lock",
	}
	data := []string{
		"notes.txt", "src/main.go", ".gitignore", "docs/.gitattributes", "config", "hooks/x",
		"info/attributes", ".envrc.example", "bare/HEADER",
		// what git writes in commit, fetch, merge, stash, gc
		".git/HEAD", ".git/index", ".git/index.lock", ".git/ORIG_HEAD", ".git/FETCH_HEAD",
		".git/COMMIT_EDITMSG", ".git/MERGE_HEAD", ".git/MERGE_MSG", ".git/packed-refs", ".git/shallow",
		".git/gc.pid", ".git/refs/heads/main", ".git/refs/heads/feature/x", ".git/refs/heads/main.lock",
		".git/logs/HEAD", ".git/logs/refs/remotes/origin/main", ".git/objects/ab/cdef0123",
		".git/objects/pack/pack-1.pack", ".git/objects/pack/tmp_pack_x", ".git/objects/incoming-x/pack/y",
		".git/objects/info/packs", ".git/objects/info/commit-graph", ".git/objects/info/commit-graphs/graph-1.graph",
		".git/objects/info/commit-graphs", ".git/objects/info/commit-graph.lock", ".git/rr-cache/ab/preimage",
		".git/index.stash.1234", ".git/index.stash.1234.lock", ".git/reftable/tables.list",
		// lock files anywhere below a .git
		".git/config.lock", ".git/hooks/pre-commit.lock", ".git/objects/info/alternates.lock",
		// refs and logs may hold names git reads elsewhere as configuration
		".git/refs/heads/config", ".git/refs/heads/hooks/pre-commit", ".git/logs/refs/heads/info",
		"proj/.git/objects/ab/cd", "a/.git/refs/tags/v1",
	}
	for _, p := range protected {
		assert.True(t, IsProtected(p), "protected: %s", p)
	}
	for _, p := range data {
		assert.False(t, IsProtected(p), "not protected: %s", p)
	}
}
