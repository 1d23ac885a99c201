// Package runtime resolves what an MCP server needs to run: the programs
// the kernel executes to start it (the executable found through PATH, its
// ELF loader, the #! chain including `#!/usr/bin/env NAME`, shims resolved
// to the real interpreter) and the trees its interpreter loads code from
// (the interpreter's prefixes as the interpreter reports them, a venv, a
// node package root and every directory its dependencies resolve to,
// binaries bundled in the package).
//
// These are runtime grants: read/execute-only, for the L3 backends alone,
// never admitted for tool arguments (L1 reads only the policy's
// filesystem section). Both L3 backends take their runtime grants from
// Resolve, so they cannot disagree about what a server may load.
//
// Nothing the server brings is executed outside a sandbox: the resolver
// reads what the layout says (package.json, pyvenv.cfg, #! lines, version
// files), and the helpers it must run (an interpreter asked for its search
// path, npm fetching an npx package, a version manager asked which program
// its shim runs) run isolated (no workspace on PATH or sys.path, a clean
// working directory, a minimal environment) and confined by the launcher
// like a server (launch.Helper): read-only access to the trees they need,
// no write access to anything the server reads later (npm's cache
// excepted: it is where the package goes), no network but a package
// fetch's. Launchers that would otherwise fetch code from inside the
// server's sandbox (npx, npm exec) are resolved that way first: the
// command is rewritten to `node <entry>` and the installed package becomes
// a runtime tree. uvx and `pipx run` are resolved to the entry point of the
// installed tool (pytools.go), or refused at once.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcpguard/mcpguard/guard/launch"
)

// ErrUnresolved is wrapped when a command cannot be resolved to something
// that runs under L3 (a launcher that could not install its package, a
// program not on PATH). The message says what to do.
var ErrUnresolved = errors.New("cannot resolve the server's runtime")

// Command is a server command as it will be started.
type Command struct {
	// Argv is the program and its arguments; Argv[0] is looked up in the
	// PATH of Env when it has no slash.
	Argv []string
	// Dir is the working directory ("" is the caller's).
	Dir string
	// Env is the server's environment (nil: the caller's).
	Env []string
}

// Runtime is what a command needs to run.
type Runtime struct {
	// Argv is the command to start: Command.Argv with the program made
	// absolute, a shim replaced by the program it runs, a launcher (npx)
	// replaced by `node <entry>`.
	Argv []string
	// Exec lists the files the kernel executes to start the server and
	// that the server may execute again (absolute, cleaned, symlinks kept
	// and resolved both listed). Each is readable too.
	Exec []string
	// Read lists the trees the server's runtime reads code from.
	Read []string
	// Notes say what was resolved how, and what was left out and why.
	Notes []string
}

// Options tune a Resolver. The zero value is right outside tests.
type Options struct {
	// Run runs a helper program (an interpreter asked for its paths, a
	// shim asked which program it runs, npm asked to install a package)
	// confined, and returns its standard output. Nil runs it through the
	// launcher (launch.Helper.Output): never outside a sandbox.
	Run func(ctx context.Context, h launch.Helper) ([]byte, error)
	// Timeout bounds each helper (npm installs get 4x). Zero means
	// MCPGUARD_RESOLVE_TIMEOUT (a Go duration, for slow machines and
	// networks) when set, else 20 s.
	Timeout time.Duration
	// Extra are the policy's runtime.read and runtime.exec entries,
	// merged into every result.
	ExtraRead, ExtraExec []string
	// Cache keeps helpers' answers across Resolvers (sessions) while the
	// files they came from are unchanged; nil keeps nothing.
	Cache *Cache
	// Writable are the policy's write roots. A tree found through
	// something inside one (a dependency's symlink, a venv in the
	// workspace) is granted only inside them.
	Writable []string
}

// TimeoutEnv names the environment variable that sets the default
// Options.Timeout.
const TimeoutEnv = "MCPGUARD_RESOLVE_TIMEOUT"

// Resolver resolves commands; it holds no state between calls.
type Resolver struct {
	o Options
}

// New returns a Resolver.
func New(o Options) *Resolver {
	if o.Run == nil {
		o.Run = func(ctx context.Context, h launch.Helper) ([]byte, error) { return h.Output(ctx) }
	}
	if o.Timeout <= 0 {
		o.Timeout = 20 * time.Second
		if d, err := time.ParseDuration(os.Getenv(TimeoutEnv)); err == nil && d > 0 {
			o.Timeout = d
		}
	}
	return &Resolver{o: o}
}

