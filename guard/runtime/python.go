package runtime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/mcpguard/mcpguard/guard/launch"
)

// pyPaths is what a Python interpreter reports about where it loads from.
type pyPaths struct {
	Prefix         string   `json:"prefix"`
	BasePrefix     string   `json:"base_prefix"`
	ExecPrefix     string   `json:"exec_prefix"`
	BaseExecPrefix string   `json:"base_exec_prefix"`
	Executable     string   `json:"executable"`
	Version        string   `json:"version"`
	Path           []string `json:"path"`
	// Files are the source and cached files of the modules it imported
	// (what a Cache checks before reusing the answer).
	Files []string `json:"files"`
}

const pyProbe = `import sys, json
print(json.dumps({"prefix": sys.prefix, "base_prefix": sys.base_prefix,
  "exec_prefix": sys.exec_prefix, "base_exec_prefix": sys.base_exec_prefix,
  "executable": sys.executable, "version": "%d.%d" % sys.version_info[:2],
  "path": [p for p in sys.path if p],
  "files": sorted({f for m in list(sys.modules.values())
    for f in (getattr(m, "__file__", None), getattr(m, "__cached__", None)) if isinstance(f, str)})}))`

// pyFlags are the interpreter options of a server's command line that
// change its search path.
type pyFlags struct {
	isolated, ignoreEnv, noUserSite, noSite bool
}

func parsePyFlags(argv []string) pyFlags {
	var f pyFlags
	for _, a := range argv[1:] {
		if !strings.HasPrefix(a, "-") || a == "-m" || a == "-c" {
			break // the script, a module or code: options end
		}
		for _, ch := range strings.TrimPrefix(a, "-") {
			switch ch {
			case 'I':
				f.isolated = true
			case 'E':
				f.ignoreEnv = true
			case 's':
				f.noUserSite = true
			case 'S':
				f.noSite = true
			}
		}
	}
	return f
}

// python grants what a Python interpreter loads. The trees come from the
// interpreter's location, without running anything: a venv's root (the
// directory of its pyvenv.cfg) and its base installation (pyvenv.cfg's
// home), the prefix of the real program; then the user's site directory
// and PYTHONPATH, as the server's options and environment say.
//
// The interpreter is also asked for its search path, isolated (`-I`:
// neither the working directory, nor PYTHON* variables, nor the user's
// site; run in an empty directory) and confined to those trees
// (launch.Helper): a module the server left in its workspace (json.py) is
// never imported, and what a .pth file in a site directory executes can
// read the interpreter's trees and write nothing. What it names outside
// those trees is reported in Notes, never granted.
func (r *Resolver) python(ctx context.Context, c Command, interp string, argv []string, g *grants) {
	trees, venv := pythonTrees(interp)
	for _, t := range trees {
		g.read(t, "python prefix")
	}
	flags := pyFlags{}
	if interp == argv[0] {
		flags = parsePyFlags(argv)
	}
	probe := []string{interp, "-I"}
	if flags.noSite {
		probe = append(probe, "-S")
	}
	out, err := r.ask(ctx, 1, launch.Helper{
		Argv: append(probe, "-c", pyProbe),
		Env:  helperEnv(c.Env, nil),
		Read: trees,
	}, pyWitness(interp))
	var p pyPaths
	switch {
	case err != nil:
		g.note("python %s: asking it (isolated, confined) for its search path failed: %v", interp, err)
	case json.Unmarshal(bytes.TrimSpace(lastLine(out)), &p) != nil:
		g.note("python %s: unreadable sys.path report", interp)
	default:
		inside := func(d string) bool {
			return slices.ContainsFunc(append(slices.Clone(trees), System()...), func(t string) bool { return within(d, t) })
		}
		for _, d := range append([]string{p.Prefix, p.BasePrefix, p.ExecPrefix, p.BaseExecPrefix}, p.Path...) {
			if d != "" && !inside(d) {
				g.note("python %s reports %s, outside its installation's trees: not granted (runtime.read if the server needs it)", interp, d)
			}
		}
	}
	if !flags.isolated && !flags.ignoreEnv {
		for _, d := range filepath.SplitList(envValue(c.Env, "PYTHONPATH")) {
			g.read(d, "PYTHONPATH")
		}
	}
	if site := userSite(c.Env, p.Version, interp, flags, venv); site != "" {
		g.read(site, "python user site")
	}
}

