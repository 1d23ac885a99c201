package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Python's package runners, uvx (`uv tool run`) and `pipx run`, fetch a
// package from an index into a throw-away environment at every start,
// which cannot work under L3. What they can run without fetching is a
// tool the user installed (`uv tool install PKG`, `pipx install PKG`): a
// venv per package whose bin directory holds the console scripts. The
// resolver runs that entry point in their place (under L3, as the
// server); when the tool is not installed, it says at once how to install
// it. The tools' directories are found from their documented layouts
// without running uv or pipx.
//
// Layouts (uv's "Tools" concept page; pipx's "Configure paths" page):
//   - uv: the tools directory is UV_TOOL_DIR, else
//     $XDG_DATA_HOME/uv/tools, else ~/.local/share/uv/tools (what `uv tool dir`
//     prints); tool PKG is
//     the venv TOOLS/PKG, its commands in TOOLS/PKG/bin.
//   - pipx: venvs live in $PIPX_HOME/venvs (PIPX_HOME, else
//     ~/.local/share/pipx, or ~/.local/pipx where that exists); package
//     PKG is the venv VENVS/PKG, its apps in VENVS/PKG/bin.

// pyToolHelp says what to do when a Python tool cannot be resolved.
const pyToolHelp = "mcpguard cannot let %[1]s fetch packages under L3; install the server once, outside mcpguard and with network " +
	"(`uv tool install %[2]s` or `pipx install %[2]s`), then keep the command or run the installed entry point directly"

// pyToolSpec is what a uvx or pipx command line asks for.
type pyToolSpec struct {
	runner  string // "uvx" or "pipx run"
	pkg     string // the package, normalised (PEP 503)
	version string // a pinned version, "" for any
	command string // the console script to run
	args    []string
}

var pyReqSplit = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(?:(@|==)\s*(\S+))?$`)

// parsePyReq splits "name[extra]@1.2" or "name==1.2" into the normalised
// name, the name as written, and the version.
func parsePyReq(s string) (norm, name, version string, err error) {
	m := pyReqSplit.FindStringSubmatch(s)
	if m == nil {
		return "", "", "", fmt.Errorf("%q is not a package name with an optional @VERSION or ==VERSION", s)
	}
	return normalizePyName(m[1]), m[1], m[4], nil
}

var pyNameRun = regexp.MustCompile(`[-_.]+`)

// normalizePyName is PEP 503's normal form: lower case, runs of -_. as -.
func normalizePyName(s string) string {
	return pyNameRun.ReplaceAllString(strings.ToLower(s), "-")
}

// isPyTool reports whether argv runs a package through uvx (`uv tool
// run`, `uv x`) or pipx.
func isPyTool(argv []string) bool {
	switch filepath.Base(argv[0]) {
	case "uvx", "pipx":
		return true
	case "uv":
		return len(argv) > 1 && (argv[1] == "x" || len(argv) > 2 && argv[1] == "tool" && argv[2] == "run")
	}
	return false
}

// parseUvx reads `uvx [OPTIONS] PKG [ARGS]` (also `uv tool run` and
// `uv x`). Options that change what runs beyond the package (--with,
// --isolated, @latest) cannot be met by an installed tool.
func parseUvx(argv []string) (pyToolSpec, error) {
	sp := pyToolSpec{runner: "uvx"}
	rest := argv[1:]
	if filepath.Base(argv[0]) == "uv" {
		switch {
		case len(rest) >= 2 && rest[0] == "tool" && rest[1] == "run":
			rest = rest[2:]
		case len(rest) >= 1 && rest[0] == "x":
			rest = rest[1:]
		}
	}
	from := ""
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--from":
			if i+1 >= len(rest) {
				return sp, fmt.Errorf("--from needs a package")
			}
			i++
			from = rest[i]
		case strings.HasPrefix(a, "--from="):
			from = strings.TrimPrefix(a, "--from=")
		case a == "--with" || a == "-w" || strings.HasPrefix(a, "--with=") || strings.HasPrefix(a, "--with-"),
			a == "--isolated", a == "--refresh" || strings.HasPrefix(a, "--refresh-"), a == "--reinstall":
			return sp, fmt.Errorf("%s asks uv for an environment other than the installed tool's", a)
		case a == "--python" || a == "-p" || a == "--index" || a == "--index-url" || a == "--default-index" ||
			a == "--cache-dir" || a == "--directory" || a == "--project" || a == "--config-file" || a == "--env-file":
			// Options with a value that do not name the package.
			i++
		case a == "--":
			if i+1 < len(rest) {
				sp.command, sp.args = rest[i+1], rest[i+2:]
			}
			i = len(rest)
		case strings.HasPrefix(a, "-"):
		default:
			sp.command, sp.args = a, rest[i+1:]
			i = len(rest)
		}
	}
	if sp.command == "" {
		return sp, fmt.Errorf("no package named")
	}
	req := sp.command
	if from != "" {
		req = from
	}
	norm, name, version, err := parsePyReq(req)
	if err != nil {
		return sp, err
	}
	if version == "latest" {
		return sp, fmt.Errorf("%s@latest asks uv to fetch the newest release", name)
	}
	sp.pkg, sp.version = norm, version
	if from == "" {
		sp.command = name
	} else if _, cmdName, _, err := parsePyReq(sp.command); err == nil {
		sp.command = cmdName
	}
	return sp, nil
}