// Resolve works out what c needs to run. It fails, wrapping ErrUnresolved,
// when the program cannot be found or a launcher cannot be resolved: a
// server that would hang or die at start under L3 is refused at once.
//
// Nothing of the server runs outside a sandbox here: what the layout says
// is read (package.json, pyvenv.cfg, #! lines, shims' scripts), and the
// few helpers that must run (an interpreter asked for its search path, npm
// fetching a package, a version manager asked which program its shim
// runs) are confined as a server is (Options.Run, launch.Helper).
func (r *Resolver) Resolve(ctx context.Context, c Command) (*Runtime, error) {
	if len(c.Argv) == 0 {
		return nil, fmt.Errorf("%w: empty command", ErrUnresolved)
	}
	if c.Env == nil {
		c.Env = os.Environ()
	}
	if c.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("resolve runtime: %w", err)
		}
		c.Dir = wd
	}
	rt := &Runtime{}
	g := &grants{home: envValue(c.Env, "HOME"), rt: rt, writable: r.o.Writable}
	argv, err := r.program(ctx, c, g)
	if err != nil {
		return nil, err
	}
	interp, code, err := r.interpreter(ctx, c, argv, g)
	if err != nil {
		return nil, err
	}
	inPackage := false
	switch kindOf(interp) {
	case "python":
		r.python(ctx, c, interp, rt.Argv, g)
	case "node":
		inPackage = nodeRuntime(interp, code, c.Env, g)
	}
	if code != "" && !inPackage {
		// Code outside a package: its directory and the one above it,
		// where scripts keep shared modules (../lib, sys.path.insert of
		// the parent). Never $HOME or /.
		dir := filepath.Dir(code)
		g.read(dir, "server code directory")
		g.read(filepath.Dir(dir), "server code directory")
	}
	for _, p := range r.o.ExtraRead {
		g.read(p, "policy runtime.read")
	}
	for _, p := range r.o.ExtraExec {
		g.helpers = append(g.helpers, helperProg{p, "policy runtime.exec"})
	}
	for _, h := range g.helpers {
		r.helper(c, h.path, h.why, g)
	}
	slices.Sort(rt.Read)
	rt.Read = compactTrees(rt.Read)
	return rt, nil
}

// program finds the program c starts and rewrites the command for what
// really runs: a launcher (npx, uvx) replaced by the package's entry, a
// version manager's shim by the program it picks. It sets rt.Argv and
// grants the program and its interpreter chain.
func (r *Resolver) program(ctx context.Context, c Command, g *grants) ([]string, error) {
	prog, err := lookPath(c.Argv[0], envValue(c.Env, "PATH"), c.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnresolved, err)
	}
	argv := append([]string{prog}, c.Argv[1:]...)
	// Launchers first: they change what runs.
	if isNpx(argv) {
		argv, err = r.resolveNpx(ctx, c, argv, g)
	} else if isPyTool(argv) {
		argv, err = r.resolvePyTool(c, argv, g)
	}
	if err != nil {
		return nil, err
	}
	// A shim (pyenv, rbenv, asdf, nodenv) runs a shell script that picks
	// the real program from version files under $HOME: run the real one.
	if real, how := r.resolveShim(ctx, c, argv[0]); real != "" {
		g.note("%s is a %s shim for %s", argv[0], how, real)
		argv[0] = real
	}
	g.rt.Argv = argv
	if err := g.execChain(argv[0], "server program", c.Env); err != nil {
		return nil, err
	}
	return argv, nil
}

// interpreter names the program that interprets the server's code and
// that code ("" for a binary or `python -m`). A script run through an
// interpreter's shim (`#!/usr/bin/env python3` with pyenv's shims first
// on PATH) is rewritten to run the real interpreter on it.
func (r *Resolver) interpreter(ctx context.Context, c Command, argv []string, g *grants) (interp, code string, err error) {
	interp = argv[0]
	switch {
	case kindOf(argv[0]) != "":
		code = scriptOperand(argv, c.Dir)
	case isScript(argv[0]):
		code = argv[0]
		if d, err := directInterpreter(argv[0], envValue(c.Env, "PATH")); err == nil && d != "" {
			interp = d
		}
	}
	if code == "" || interp == argv[0] {
		return interp, code, nil
	}
	real, how := r.resolveShim(ctx, c, interp)
	if real == "" {
		return interp, code, nil
	}
	g.note("%s is a %s shim for %s: running %s %s", interp, how, real, real, code)
	g.rt.Argv = append([]string{real, code}, argv[1:]...)
	if err := g.execChain(real, "interpreter of "+code, c.Env); err != nil {
		return "", "", err
	}
	return real, code, nil
}

