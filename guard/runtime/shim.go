package runtime

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mcpguard/mcpguard/guard/launch"
)

// shimExec matches the line of a version manager's shim (pyenv, rbenv,
// nodenv, asdf) that hands the program to the manager:
//
//	exec "/home/u/.pyenv/libexec/pyenv" exec "$program" "$@"
//	exec asdf exec "python3" "$@"
var shimExec = regexp.MustCompile(`(?m)^\s*exec\s+"?([^"\s]+)"?\s+exec\s+`)

// versionFiles are the files version managers pick a version from, in
// the working directory or any directory above it.
var versionFiles = []string{".python-version", ".ruby-version", ".node-version", ".tool-versions"}

// resolveShim returns the program a version manager's shim at prog would
// run, asking the manager (`pyenv which NAME` in the server's directory,
// so .python-version and PYENV_VERSION count), and the manager's name; ""
// when prog is not a shim or the manager cannot say.
//
// The manager is a shell script of the user's, but the shim that names
// it is found through the server's PATH, and the directory it reads
// version files from is the server's: it runs confined (shimHelper).
func (r *Resolver) resolveShim(ctx context.Context, c Command, prog string) (string, string) {
	if !isScript(prog) {
		return "", ""
	}
	b, err := os.ReadFile(prog)
	if err != nil || len(b) > 64<<10 {
		return "", ""
	}
	m := shimExec.FindSubmatch(b)
	if m == nil {
		return "", ""
	}
	manager := string(m[1])
	if !strings.Contains(manager, "/") {
		p, err := lookPath(manager, envValue(c.Env, "PATH"), c.Dir)
		if err != nil {
			return "", ""
		}
		manager = p
	}
	out, err := r.ask(ctx, 1, shimHelper(c, manager, filepath.Base(prog)), nil)
	if err != nil {
		return "", ""
	}
	real := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(real, '\n'); i >= 0 {
		real = real[i+1:]
	}
	if !filepath.IsAbs(real) || isShimPath(real) {
		return "", ""
	}
	if fi, err := os.Stat(real); err != nil || !fi.Mode().IsRegular() {
		return "", ""
	}
	name := filepath.Base(manager)
	return real, name
}

// shimHelper is `MANAGER which NAME` confined: in the server's directory
// (read-only), with the manager's tree, the version files above that
// directory and the managers' own variables (PYENV_VERSION, ASDF_DIR, ...)
// and nothing else of the environment; executing the system's programs
// (the manager is a shell script) and its own.
func shimHelper(c Command, manager, name string) launch.Helper {
	root := filepath.Dir(filepath.Dir(manager))
	if real, err := filepath.EvalSymlinks(manager); err == nil {
		root = filepath.Dir(filepath.Dir(real))
	}
	keep := []string{"PYENV_", "RBENV_", "NODENV_", "ASDF_"}
	read := []string{root, c.Dir}
	for _, kv := range helperEnv(c.Env, nil, keep...) {
		// A manager's directories named by its variables (PYENV_ROOT,
		// ASDF_DATA_DIR).
		if _, v, _ := strings.Cut(kv, "="); filepath.IsAbs(v) && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "HOME=") {
			read = append(read, v)
		}
	}
	dirs := []string{c.Dir}
	if home := envValue(c.Env, "HOME"); filepath.IsAbs(home) {
		dirs = append(dirs, home)
		read = append(read, filepath.Join(home, ".asdfrc"))
	}
	for _, d := range dirs {
		for ; ; d = filepath.Dir(d) {
			for _, f := range versionFiles {
				read = append(read, filepath.Join(d, f))
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return launch.Helper{
		Argv: []string{manager, "which", name},
		Dir:  c.Dir,
		Env:  helperEnv(c.Env, []string{filepath.Dir(manager)}, keep...),
		Read: read,
		Exec: append([]string{root}, systemPrograms...),
	}
}

func isShimPath(p string) bool { return filepath.Base(filepath.Dir(p)) == "shims" }
