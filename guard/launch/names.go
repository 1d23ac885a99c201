package launch

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Protected names: entries that make a file run, or obeyed as
// configuration, by the user's own tools once the session is over. No
// guarded process may create, rename into place, write, truncate or unlink
// them inside its write roots, whether they existed when the session
// started or not, on either L3 backend (BPF: by name in the LSM hooks;
// Landlock: the supervised write roots of package namefs), nor through L2
// (guard/policy's path.protected). A write root that names such an entry
// itself (filesystem.write: ["${WS}/.vscode"]) admits it.
var (
	// ProtectedNames are protected wherever they are: git's directory
	// and its pointers (a .git file says "gitdir: PATH"; commondir and
	// gitdir redirect a worktree's repository), files other programs run
	// or obey from a project or a home (direnv's .envrc, the shells'
	// start-up files, git's and npm's and yarn's configuration, the
	// project's MCP servers, SSH's authorized_keys).
	ProtectedNames = []string{
		".git", ".gitmodules", "commondir", "gitdir", "config.worktree",
		".envrc", ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
		".zshrc", ".zprofile", ".zshenv", ".zlogin", ".zlogout", ".gitconfig",
		".mcp.json", ".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs", "authorized_keys",
		// other agents' project files that define MCP servers to start
		// (opencode, crush: third red team F7)
		"opencode.json", "opencode.jsonc", "crush.json", ".crush.json",
	}
	// ProtectedTrees are directories protected with their whole content,
	// at any depth (their own name too: a directory renamed into place):
	// editors' and agents' project settings (VS Code tasks with runOn
	// folderOpen, Claude Code and Cursor hooks and MCP servers, dev
	// containers' lifecycle commands) and SSH's configuration. Every
	// project-scope file package clients reads as MCP servers lies in
	// one (TestProjectConfigsProtected there), and so do the other
	// agents' project settings that start commands or servers (Gemini
	// CLI, Codex, Zed, Roo Code, Amazon Q, Kiro, Continue, Windsurf;
	// red team F3), and Mercurial's repository (.hg/hgrc's hooks, as
	// .git's). Python's bytecode caches too: a .pyc whose header carries
	// the unchanged source's size and mtime runs in its place on the
	// user's next import, and no diff of the sources shows it (F7);
	// Python writes its caches where it can and goes on without them.
	ProtectedTrees = []string{".vscode", ".idea", ".claude", ".cursor", ".devcontainer", ".ssh",
		".gemini", ".codex", ".zed", ".roo", ".amazonq", ".kiro", ".continue", ".windsurf", ".hg",
		"__pycache__"}
	// OutsideGitNames are protected anywhere but below a .git: a directory
	// holding HEAD, objects and refs is a bare repository, whose config
	// git obeys in any directory below it.
	OutsideGitNames = []string{"HEAD"}
)

// Inside a directory named .git the model is the other way round. Git
// reads configuration and code from there under more names than a list
// keeps up with (config, config.worktree, hooks, commondir, gitdir,
// info/attributes, objects/info/alternates, worktrees/*, modules/*, the
// exec lines of a rebase's todo), so everything below a .git is protected
// except what git itself writes as data in ordinary work (commit, fetch,
// merge, stash, gc; gitrepository-layout(5)): GitData, and any name ending
// in GitLockSuffix.

// GitKind says what a GitData entry admits.
type GitKind uint8

const (
	// GitDataEntry: the entry and everything below it not listed.
	GitDataEntry GitKind = iota + 1
	// GitFixedOpen: not the entry itself (no guarded process creates,
	// renames or removes it: a directory renamed into place would bring
	// protected entries along), but everything below it not listed.
	GitFixedOpen
	// GitFixedClosed: not the entry itself; below it only what is listed.
	GitFixedClosed
	// GitFamily (first level only): every name whose part up to and
	// including its last dot is the entry's name.
	GitFamily
)

// GitEntry is one entry of GitData: a path relative to the .git directory.
type GitEntry struct {
	Path string
	Kind GitKind
}