// pyWitness names the files a Python interpreter's answer came from: the
// pyvenv.cfg it would find (present or not), its prefixes and search
// path's directories with the .pth files in them (site.py reads each),
// and the files of the modules it imported.
func pyWitness(interp string) func([]byte) []string {
	return func(out []byte) []string {
		paths := []string{filepath.Join(filepath.Dir(interp), "pyvenv.cfg"), filepath.Join(filepath.Dir(filepath.Dir(interp)), "pyvenv.cfg")}
		var p pyPaths
		if json.Unmarshal(bytes.TrimSpace(lastLine(out)), &p) != nil {
			return paths
		}
		for _, d := range append([]string{p.Prefix, p.BasePrefix, p.ExecPrefix, p.BaseExecPrefix}, p.Path...) {
			if !filepath.IsAbs(d) {
				continue
			}
			paths = append(paths, d)
			pth, _ := filepath.Glob(filepath.Join(d, "*.pth"))
			paths = append(paths, pth...)
		}
		for _, f := range p.Files {
			if filepath.IsAbs(f) {
				paths = append(paths, f)
			}
		}
		return paths
	}
}

// pythonTrees are the trees a Python interpreter loads its standard
// library and site-packages from, as its location says: the venv root
// (the directory holding pyvenv.cfg, beside the program or one level up,
// where Python looks for it), the base installation that pyvenv.cfg's
// `home` names, and the prefix of the real program (two levels above it,
// unless that is / or /usr, which the baseline covers). venv is the venv
// root, "" for none.
func pythonTrees(interp string) (trees []string, venv string) {
	add := func(p string) {
		if p != "" && p != "/" && p != "/usr" && !slices.Contains(trees, p) {
			trees = append(trees, p)
		}
	}
	for _, d := range []string{filepath.Dir(interp), filepath.Dir(filepath.Dir(interp))} {
		cfg := filepath.Join(d, "pyvenv.cfg")
		if _, err := os.Stat(cfg); err != nil {
			continue
		}
		venv = d
		add(d)
		if home := pyvenvHome(cfg); filepath.IsAbs(home) {
			if real, err := filepath.EvalSymlinks(home); err == nil {
				home = real
			}
			add(filepath.Dir(home))
		}
		break
	}
	if real, err := filepath.EvalSymlinks(interp); err == nil {
		add(filepath.Dir(filepath.Dir(real)))
	}
	return trees, venv
}

// pyvenvHome reads the `home` key of a pyvenv.cfg (the base
// interpreter's directory).
func pyvenvHome(cfg string) string {
	f, err := os.Open(cfg)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && strings.TrimSpace(k) == "home" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

var pyVersionName = regexp.MustCompile(`python(\d+\.\d+)`)

// userSite is the user's site-packages directory the server's
// interpreter adds to its path (site.USER_SITE), "" when it adds none:
// isolated (-I) or -s, PYTHONNOUSERSITE (unless -E), inside a venv.
func userSite(env []string, version, interp string, f pyFlags, venv string) string {
	if f.isolated || f.noUserSite || f.noSite || venv != "" {
		return ""
	}
	if !f.ignoreEnv && envValue(env, "PYTHONNOUSERSITE") != "" {
		return ""
	}
	if version == "" {
		real, _ := filepath.EvalSymlinks(interp)
		if m := pyVersionName.FindStringSubmatch(filepath.Base(real)); m != nil {
			version = m[1]
		}
	}
	base := ""
	if !f.ignoreEnv {
		base = envValue(env, "PYTHONUSERBASE")
	}
	if base == "" {
		if home := envValue(env, "HOME"); filepath.IsAbs(home) {
			base = filepath.Join(home, ".local")
		}
	}
	if version == "" || !filepath.IsAbs(base) {
		return ""
	}
	return filepath.Join(base, "lib", "python"+version, "site-packages")
}

func lastLine(b []byte) []byte {
	b = bytes.TrimRight(b, "\n")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}
