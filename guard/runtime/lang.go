package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// shimExec matches the line of a version manager's shim (pyenv, rbenv,
// nodenv, asdf) that hands the program to the manager:
//
//	exec "/home/u/.pyenv/libexec/pyenv" exec "$program" "$@"
//	exec asdf exec "python3" "$@"
var shimExec = regexp.MustCompile(`(?m)^\s*exec\s+"?([^"\s]+)"?\s+exec\s+`)

// resolveShim returns the program a version manager's shim at prog would
// run, asking the manager (`pyenv which NAME` with the server's
// environment and directory, so .python-version and PYENV_VERSION count),
// and the manager's name; "" when prog is not a shim or the manager cannot
// say.
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
	out, err := r.ask(ctx, 1, Command{Argv: []string{manager, "which", filepath.Base(prog)}, Dir: c.Dir, Env: c.Env})
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

func isShimPath(p string) bool { return filepath.Base(filepath.Dir(p)) == "shims" }

// pyPaths is what a Python interpreter reports about where it loads from.
type pyPaths struct {
	Prefix         string   `json:"prefix"`
	BasePrefix     string   `json:"base_prefix"`
	ExecPrefix     string   `json:"exec_prefix"`
	BaseExecPrefix string   `json:"base_exec_prefix"`
	Executable     string   `json:"executable"`
	Path           []string `json:"path"`
}

const pyProbe = `import sys, json
print(json.dumps({"prefix": sys.prefix, "base_prefix": sys.base_prefix,
  "exec_prefix": sys.exec_prefix, "base_exec_prefix": sys.base_exec_prefix,
  "executable": sys.executable, "path": [p for p in sys.path if p]}))`

// python asks the interpreter, started as the server's command starts it
// (same path, so a venv's pyvenv.cfg is found the same way; same
// environment, directory and isolation flags), where it loads from.
func (r *Resolver) python(ctx context.Context, c Command, interp string, argv []string, g *grants) {
	probe := []string{interp}
	if interp == argv[0] {
		for _, a := range argv[1:] {
			if !strings.HasPrefix(a, "-") {
				break
			}
			// Flags that change sys.path; -m and -c end the options.
			switch a {
			case "-I", "-E", "-s", "-S", "-P":
				probe = append(probe, a)
			}
		}
	}
	probe = append(probe, "-c", pyProbe)
	out, err := r.ask(ctx, 1, Command{Argv: probe, Dir: c.Dir, Env: c.Env})
	if err != nil {
		g.note("python %s: asking for sys.prefix and sys.path failed: %v", interp, err)
		return
	}
	var p pyPaths
	if err := json.Unmarshal(bytes.TrimSpace(lastLine(out)), &p); err != nil {
		g.note("python %s: unreadable sys.path report: %v", interp, err)
		return
	}
	for _, d := range []string{p.Prefix, p.BasePrefix, p.ExecPrefix, p.BaseExecPrefix} {
		g.read(d, "python prefix")
	}
	if p.Executable != "" {
		g.exec(p.Executable, "python executable")
	}
	for _, d := range p.Path {
		if d == c.Dir {
			// sys.path[0] of `python -m` is the working directory, which
			// holds the data; the server's own code is granted apart.
			continue
		}
		g.read(d, "python sys.path")
	}
}

func lastLine(b []byte) []byte {
	b = bytes.TrimRight(b, "\n")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

// nodeRuntime grants what node needs for code: the interpreter's own
// prefix (nvm, asdf and tarball installs keep modules beside it), the
// package that holds the entry file, and every package its dependencies
// resolve to, found as node finds them (node_modules directories from the
// requiring package's real path upward), recursively. NODE_PATH entries
// are searched too, as node does.
//
// It reports whether code is in a package.
func nodeRuntime(node, code string, env []string, g *grants) bool {
	if real, err := filepath.EvalSymlinks(node); err == nil {
		if prefix := filepath.Dir(filepath.Dir(real)); prefix != "/usr" && prefix != "/" {
			g.read(prefix, "node prefix")
		}
	}
	nodePath := filepath.SplitList(envValue(env, "NODE_PATH"))
	for _, d := range nodePath {
		g.read(d, "NODE_PATH")
	}
	if code == "" {
		return false
	}
	real, err := filepath.EvalSymlinks(code)
	if err != nil {
		return false
	}
	root := packageRoot(filepath.Dir(real))
	if root == "" || !g.read(root, "node package") {
		// No package, or one the resolver will not grant (a stray
		// package.json in $HOME): the code directory rule applies.
		return false
	}
	seen := map[string]bool{}
	var walk func(pkg string, depth int)
	walk = func(pkg string, depth int) {
		if seen[pkg] || depth > 64 {
			return
		}
		seen[pkg] = true
		g.read(pkg, "node package")
		for _, dep := range dependencies(pkg) {
			if d := resolvePackage(pkg, dep, nodePath); d != "" {
				walk(d, depth+1)
			}
		}
	}
	walk(root, 0)
	for _, b := range bundledBinaries(root) {
		g.helpers = append(g.helpers, helperProg{b, "binary bundled in " + root})
	}
	return true
}

// packageRoot is the nearest directory at or above dir whose package.json
// names a package ("dist/package.json" files that only set "type" are
// skipped), "" when there is none.
func packageRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "package.json"))
		if err == nil {
			var m struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(b, &m) == nil && m.Name != "" {
				return d
			}
		}
		if filepath.Dir(d) == d || filepath.Base(d) == "node_modules" {
			return ""
		}
	}
}