// parsePipxRun reads `pipx run [OPTIONS] APP [ARGS]` (--spec names the
// package when it differs from the app).
func parsePipxRun(argv []string) (pyToolSpec, error) {
	sp := pyToolSpec{runner: "pipx run"}
	rest := argv[1:]
	if len(rest) == 0 || rest[0] != "run" {
		return sp, fmt.Errorf("only `pipx run` starts a server")
	}
	rest = rest[1:]
	spec := ""
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--spec":
			if i+1 >= len(rest) {
				return sp, fmt.Errorf("--spec needs a package")
			}
			i++
			spec = rest[i]
		case strings.HasPrefix(a, "--spec="):
			spec = strings.TrimPrefix(a, "--spec=")
		case a == "--python" || a == "--pip-args" || a == "--index-url" || a == "-i":
			i++
		case a == "--":
			if i+1 < len(rest) {
				sp.command, sp.args = rest[i+1], rest[i+2:]
			}
			i = len(rest)
		case strings.HasPrefix(a, "-"):
		default:
			sp.command, sp.args = a, rest[i+1:]
			i = len(rest)
		}
	}
	if sp.command == "" {
		return sp, fmt.Errorf("no app named")
	}
	req := sp.command
	if spec != "" {
		req = spec
	}
	norm, name, version, err := parsePyReq(req)
	if err != nil {
		return sp, err
	}
	sp.pkg, sp.version = norm, version
	if spec == "" {
		sp.command = name
	}
	return sp, nil
}

// resolvePyTool finds the installed entry point of a uvx or pipx command
// and returns `ENTRY ARGS`.
func (r *Resolver) resolvePyTool(c Command, argv []string, g *grants) ([]string, error) {
	var (
		sp   pyToolSpec
		err  error
		dirs []string
	)
	if filepath.Base(argv[0]) == "pipx" {
		sp, err = parsePipxRun(argv)
		if err == nil {
			dirs = pipxVenvs(c)
		}
	} else {
		sp, err = parseUvx(argv)
		if err == nil {
			dirs = uvToolDirs(c)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v; "+pyToolHelp, ErrUnresolved, strings.Join(argv, " "), err, filepath.Base(argv[0]), "PKG")
	}
	help := fmt.Sprintf(pyToolHelp, sp.runner, sp.pkg)
	for _, d := range dirs {
		venv := findPyVenv(d, sp.pkg)
		if venv == "" {
			continue
		}
		entry := filepath.Join(venv, "bin", sp.command)
		fi, err := os.Stat(entry)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("%w: %s %s: the installed tool %s has no command %q; %s", ErrUnresolved, sp.runner, sp.pkg, venv, sp.command, help)
		}
		if sp.version != "" {
			if have := installedPyVersion(venv, sp.pkg); have != sp.version {
				return nil, fmt.Errorf("%w: %s %s: version %s wanted, %s installed in %s; install that version (`uv tool install %s==%s`) or drop the pin",
					ErrUnresolved, sp.runner, sp.pkg, sp.version, orUnknown(have), venv, sp.pkg, sp.version)
			}
		}
		g.note("%s %s resolved to the installed entry point %s", sp.runner, sp.pkg, entry)
		return append([]string{entry}, sp.args...), nil
	}
	looked := strings.Join(dirs, ", ")
	if looked == "" {
		looked = "no tool directory found (HOME unset?)"
	}
	return nil, fmt.Errorf("%w: %s %s: not installed (looked in %s); %s", ErrUnresolved, sp.runner, sp.pkg, looked, help)
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown version"
	}
	return s
}

// uvToolDirs is where uv keeps installed tools, as its documentation
// says (read, not asked: uv is not run outside a sandbox): UV_TOOL_DIR,
// else $XDG_DATA_HOME/uv/tools, else ~/.local/share/uv/tools.
func uvToolDirs(c Command) []string {
	if d := envValue(c.Env, "UV_TOOL_DIR"); filepath.IsAbs(d) {
		return []string{d}
	}
	if d := envValue(c.Env, "XDG_DATA_HOME"); filepath.IsAbs(d) {
		return []string{filepath.Join(d, "uv", "tools")}
	}
	if h := envValue(c.Env, "HOME"); filepath.IsAbs(h) {
		return []string{filepath.Join(h, ".local", "share", "uv", "tools")}
	}
	return nil
}

// pipxVenvs is where pipx keeps installed packages, as its documentation
// says: $PIPX_HOME/venvs, else ~/.local/pipx/venvs where that exists (the
// older location), else ~/.local/share/pipx/venvs.
func pipxVenvs(c Command) []string {
	if d := envValue(c.Env, "PIPX_HOME"); filepath.IsAbs(d) {
		return []string{filepath.Join(d, "venvs")}
	}
	h := envValue(c.Env, "HOME")
	if !filepath.IsAbs(h) {
		return nil
	}
	// The older location wins where it exists (pipx's compatibility rule).
	if fi, err := os.Stat(filepath.Join(h, ".local", "pipx")); err == nil && fi.IsDir() {
		return []string{filepath.Join(h, ".local", "pipx", "venvs")}
	}
	return []string{filepath.Join(h, ".local", "share", "pipx", "venvs")}
}

// findPyVenv is the venv of package pkg (normalised) under dir: the
// directory named after it in any spelling that normalises to it.
func findPyVenv(dir, pkg string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range ents {
		if !e.IsDir() || normalizePyName(e.Name()) != pkg {
			continue
		}
		v := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(v, "pyvenv.cfg")); err == nil {
			return v
		}
	}
	return ""
}

// installedPyVersion reads the version of pkg from its dist-info
// directory in the venv's site-packages, "" when there is none.
func installedPyVersion(venv, pkg string) string {
	dists, _ := filepath.Glob(filepath.Join(venv, "lib", "python*", "site-packages", "*.dist-info"))
	for _, d := range dists {
		base := strings.TrimSuffix(filepath.Base(d), ".dist-info")
		i := strings.LastIndexByte(base, '-')
		if i <= 0 || normalizePyName(base[:i]) != pkg {
			continue
		}
		return base[i+1:]
	}
	return ""
}
