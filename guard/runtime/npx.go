package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpguard/mcpguard/guard/launch"
)

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

// resolveNpx has npm install the package of an npx command (when -y
// allows) and find it, confined (npxHelper), and returns `node <entry>
// ARGS`.
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
	node := filepath.Join(filepath.Dir(npm), "node")
	if _, err := os.Stat(node); err != nil {
		if node, err = lookPath("node", envValue(c.Env, "PATH"), c.Dir); err != nil {
			return nil, fmt.Errorf("%w: npx %s: %v", ErrUnresolved, spec, err)
		}
	}
	out, err := r.ask(ctx, 6, npxHelper(c, npm, node, spec, yes), npxWitness(name))
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
	g.note("npx %s resolved to %s %s (package %s)", spec, node, entry, pkg)
	return append([]string{node, entry}, args...), nil
}

// npxWitness names the files an npx answer came from: the directories
// on the PATH npm printed and the package's package.json in the
// node_modules of its .bin.
func npxWitness(name string) func([]byte) []string {
	return func(out []byte) []string {
		var paths []string
		for _, d := range filepath.SplitList(strings.TrimSpace(string(lastLine(out)))) {
			if !filepath.IsAbs(d) {
				continue
			}
			paths = append(paths, d)
			if filepath.Base(d) == ".bin" {
				paths = append(paths, filepath.Dir(d), filepath.Join(filepath.Dir(d), filepath.FromSlash(name), "package.json"))
			}
		}
		return paths
	}
}

// npxHelper is `npm exec --package=SPEC -- NODE -e 'print PATH'`, which
// installs the package into npm's cache (when yes) and prints the PATH
// npm runs a package's command with, its .bin directory first. It runs:
//
//   - in an empty directory, with the absolute path of node: in the
//     server's directory npm put its node_modules/.bin first on PATH, and a
//     `node` planted there ran in place of node;
//   - with --ignore-scripts: no install script of the package or its
//     dependencies runs while the guard fetches it (the package's code
//     runs as the server, under L3, and nowhere else);
//   - confined: read-only to node's and npm's trees and npm's
//     configuration files, write access to npm's cache only (where the
//     package goes), TCP to the registry's and proxies' ports and DNS, an
//     environment of npm's own variables (npm_config_*, proxies, CA
//     files) and nothing else of the user's.
func npxHelper(c Command, npm, node, spec string, yes bool) launch.Helper {
	yesFlag := "--no"
	if yes {
		yesFlag = "--yes"
	}
	home := envValue(c.Env, "HOME")
	cache := firstEnv(c.Env, "npm_config_cache", "NPM_CONFIG_CACHE")
	if cache == "" && filepath.IsAbs(home) {
		cache = filepath.Join(home, ".npm")
	}
	var read []string
	for _, p := range []string{npm, node} {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			// The program's package or installation (npm-cli.js's
			// package, nvm's node version).
			read = append(read, filepath.Dir(filepath.Dir(real)))
		}
	}
	read = append(read, filepath.Join(filepath.Dir(filepath.Dir(node)), "etc", "npmrc"), "/etc/npmrc",
		firstEnv(c.Env, "npm_config_userconfig", "NPM_CONFIG_USERCONFIG"), firstEnv(c.Env, "npm_config_globalconfig", "NPM_CONFIG_GLOBALCONFIG"),
		firstEnv(c.Env, "NODE_EXTRA_CA_CERTS"), firstEnv(c.Env, "SSL_CERT_FILE"))
	if filepath.IsAbs(home) {
		read = append(read, filepath.Join(home, ".npmrc"))
	}
	return launch.Helper{
		Argv: []string{npm, "exec", yesFlag, "--ignore-scripts", "--package=" + spec, "--", node, "-e", "console.log(process.env.PATH)"},
		Env: helperEnv(c.Env, []string{filepath.Dir(node)}, "npm_config_", "NPM_CONFIG_", "http_proxy", "https_proxy", "no_proxy",
			"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "NODE_EXTRA_CA_CERTS", "SSL_CERT_"),
		Read:  slices.DeleteFunc(read, func(p string) bool { return !filepath.IsAbs(p) }),
		Exec:  []string{node, "/bin/sh"},
		Write: []string{cache},
		TCP:   registryPorts(c.Env, home),
		UDP:   true, // DNS
	}
}

// registryPorts are the TCP ports a package fetch connects to: the
// registry's (npm_config_registry, a registry= line of ~/.npmrc, else
// npm's default, 443) and the proxies'.
func registryPorts(env []string, home string) []uint16 {
	urls := []string{firstEnv(env, "npm_config_registry", "NPM_CONFIG_REGISTRY"),
		firstEnv(env, "npm_config_https_proxy", "https_proxy", "HTTPS_PROXY"),
		firstEnv(env, "npm_config_proxy", "http_proxy", "HTTP_PROXY")}
	if urls[0] == "" && filepath.IsAbs(home) {
		if b, err := os.ReadFile(filepath.Join(home, ".npmrc")); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if k, v, ok := strings.Cut(l, "="); ok && strings.TrimSpace(k) == "registry" {
					urls[0] = strings.TrimSpace(v)
				}
			}
		}
	}
	if urls[0] == "" {
		urls[0] = "https://registry.npmjs.org/"
	}
	var ports []uint16
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			continue
		}
		p := u.Port()
		if p == "" {
			p = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if n, err := strconv.ParseUint(p, 10, 16); err == nil && !slices.Contains(ports, uint16(n)) {
			ports = append(ports, uint16(n))
		}
	}
	return ports
}

// firstEnv is the first of the named variables set in env.
func firstEnv(env []string, names ...string) string {
	for _, n := range names {
		if v := envValue(env, n); v != "" {
			return v
		}
	}
	return ""
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
