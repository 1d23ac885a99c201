package validate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGitSubcommandOptions: after a git subcommand, the options its table
// does not list are refused, short, long, clustered or abbreviated (so
// rebase -x is refused like --exec, not by its name); what reading,
// diffing and committing need passes; values that name files are files.
func TestGitSubcommandOptions(t *testing.T) {
	refused := [][]string{
		{"rebase", "-x", "touch /tmp/m", "HEAD~1"},
		{"rebase", "--exec", "touch /tmp/m", "HEAD~1"},
		{"rebase", "--exec=touch /tmp/m", "HEAD~1"},
		{"rebase", "--exe", "touch /tmp/m"},
		{"rebase", "-ix", "touch /tmp/m"},
		{"rebase", "-qx", "touch /tmp/m"},
		{"rebase", "-i", "HEAD~2"},
		{"rebase", "-s", "evil", "main"},
		{"merge", "--strategy=evil", "main"},
		{"pull", "-s", "evil"},
		{"log", "--output=/tmp/x"},
		{"log", "--ou=/tmp/x"},
		{"log", "-p", "--ext-diff"},
		{"log", "--show-signature"},
		{"show", "--textconv", "HEAD:a"},
		{"diff", "--frobnicate"},
		{"grep", "-O", "x"},
		{"grep", "-nO", "x"},
		{"commit", "-S", "-m", "x"},
		{"commit", "--template=/tmp/t"},
		{"commit", "-e"},
		{"tag", "-s", "v1"},
		{"clone", "-u", "sh -c id", "a", "b"},
		{"clone", "--config", "core.sshCommand=x", "a"},
		{"fetch", "--upload-pack=x", "origin"},
		{"push", "--receive-pack=x", "origin"},
		{"push", "--exec=x", "origin"},
		{"init", "--template=/tmp/t"},
		{"cherry-pick", "-e", "abc"},
		{"add", "-p"},
		{"difftool", "-x", "touch /tmp/m"},
		{"bisect", "run", "touch", "/tmp/m"},
		{"submodule", "foreach", "touch /tmp/m"},
		{"filter-branch", "--tree-filter", "touch /tmp/m"},
		{"archive", "--remote=/tmp/x", "HEAD"},
		{"fetch", "ext::sh -c touch% /tmp/m"},
		{"clone", "fd::3", "x"},
	}
	for _, args := range refused {
		_, err := ArgvWords("git", args)
		assert.ErrorIs(t, err, ErrOption, "git %q", args)
	}
	passed := [][]string{
		{"log", "--oneline", "-n", "5"},
		{"log", "-5", "--stat", "--no-merges"},
		{"log", "-p", "-3", "--format=%H %s", "--", "a.go"},
		{"log", "--graph", "--decorate", "--all", "--date=short", "--author=me"},
		{"--no-pager", "show", "--no-patch", "--format=%s", "HEAD"},
		{"show", "--stat", "HEAD~1"},
		{"diff", "--stat", "HEAD~1", "HEAD"},
		{"diff", "-U3", "--color=never", "--no-ext-diff", "-w"},
		{"diff", "--no-index", "--stat", "a.txt", "b.txt"},
		{"diff", "--cached", "--name-only"},
		{"status", "-sb"},
		{"status", "--porcelain=v1", "--untracked-files=no"},
		{"commit", "-am", "a message"},
		{"commit", "--allow-empty", "-q", "-m", "one", "--no-verify", "--no-gpg-sign"},
		{"add", "-A"},
		{"add", "--", "docs/a.txt"},
		{"branch", "-vv"},
		{"branch", "--show-current"},
		{"cherry-pick", "-x", "abc123"},
		{"grep", "-n", "-i", "-e", "alpha", "--", "docs"},
		{"grep", "--no-index", "-n", "alpha"},
		{"rebase", "--onto", "main", "topic"},
		{"rebase", "--continue"},
		{"blame", "-L", "1,5", "a.go"},
		{"rev-parse", "--abbrev-ref", "HEAD"},
		{"rev-parse", "--show-toplevel"},
		{"stash", "list"},
		{"stash", "push", "-m", "wip"},
		{"checkout", "-b", "topic"},
		{"switch", "-c", "topic"},
		{"restore", "--staged", "a.txt"},
		{"reset", "--hard", "HEAD~1"},
		{"tag", "-a", "v1", "-m", "release"},
		{"fetch", "--prune", "origin"},
		{"clone", "--depth=1", "https://example.com/r.git", "r"},
		{"ls-files", "-z", "--others", "--exclude-standard"},
		{"cat-file", "-p", "HEAD:a.go"},
	}
	for _, args := range passed {
		_, err := ArgvWords("git", args)
		assert.NoError(t, err, "git %q", args)
	}
	got, err := ArgvWords("git", []string{"commit", "-F", "/etc/x", "-m", "msg"})
	require.NoError(t, err)
	assert.Contains(t, got, Word{"/etc/x", RoleFile})
	assert.NotContains(t, got, Word{"msg", RoleFile})
	got, err = ArgvWords("git", []string{"blame", "--contents=/etc/x", "a.go"})
	require.NoError(t, err)
	assert.Contains(t, got, Word{"/etc/x", RoleFile})
	got, err = ArgvWords("git", []string{"diff", "-O/etc/order"})
	require.NoError(t, err)
	assert.Contains(t, got, Word{"/etc/order", RoleFile})
}

// TestGitTablesParse: every subcommand's table reads, and refuses what
// it lists with a reason.
func TestGitTablesParse(t *testing.T) {
	for name := range gitTables {
		sp := gitSubcommands[name]
		require.NotNil(t, sp, name)
		assert.NotEmpty(t, sp.long, name)
	}
	assert.Equal(t, "runs a program", gitSubcommands["rebase"].short['x'].deny)
	assert.Empty(t, gitSubcommands["cherry-pick"].short['x'].deny, "cherry-pick -x only records the origin")
	_, err := parseOptTable("--x=z")
	assert.Error(t, err)
	_, err = parseOptTable("!-x")
	assert.Error(t, err)
}