// GitData is what git writes as data in a .git directory. The look-up both
// backends do sees at most three levels below the .git, by an entry's own
// name and its parent's; GitRules checks the list fits.
var GitData = []GitEntry{
	// refs, their logs, the object store; objects/info holds
	// alternates and http-alternates (object look-ups redirected to
	// another directory), so only its data files are admitted; below
	// refs, replace refs make git show one object's content in place of
	// another's (a branch that looks unchanged checks out the server's
	// tree: red team), and git writes them only when the user runs git
	// replace
	{"refs", GitFixedOpen}, {"refs/replace", GitFixedClosed},
	{"logs", GitDataEntry}, {"reftable", GitDataEntry},
	{"packed-refs", GitDataEntry}, {"packed-refs.new", GitDataEntry},
	{"objects", GitFixedOpen}, {"objects/info", GitFixedClosed},
	{"objects/info/packs", GitDataEntry}, {"objects/info/commit-graph", GitDataEntry},
	{"objects/info/commit-graphs", GitDataEntry},
	// the index and git stash's temporary one (index.stash.<pid>)
	{"index", GitDataEntry}, {"index.stash.", GitFamily},
	// where HEAD is and was; what fetch, merge, commit, bisect,
	// cherry-pick, revert and notes leave between commands (not a
	// rebase's or am's state: rebase-merge/git-rebase-todo holds exec
	// lines the user's git rebase --continue runs)
	{"HEAD", GitDataEntry}, {"ORIG_HEAD", GitDataEntry}, {"FETCH_HEAD", GitDataEntry},
	{"AUTO_MERGE", GitDataEntry}, {"shallow", GitDataEntry},
	{"MERGE_HEAD", GitDataEntry}, {"MERGE_MSG", GitDataEntry}, {"MERGE_MODE", GitDataEntry},
	{"MERGE_RR", GitDataEntry}, {"MERGE_AUTOSTASH", GitDataEntry}, {"rr-cache", GitDataEntry},
	{"CHERRY_PICK_HEAD", GitDataEntry}, {"REVERT_HEAD", GitDataEntry}, {"REBASE_HEAD", GitDataEntry},
	{"SQUASH_MSG", GitDataEntry}, {"COMMIT_EDITMSG", GitDataEntry}, {"TAG_EDITMSG", GitDataEntry},
	{"NOTES_EDITMSG", GitDataEntry}, {"NOTES_MERGE_REF", GitDataEntry},
	{"NOTES_MERGE_PARTIAL", GitDataEntry}, {"NOTES_MERGE_WORKTREE", GitDataEntry},
	{"BISECT_LOG", GitDataEntry}, {"BISECT_START", GitDataEntry}, {"BISECT_TERMS", GitDataEntry},
	{"BISECT_NAMES", GitDataEntry}, {"BISECT_EXPECTED_REV", GitDataEntry},
	{"BISECT_ANCESTORS_OK", GitDataEntry}, {"BISECT_HEAD", GitDataEntry}, {"BISECT_FIRST_PARENT", GitDataEntry},
	// git gc --auto, which commit and fetch run
	{"gc.pid", GitDataEntry}, {"gc.log", GitDataEntry},
}

// GitLockSuffix ends the lock files git writes beside an entry it updates
// (index.lock, refs/heads/main.lock, config.lock): data anywhere below a
// .git, since git reads no lock file as configuration or code, and
// renaming one onto a protected name is refused by that name. Names of 31
// bytes or more are not looked at (the kernel's keys hold 31).
const GitLockSuffix = ".lock"

// GitParent is GitRule.Parent at the first level below a .git.
const GitParent = ".git"

// GitDepth is how many levels below a .git the look-up sees.
const GitDepth = 3

// GitRule is a GitData entry as the backends look it up: by its name and
// its parent's name (GitParent at the first level).
type GitRule struct {
	Name, Parent string
	Kind         GitKind
}

// GitRules compiles GitData for the look-up (IsProtected here, the BPF
// programs' protected map), or says why GitData does not fit it: an entry
// deeper than GitDepth, or below a directory not listed as fixed before
// it, a family below the first level, a name and parent listed twice, two
// fixed directories of one name below the first level (the third level's
// key names only its parent), a name too long for the kernel's keys.
func GitRules() ([]GitRule, error) {
	var out []GitRule
	kinds := map[string]GitKind{}
	seen := map[[2]string]bool{}
	fixedNames := map[string]bool{}
	for _, e := range GitData {
		parts := strings.Split(e.Path, "/")
		r := GitRule{Name: parts[len(parts)-1], Parent: GitParent, Kind: e.Kind}
		if len(parts) > 1 {
			r.Parent = parts[len(parts)-2]
			dir := strings.Join(parts[:len(parts)-1], "/")
			if k := kinds[dir]; k != GitFixedOpen && k != GitFixedClosed {
				return nil, fmt.Errorf("git data %q: %q is not listed as a fixed directory before it", e.Path, dir)
			}
		}
		switch {
		case len(parts) > GitDepth:
			return nil, fmt.Errorf("git data %q: deeper than %d levels", e.Path, GitDepth)
		case e.Kind == GitFamily && (len(parts) > 1 || !strings.HasSuffix(r.Name, ".")):
			return nil, fmt.Errorf("git data %q: a family is a first-level name ending in a dot", e.Path)
		case len(r.Name) >= 32 || r.Name == "" || r.Name == "." || r.Name == "..":
			return nil, fmt.Errorf("git data %q: not a name of 1 to 31 bytes", e.Path)
		case seen[[2]string{r.Name, r.Parent}]:
			return nil, fmt.Errorf("git data %q: name and parent listed twice", e.Path)
		}
		if len(parts) > 1 && (e.Kind == GitFixedOpen || e.Kind == GitFixedClosed) {
			if fixedNames[r.Name] {
				return nil, fmt.Errorf("git data %q: a second fixed directory named %q below the first level", e.Path, r.Name)
			}
			fixedNames[r.Name] = true
		}
		seen[[2]string{r.Name, r.Parent}] = true
		kinds[e.Path] = e.Kind
		out = append(out, r)
	}
	return out, nil
}

