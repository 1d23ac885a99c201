//go:build linux

package attack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Payload is what the name routes write: a test finds it, or not, at the
// protected path afterwards.
const Payload = "[core]\n\tfsmonitor = \"touch /tmp/mcpguard-pwned\"\n# mcpguard-payload\n"

// NameRoutes are the ways "name:ROUTE#PATH" puts Payload at PATH (a
// protected entry, or a file inside one): every system call that makes a
// name, and the indirect ones.
var NameRoutes = []string{"creat", "mknod", "rename", "link", "symlink", "tmpfile", "exchange", "dirinto", "mkdir", "write", "truncate"}

// Name ("name:ROUTE#PATH") tries to leave Payload at PATH by ROUTE:
//
//	creat     open(O_CREAT|O_WRONLY) and write
//	mknod     mknod a regular file, then open and write it
//	rename    write a sibling, rename it onto PATH
//	link      write a sibling, hard-link it as PATH
//	symlink   write a sibling, symlink PATH to it (a tool reading PATH
//	          reads the payload)
//	tmpfile   write an O_TMPFILE file, link it in as PATH
//	exchange  write a sibling, renameat2(RENAME_EXCHANGE) with PATH
//	          (PATH exists)
//	dirinto   make a directory holding PATH's last name with the payload
//	          and rename it into place as PATH's parent (a directory
//	          renamed into place holding the name, over an empty one)
//	mkdir     mkdir PATH's parent, then creat PATH (the protected
//	          directory made afresh)
//	write     open an existing PATH for writing, append
//	truncate  truncate(PATH), then append by open
func Name(arg string) error {
	route, path, ok := strings.Cut(arg, "#")
	if !ok {
		return fmt.Errorf("name: want ROUTE#PATH, got %q", arg)
	}
	dir, base := filepath.Dir(path), filepath.Base(path)
	sibling := filepath.Join(dir, "mcpguard-staged-"+base)
	stage := func() error { return os.WriteFile(sibling, []byte(Payload), 0o644) }
	switch route {
	case "creat":
		return os.WriteFile(path, []byte(Payload), 0o644)
	case "mknod":
		if err := unix.Mknod(path, unix.S_IFREG|0o644, 0); err != nil {
			return err
		}
		return appendFile(path, Payload)
	case "rename":
		return first(stage(), func() error { return os.Rename(sibling, path) })
	case "link":
		return first(stage(), func() error { return os.Link(sibling, path) })
	case "symlink":
		return first(stage(), func() error { return os.Symlink(sibling, path) })
	case "exchange":
		return first(stage(), func() error {
			return unix.Renameat2(unix.AT_FDCWD, sibling, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE)
		})
	case "tmpfile":
		return tmpfileLink(dir, path)
	case "dirinto":
		parent := filepath.Dir(dir)
		staged := filepath.Join(parent, "mcpguard-staged-dir")
		if err := os.MkdirAll(staged, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(staged, base), []byte(Payload), 0o644); err != nil {
			return err
		}
		// rename(2), not os.Rename: it replaces an empty directory
		// (objects/info) where os.Rename refuses any existing one
		return unix.Rename(staged, dir)
	case "mkdir":
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return err
		}
		return os.WriteFile(path, []byte(Payload), 0o644)
	case "write":
		return appendFile(path, Payload)
	case "truncate":
		if err := os.Truncate(path, 0); err != nil {
			return err
		}
		return appendFile(path, Payload)
	}
	return fmt.Errorf("name: unknown route %q", route)
}

// first runs then only when err is nil.
func first(err error, then func() error) error {
	if err != nil {
		return err
	}
	return then()
}

// tmpfileLink writes the payload to an unnamed file in dir and links it
// in as path.
func tmpfileLink(dir, path string) error { return tmpfileAs(dir, path, Payload, 0o644) }

// tmpfileAs writes content to an unnamed file in dir, gives it mode and
// links it in as path.
func tmpfileAs(dir, path, content string, mode uint32) error {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY, mode)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(content)); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return err
	}
	return unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
}

// HasPayload reports whether the file at path (followed if a symlink)
// holds Payload: the evidence that a name route got through.
func HasPayload(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), "mcpguard-payload")
}

// NameCase is a protected entry and the routes that may put a payload
// there.
type NameCase struct {
	Path   string
	Routes []string
}

// fileRoutes make a name that did not exist.
var fileRoutes = []string{"creat", "mknod", "rename", "link", "symlink", "tmpfile"}