// dependencies lists the packages pkg's package.json depends on at run
// time (dependencies, optionalDependencies, peerDependencies), sorted.
func dependencies(pkg string) []string {
	b, err := os.ReadFile(filepath.Join(pkg, "package.json"))
	if err != nil {
		return nil
	}
	var m struct {
		Deps     map[string]any `json:"dependencies"`
		Optional map[string]any `json:"optionalDependencies"`
		Peer     map[string]any `json:"peerDependencies"`
	}
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	var out []string
	for _, d := range []map[string]any{m.Deps, m.Optional, m.Peer} {
		for k := range d {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// resolvePackage finds package name as node's resolver does from inside
// pkg: pkg/node_modules/name, then each ancestor's node_modules, then
// NODE_PATH. It returns the real path of the package's directory.
func resolvePackage(pkg, name string, nodePath []string) string {
	var dirs []string
	for d := pkg; ; d = filepath.Dir(d) {
		if filepath.Base(d) != "node_modules" {
			dirs = append(dirs, filepath.Join(d, "node_modules"))
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	dirs = append(dirs, nodePath...)
	for _, d := range dirs {
		p := filepath.Join(d, filepath.FromSlash(name))
		if fi, err := os.Stat(filepath.Join(p, "package.json")); err == nil && fi.Mode().IsRegular() {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				return real
			}
			return p
		}
	}
	return ""
}

// bundledBinaries lists the ELF executables shipped in a package (outside
// its node_modules), which servers start as helpers. The walk is bounded.
func bundledBinaries(root string) []string {
	var out []string
	n := 0
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		n++
		if n > 20000 {
			return filepath.SkipAll
		}
		if d.IsDir() {
			if d.Name() == "node_modules" || d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Mode()&0o111 != 0 && isELF(p) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// isNpx reports whether argv runs a package through npx or `npm exec`.
func isNpx(argv []string) bool {
	switch filepath.Base(argv[0]) {
	case "npx":
		return true
	case "npm":
		return len(argv) > 1 && (argv[1] == "exec" || argv[1] == "x")
	}
	return false
}

// npxSpec splits an npx command line into the package spec, whether
// installing was allowed (-y/--yes), and the server's arguments.
func npxSpec(argv []string) (spec string, yes bool, args []string, err error) {
	rest := argv[1:]
	if filepath.Base(argv[0]) == "npm" && len(rest) > 0 {
		rest = rest[1:] // exec, x
	}
	var pkgs []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "-y" || a == "--yes":
			yes = true
		case a == "--no" || a == "--no-install" || a == "--yes=false":
			yes = false
		case a == "-p" || a == "--package":
			if i+1 >= len(rest) {
				return "", false, nil, fmt.Errorf("%s needs a package", a)
			}
			i++
			pkgs = append(pkgs, rest[i])
		case strings.HasPrefix(a, "--package="):
			pkgs = append(pkgs, strings.TrimPrefix(a, "--package="))
		case a == "--":
			if i+1 < len(rest) && spec == "" {
				spec, args = rest[i+1], rest[i+2:]
			}
			i = len(rest)
		case a == "-c" || a == "--call":
			return "", false, nil, fmt.Errorf("npx %s (a shell command) is not resolved; run the server's entry point", a)
		case strings.HasPrefix(a, "-"):
			// Other npm options (--quiet, --loglevel=...) do not change
			// what runs.
		default:
			spec, args = a, rest[i+1:]
			i = len(rest)
		}
	}
	if len(pkgs) > 1 {
		return "", false, nil, fmt.Errorf("npx with several --package options is not resolved")
	}
	if len(pkgs) == 1 {
		// npx -p PKG BIN ARGS: spec names the bin, the package is PKG.
		args = append([]string{"\x00bin=" + spec}, args...)
		spec = pkgs[0]
	}
	if spec == "" {
		return "", false, nil, fmt.Errorf("no package named")
	}
	return spec, yes, args, nil
}

// packageName strips the version from a package spec ("@s/p@1.2" ->
// "@s/p"). Specs that are paths, URLs or git remotes are not names.
func packageName(spec string) (string, bool) {
	if strings.ContainsAny(spec, ":") || strings.HasPrefix(spec, ".") || strings.HasPrefix(spec, "/") {
		return "", false
	}
	at := strings.LastIndexByte(spec, '@')
	if at > 0 {
		spec = spec[:at]
	}
	if strings.Count(spec, "/") > 1 || (strings.Contains(spec, "/") && !strings.HasPrefix(spec, "@")) {
		return "", false
	}
	return spec, spec != "" && spec != "@"
}

// npxHelp says what to do when npx cannot be resolved.
const npxHelp = "mcpguard resolves npx before the server is sandboxed, because npx cannot fetch packages under L3. " +
	"Run `npx -y %[1]s --help` once with network (or `npm install %[1]s`), or start the server as `node <path to its entry file>`"

// resolveNpx installs (when -y allows) and finds the package of an npx
// command outside the sandbox, with the user's network and npm
// configuration, and returns `node <entry> ARGS`.
func (r *Resolver) resolveNpx(ctx context.Context, c Command, argv []string, g *grants) ([]string, error) {
	spec, yes, args, err := npxSpec(argv)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnresolved, strings.Join(argv, " "), err)
	}
	help := fmt.Sprintf(npxHelp, spec)
	name, ok := packageName(spec)
	if !ok {
		return nil, fmt.Errorf("%w: npx %s: only registry package names are resolved; %s", ErrUnresolved, spec, help)
	}
	bin := ""
	if len(args) > 0 && strings.HasPrefix(args[0], "\x00bin=") {
		bin, args = strings.TrimPrefix(args[0], "\x00bin="), args[1:]
	}
	npm := filepath.Join(filepath.Dir(argv[0]), "npm")
	if _, err := os.Stat(npm); err != nil {
		if npm, err = lookPath("npm", envValue(c.Env, "PATH"), c.Dir); err != nil {
			return nil, fmt.Errorf("%w: npx %s: npm not found: %v", ErrUnresolved, spec, err)
		}
	}
	yesFlag := "--no"
	if yes {
		yesFlag = "--yes"
	}
	// npm exec puts the package's .bin first on PATH; print it.
	probe := []string{npm, "exec", yesFlag, "--package=" + spec, "--", "node", "-e", "console.log(process.env.PATH)"}
	out, err := r.ask(ctx, 6, Command{Argv: probe, Dir: c.Dir, Env: c.Env})
	if err != nil {
		hint := ""
		if !yes {
			hint = " (npx without -y does not install: add -y)"
		}
		return nil, fmt.Errorf("%w: npx %s could not be resolved%s: %v; %s", ErrUnresolved, spec, hint, err, help)
	}
	binDir := ""
	for _, d := range filepath.SplitList(strings.TrimSpace(string(lastLine(out)))) {
		if filepath.Base(d) == ".bin" && filepath.Base(filepath.Dir(d)) == "node_modules" {
			if _, err := os.Stat(filepath.Join(filepath.Dir(d), filepath.FromSlash(name), "package.json")); err == nil {
				binDir = d
				break
			}
		}
	}
	if binDir == "" {
		return nil, fmt.Errorf("%w: npx %s: npm did not say where it installed the package; %s", ErrUnresolved, spec, help)
	}
	pkg := filepath.Join(filepath.Dir(binDir), filepath.FromSlash(name))
	entry, err := binEntry(pkg, name, bin)
	if err != nil {
		return nil, fmt.Errorf("%w: npx %s: %v; %s", ErrUnresolved, spec, err, help)
	}
	node, err := lookPath("node", envValue(c.Env, "PATH"), c.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: npx %s: %v", ErrUnresolved, spec, err)
	}
	g.note("npx %s resolved to %s %s (package %s)", spec, node, entry, pkg)
	return append([]string{node, entry}, args...), nil
}

// binEntry is the file npx runs for package pkg: the bin named want, the
// only bin, or the bin named after the package (without its scope).
func binEntry(pkg, name, want string) (string, error) {
	b, err := os.ReadFile(filepath.Join(pkg, "package.json"))
	if err != nil {
		return "", err
	}
	var m struct {
		Bin json.RawMessage `json:"bin"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("%s/package.json: %w", pkg, err)
	}
	bins := map[string]string{}
	var one string
	if json.Unmarshal(m.Bin, &one) == nil && one != "" {
		bins[name[strings.LastIndexByte(name, '/')+1:]] = one
	} else if err := json.Unmarshal(m.Bin, &bins); err != nil || len(bins) == 0 {
		return "", fmt.Errorf("package %s has no bin", name)
	}
	pick := want
	if pick == "" {
		if len(bins) == 1 {
			for k := range bins {
				pick = k
			}
		} else {
			pick = name[strings.LastIndexByte(name, '/')+1:]
		}
	}
	rel, ok := bins[pick]
	if !ok {
		return "", fmt.Errorf("package %s has no bin %q", name, pick)
	}
	entry := filepath.Join(pkg, filepath.FromSlash(rel))
	if _, err := os.Stat(entry); err != nil {
		return "", err
	}
	return entry, nil
}