// MustGitRules is GitRules for a list fixed at build time, which
// TestGitRules holds to GitRules' checks.
var MustGitRules = sync.OnceValue(func() []GitRule {
	rules, err := GitRules()
	if err != nil {
		panic(err) // a build-time list: TestGitRules fails first
	}
	return rules
})

// gitRules is GitRules as a look-up table.
var gitRules = sync.OnceValue(func() map[[2]string]GitKind {
	m := map[[2]string]GitKind{}
	for _, r := range MustGitRules() {
		m[[2]string{r.Name, r.Parent}] = r.Kind
	}
	return m
})

// GitFamilyKey is the name a family is looked up by: name up to and
// including its last dot ("" when it has none past the first byte, or is
// 31 bytes or longer: the kernel's keys hold 31).
func GitFamilyKey(name string) string {
	i := strings.LastIndexByte(name, '.')
	if i < 1 || len(name) >= 31 {
		return ""
	}
	return name[:i+1]
}

// gitEntryProtected says whether the entry at parts, the path components below
// the nearest .git (at least one), is protected: the same steps as the BPF
// programs' git_protected (bpf/guard.bpf.c).
func gitEntryProtected(parts []string) bool {
	leaf := parts[len(parts)-1]
	if len(leaf) > len(GitLockSuffix) && len(leaf) < 31 && strings.HasSuffix(leaf, GitLockSuffix) {
		return false
	}
	rules := gitRules()
	parent, kind := GitParent, GitKind(0)
	for i, p := range parts[:min(len(parts), GitDepth)] {
		k, ok := rules[[2]string{p, parent}]
		if !ok && i == 0 {
			if f := GitFamilyKey(p); f != "" && rules[[2]string{f, GitParent}] == GitFamily {
				return false
			}
		}
		switch {
		case !ok:
			return i == 0 || kind != GitFixedOpen
		case k == GitDataEntry || k == GitFamily:
			return false
		}
		parent, kind = p, k
	}
	// The walk ended on a fixed directory: the entry is that directory
	// itself, or lies below the levels the model lists.
	return len(parts) <= GitDepth || kind != GitFixedOpen
}

// IsProtected reports whether rel, a path relative to a write root (slash
// separated, cleaned), is a protected entry or inside one, by the rules
// above. The BPF programs decide from dentry names (bpf/guard.bpf.c,
// is_protected) with the protected map guard/sandbox compiles from these
// lists and GitRules, by the same steps.
func IsProtected(rel string) bool {
	rel = filepath.ToSlash(filepath.Clean(rel))
	if rel == "." || rel == "/" {
		return false
	}
	parts := strings.Split(strings.TrimPrefix(rel, "/"), "/")
	name := parts[len(parts)-1]
	if slices.Contains(ProtectedNames, name) || slices.Contains(ProtectedTrees, name) {
		return true
	}
	for _, dir := range parts[:len(parts)-1] {
		if slices.Contains(ProtectedTrees, dir) {
			return true
		}
	}
	// The nearest .git above the entry decides by the git model.
	for i := len(parts) - 2; i >= 0; i-- {
		if parts[i] == ".git" {
			return gitEntryProtected(parts[i+1:])
		}
	}
	return slices.Contains(OutsideGitNames, name)
}

// gitListsBelow says whether GitData lists an entry below rel, a path
// relative to a .git directory.
func gitListsBelow(rel string) bool {
	return slices.ContainsFunc(GitData, func(e GitEntry) bool { return strings.HasPrefix(e.Path, rel+"/") })
}