// NameCases lays out a workspace in ws (a repository with hooks and a
// config, a project with its .vscode, an existing .envrc) and returns the
// protected entries every route is tried on: a .git made during the
// session (a directory holding config with core.fsmonitor, or a gitdir
// pointer file), git's redirections and hooks in an existing repository,
// editor and agent settings made afresh or added to, direnv's and the
// project's MCP configuration, a bare repository's HEAD.
func NameCases(ws string) ([]NameCase, error) {
	for _, d := range []string{"newrepo", "wt", "repo/.git/hooks", "repo/.git/objects/info", "repo/.git/refs", "proj/.vscode", "sub", "bare/objects", "bare/refs"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			return nil, err
		}
	}
	for f, content := range map[string]string{
		"repo/.git/HEAD": "ref: refs/heads/main\n", "repo/.git/config": "[core]\n",
		"proj/.vscode/settings.json": "{}\n", "sub/.envrc": "# empty\n",
	} {
		if err := os.WriteFile(filepath.Join(ws, f), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	j := func(p string) string { return filepath.Join(ws, p) }
	existing := []string{"write", "truncate", "exchange", "rename"}
	return []NameCase{
		{j("newrepo/.git/config"), []string{"mkdir", "dirinto"}},
		{j("wt/.git"), fileRoutes},
		{j("repo/.git/commondir"), fileRoutes},
		{j("repo/.git/gitdir"), fileRoutes},
		{j("repo/.git/hooks/post-checkout"), fileRoutes},
		{j("repo/.git/config"), existing},
		{j(".vscode/tasks.json"), []string{"mkdir", "dirinto"}},
		{j(".claude/settings.json"), []string{"mkdir", "dirinto"}},
		{j(".cursor/mcp.json"), []string{"mkdir", "dirinto"}},
		{j(".idea/workspace.xml"), []string{"mkdir", "dirinto"}},
		{j("proj/.vscode/tasks.json"), fileRoutes},
		{j("proj/.vscode/settings.json"), existing},
		{j(".envrc"), fileRoutes},
		{j("sub/.envrc"), existing},
		{j(".mcp.json"), fileRoutes},
		{j(".gitmodules"), fileRoutes},
		{j(".bashrc"), fileRoutes},
		{j("bare/HEAD"), fileRoutes},
	}, nil
}

// GitModelCases are, in the repository NameCases lays out in ws, entries
// below its .git that no deny-list names (only git's data is writable
// there): objects/info/alternates (also by a directory renamed into place
// as objects/info), info/attributes, a new name. Every backend refuses
// them by the allow-list (guard/launch GitData).
func GitModelCases(ws string) []NameCase {
	j := func(p string) string { return filepath.Join(ws, p) }
	return []NameCase{
		{j("repo/.git/objects/info/alternates"), []string{"creat", "mknod", "rename", "link", "symlink", "tmpfile", "dirinto"}},
		{j("repo/.git/info/attributes"), []string{"mkdir", "dirinto"}},
		{j("repo/.git/new-name"), fileRoutes},
		// a replace ref: git shows the object it names in place of
		// another (a branch that looks unchanged checks out this one)
		{j("repo/.git/refs/replace/0123456789abcdef0123456789abcdef01234567"), []string{"mkdir", "dirinto"}},
	}
}

// NameSteps are the "name:" steps for cases, one per route.
func NameSteps(cases []NameCase) []string {
	var out []string
	for _, c := range cases {
		for _, r := range c.Routes {
			out = append(out, "name:"+r+"#"+c.Path)
		}
	}
	return out
}

// ExecConfigCases lays out a project in ws (package.json, a Makefile, a
// virtualenv) and returns the files its tools execute or read as
// configuration that every route is tried on: a pretest script, a .pth
// file, a Makefile target, a CI workflow.
func ExecConfigCases(ws string) ([]NameCase, error) {
	for _, d := range []string{".venv/lib/python3.11/site-packages", ".github/workflows", "node_modules/dep"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			return nil, err
		}
	}
	for f, content := range map[string]string{
		"package.json": "{\"scripts\": {\"test\": \"node test.js\"}}\n", "Makefile": "all:\n\tgo build\n",
	} {
		if err := os.WriteFile(filepath.Join(ws, f), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	j := func(p string) string { return filepath.Join(ws, p) }
	return []NameCase{
		{j("package.json"), []string{"write", "truncate", "exchange", "rename"}},
		{j("Makefile"), []string{"write", "rename"}},
		{j(".venv/lib/python3.11/site-packages/zz-hook.pth"), fileRoutes},
		{j(".github/workflows/release.yml"), fileRoutes},
		{j("sub/Makefile"), []string{"mkdir", "dirinto"}},
	}, nil
}
