package runtime

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpguard/mcpguard/guard/baseline"
)

// nodeRuntime grants what node needs for code: the interpreter's own
// prefix (nvm, asdf and tarball installs keep modules beside it), the
// package that holds the entry file, and every package its dependencies
// resolve to, found as node finds them (node_modules directories from the
// requiring package's real path upward), recursively. NODE_PATH entries
// are searched too, as node does.
//
// A dependency is granted only where its real path lies in a tree the
// resolver trusts (nodeTrust): the package's own files are data its
// author controls, and a symlink shipped in its node_modules must not
// make another directory (the user's other project, ~/.ssh) a runtime
// tree.
//
// It reports whether code is in a package.
func nodeRuntime(node, code string, env []string, g *grants) bool {
	prefix := ""
	if real, err := filepath.EvalSymlinks(node); err == nil {
		prefix = filepath.Dir(filepath.Dir(real))
		if prefix != "/usr" && prefix != "/" {
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
	trust := nodeTrust(root, prefix, env, nodePath)
	seen := map[string]bool{}
	var walk func(pkg string, depth int)
	walk = func(pkg string, depth int) {
		if seen[pkg] || depth > 64 {
			return
		}
		seen[pkg] = true
		g.read(pkg, "node package")
		for _, dep := range dependencies(pkg) {
			d := resolvePackage(pkg, dep, nodePath)
			if d == "" || !g.derived(pkg, d, "node dependency") {
				continue
			}
			if !slices.ContainsFunc(trust, func(t string) bool { return within(d, t) }) {
				g.note("node dependency %s of %s not granted: its real path lies outside the package's tree and node's install (a symlink the package ships?); list it in runtime.read if it is meant", d, pkg)
				continue
			}
			walk(d, depth+1)
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

// nodeTrust lists the trees (real paths) a dependency of the package at
// root may resolve into and be granted:
//
//   - root itself, which holds its own node_modules (and pnpm's
//     node_modules/.pnpm store, where pnpm's symlinks point);
//   - the node_modules directories node searches from root upward: where
//     the installer (npm, npx, pnpm, a workspace's hoisting) put the
//     package's dependencies beside it. The package did not write them;
//     its files are only below root;
//   - the workspace root above root (a package.json declaring
//     "workspaces", or pnpm-workspace.yaml), whose node_modules links to
//     its member packages: the user's checkout, not the package's files;
//     never $HOME or / themselves;
//   - NODE_PATH, node's install prefix and npm's global prefix
//     (NPM_CONFIG_PREFIX, prefix= in ~/.npmrc, else node's), and the
//     system baseline: trees the system, not the package, names, and
//     which are readable already.
//
// Anything else (a symlink the package ships, pointing at another
// project or at ~/.ssh) is not followed; a package linked from elsewhere
// (npm link's source checkout) needs runtime.read.
func nodeTrust(root, prefix string, env, nodePath []string) []string {
	trees := append([]string{root}, searchDirs(root)...)
	if w := workspaceRoot(root, envValue(env, "HOME")); w != "" {
		trees = append(trees, w)
	}
	trees = append(trees, nodePath...)
	if prefix != "" && prefix != "/" {
		if prefix == "/usr" {
			trees = append(trees, "/usr/lib/node_modules", "/usr/lib/node")
		} else {
			trees = append(trees, prefix)
		}
	}
	if p := npmPrefix(env); p != "" {
		trees = append(trees, filepath.Join(p, "lib", "node_modules"))
	}
	trees = append(trees, baseline.System()...)
	var out []string
	for _, t := range trees {
		if !filepath.IsAbs(t) {
			continue
		}
		if real, err := filepath.EvalSymlinks(t); err == nil {
			out = append(out, real)
		}
	}
	return out
}

// workspaceRoot is the nearest directory strictly above root that declares
// a workspace (npm's and yarn's "workspaces" in package.json, pnpm's
// pnpm-workspace.yaml), "" when there is none or it would be $HOME or /.
func workspaceRoot(root, home string) string {
	for d := filepath.Dir(root); filepath.Dir(d) != d; d = filepath.Dir(d) {
		if home != "" && within(home, d) {
			return ""
		}
		if _, err := os.Stat(filepath.Join(d, "pnpm-workspace.yaml")); err == nil {
			return d
		}
		b, err := os.ReadFile(filepath.Join(d, "package.json"))
		if err != nil {
			continue
		}
		var m struct {
			Workspaces json.RawMessage `json:"workspaces"`
		}
		if json.Unmarshal(b, &m) == nil && len(m.Workspaces) > 0 && string(m.Workspaces) != "null" {
			return d
		}
	}
	return ""
}

// npmPrefix is npm's global prefix as the user configured it: the
// environment's npm_config_prefix (any case), else prefix= in ~/.npmrc;
// "" when neither says (npm then uses node's prefix).
func npmPrefix(env []string) string {
	for _, kv := range slices.Backward(env) {
		k, v, _ := strings.Cut(kv, "=")
		if strings.EqualFold(k, "npm_config_prefix") && v != "" {
			return v
		}
	}
	home := envValue(env, "HOME")
	if home == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(home, ".npmrc"))
	if err != nil {
		return ""
	}
	p := ""
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == "prefix" {
			p = strings.TrimSpace(v)
		}
	}
	if strings.HasPrefix(p, "~/") {
		p = filepath.Join(home, p[2:])
	}
	return p
}

// searchDirs are the node_modules directories node searches for a
// package required from inside pkg: pkg/node_modules, then each
// ancestor's (never node_modules/node_modules).
func searchDirs(pkg string) []string {
	var dirs []string
	for d := pkg; ; d = filepath.Dir(d) {
		if filepath.Base(d) != "node_modules" {
			dirs = append(dirs, filepath.Join(d, "node_modules"))
		}
		if filepath.Dir(d) == d {
			return dirs
		}
	}
}

// resolvePackage finds package name as node's resolver does from inside
// pkg: pkg/node_modules/name, then each ancestor's node_modules, then
// NODE_PATH. It returns the real path of the package's directory.
func resolvePackage(pkg, name string, nodePath []string) string {
	dirs := append(searchDirs(pkg), nodePath...)
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