// grants collects a Runtime's paths, refusing trees that would give away
// the user's home or the whole file system.
type grants struct {
	home string
	rt   *Runtime
	// writable are the policy's write roots: what the server can write,
	// which must not widen what it can read (see derived).
	writable []string
	// helpers are programs the server runs besides itself, granted with
	// their own chains by Resolver.helper.
	helpers []helperProg
}

type helperProg struct{ path, why string }

func (g *grants) note(format string, args ...any) {
	g.rt.Notes = append(g.rt.Notes, fmt.Sprintf(format, args...))
}

// execChain grants prog and the chain the kernel executes to start it.
func (g *grants) execChain(prog, why string, env []string) error {
	chain, err := Interpreters(prog, envValue(env, "PATH"))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnresolved, err)
	}
	g.exec(prog, why)
	for _, p := range chain {
		g.exec(p, "interpreter of "+prog)
	}
	return nil
}

// derived reports whether a tree found from src (a package's dependency,
// a path an interpreter reported) may be granted: not when src lies in a
// write root of the policy and p outside every write root. What the
// server could write in an earlier session (a symlink in node_modules, a
// .pth file in a venv of its workspace) never widens what it reads.
func (g *grants) derived(src, p, why string) bool {
	if !slices.ContainsFunc(g.writable, func(w string) bool { return within(src, w) }) {
		return true
	}
	if slices.ContainsFunc(g.writable, func(w string) bool { return within(p, w) }) {
		return true
	}
	g.note("%s %s not granted: found through %s, which the server can write", why, p, src)
	return false
}

func (g *grants) exec(p, why string) {
	if p == "" || !filepath.IsAbs(p) {
		return
	}
	p = filepath.Clean(p)
	add := func(p string) {
		if !slices.Contains(g.rt.Exec, p) {
			g.rt.Exec = append(g.rt.Exec, p)
		}
	}
	add(p)
	// The kernel checks the file it opens: the symlink's target.
	if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
		add(real)
	}
}

// read grants the tree p read-only; it reports whether it did.
func (g *grants) read(p, why string) bool {
	if p == "" || !filepath.IsAbs(p) {
		return false
	}
	p = filepath.Clean(p)
	if _, err := os.Stat(p); err != nil {
		return false
	}
	if p == "/" || (g.home != "" && within(g.home, p)) {
		g.note("%s %s not granted: it holds $HOME or the whole file system", why, p)
		return false
	}
	g.rt.Read = append(g.rt.Read, p)
	if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
		if real == "/" || (g.home != "" && within(g.home, real)) {
			return true
		}
		g.rt.Read = append(g.rt.Read, real)
	}
	return true
}

// compactTrees drops duplicates and paths inside another path of the
// sorted list.
func compactTrees(ps []string) []string {
	var out []string
	for _, p := range ps {
		if len(out) > 0 && within(p, out[len(out)-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// envValue is the value of name in env (the last one wins, as in exec.Cmd).
func envValue(env []string, name string) string {
	val := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			val = v
		}
	}
	return val
}

// lookPath finds name as the kernel and a shell would: a name with a slash
// relative to dir, otherwise the first executable regular file in PATH.
func lookPath(name, pathEnv, dir string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		if _, err := os.Stat(name); err != nil {
			return "", fmt.Errorf("server program: %w", err)
		}
		return filepath.Clean(name), nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH %q", name, pathEnv)
}

// kindOf names the interpreter family of a program, "" for others.
func kindOf(prog string) string {
	b := filepath.Base(prog)
	switch {
	case strings.HasPrefix(b, "python"), strings.HasPrefix(b, "pypy"):
		return "python"
	case b == "node", b == "nodejs":
		return "node"
	case b == "bash", b == "sh", b == "dash", b == "ruby", b == "perl", b == "php", b == "deno", b == "bun":
		return "other"
	}
	return ""
}

// scriptOperand returns the first non-flag argument after argv[0] when it
// names a regular file: the script an interpreter runs. `python -m MOD`
// and `node -e CODE` have none.
func scriptOperand(argv []string, dir string) string {
	for _, a := range argv[min(1, len(argv)):] {
		switch a {
		case "-m", "-c", "-e", "--eval", "-p", "--print":
			return ""
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		if !filepath.IsAbs(a) {
			a = filepath.Join(dir, a)
		}
		if fi, err := os.Stat(a); err == nil && fi.Mode().IsRegular() {
			return filepath.Clean(a)
		}
		return ""
	}
	return ""
}
