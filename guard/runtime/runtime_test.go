package runtime

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/launch"
)

func write(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(body), mode))
}

// covered reports whether p is one of trees or below one.
func covered(trees []string, p string) bool {
	return slices.ContainsFunc(trees, func(t string) bool { return within(p, t) })
}

// fakeNode is a stand-in interpreter named node: a #! script, so that the
// test needs no Node.js.
func fakeNode(t *testing.T, dir string) string {
	node := filepath.Join(dir, "nodejs", "bin", "node")
	write(t, node, "#!/bin/sh\nexit 0\n", 0o755)
	return node
}

// A package installed the way npm does it: its dependencies hoisted two
// levels up, one nested, a scoped one, and an unrelated sibling that must
// stay out.
func TestNodeHoistedDependencies(t *testing.T) {
	base := t.TempDir()
	node := fakeNode(t, base)
	nm := filepath.Join(base, "prefix", "node_modules")
	pkg := filepath.Join(nm, "@acme", "server")
	write(t, filepath.Join(pkg, "package.json"), `{"name":"@acme/server","bin":{"acme-server":"dist/index.js"},"dependencies":{"dep-a":"1","@s/dep-c":"1"}}`, 0o644)
	write(t, filepath.Join(pkg, "dist", "package.json"), `{"type":"module"}`, 0o644)
	entry := filepath.Join(pkg, "dist", "index.js")
	write(t, entry, "#!/usr/bin/env node\n", 0o755)
	write(t, filepath.Join(nm, "dep-a", "package.json"), `{"name":"dep-a","dependencies":{"dep-b":"2"}}`, 0o644)
	write(t, filepath.Join(nm, "dep-b", "package.json"), `{"name":"dep-b","version":"1"}`, 0o644)
	// dep-a's own dep-b wins over the hoisted one, as in node.
	write(t, filepath.Join(nm, "dep-a", "node_modules", "dep-b", "package.json"), `{"name":"dep-b","version":"2"}`, 0o644)
	write(t, filepath.Join(nm, "@s", "dep-c", "package.json"), `{"name":"@s/dep-c"}`, 0o644)
	write(t, filepath.Join(nm, "unrelated", "package.json"), `{"name":"unrelated"}`, 0o644)
	bin := filepath.Join(nm, ".bin", "acme-server")
	require.NoError(t, os.MkdirAll(filepath.Dir(bin), 0o755))
	require.NoError(t, os.Symlink("../@acme/server/dist/index.js", bin))

	env := []string{"PATH=" + filepath.Dir(node), "HOME=/nonexistent"}
	for _, argv := range [][]string{
		{node, entry, "/data"},
		{bin, "/data"}, // node_modules/.bin/NAME, #!/usr/bin/env node
	} {
		rt, err := New(Options{}).Resolve(context.Background(), Command{Argv: argv, Dir: base, Env: env})
		require.NoError(t, err, argv)
		for _, want := range []string{pkg, filepath.Join(nm, "dep-a"), filepath.Join(nm, "dep-a", "node_modules", "dep-b"), filepath.Join(nm, "@s", "dep-c")} {
			assert.True(t, covered(rt.Read, want), "%v: %s readable (%v)", argv, want, rt.Read)
		}
		for _, not := range []string{filepath.Join(nm, "unrelated"), filepath.Join(nm, "dep-b"), "/data", base} {
			assert.False(t, covered(rt.Read, not), "%v: %s must not be readable (%v)", argv, not, rt.Read)
		}
		assert.Contains(t, rt.Exec, node, "the interpreter runs")
	}
	rt, err := New(Options{}).Resolve(context.Background(), Command{Argv: []string{bin}, Dir: base, Env: env})
	require.NoError(t, err)
	assert.Contains(t, rt.Exec, "/usr/bin/env", "#!/usr/bin/env node: env runs")
	assert.Contains(t, rt.Exec, node, "and so does the node it finds on PATH")
}

// A version manager's shim is asked which program it runs, and the real
// program replaces it, so that neither bash nor the manager is granted.
func TestShimResolved(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, ".pyenv")
	manager := filepath.Join(root, "libexec", "pyenv")
	real := filepath.Join(root, "versions", "3.12.1", "bin", "python3.12")
	write(t, real, "#!/bin/sh\n", 0o755)
	write(t, manager, "#!/bin/sh\n[ \"$1\" = which ] && echo "+real+"\n", 0o755)
	shim := filepath.Join(root, "shims", "python3")
	write(t, shim, "#!/usr/bin/env bash\nset -e\nprogram=\"${0##*/}\"\nexec \""+manager+"\" exec \"$program\" \"$@\"\n", 0o755)
	script := filepath.Join(base, "srv", "server.py")
	write(t, script, "print(1)\n", 0o644)

	var asked [][]string
	run := func(ctx context.Context, h launch.Helper) ([]byte, error) {
		asked = append(asked, h.Argv)
		if h.Argv[0] == real && slices.Contains(h.Argv, "-c") {
			return []byte(`{"prefix":"` + filepath.Dir(filepath.Dir(real)) + `","base_prefix":"` + filepath.Dir(filepath.Dir(real)) + `","path":["` + filepath.Dir(filepath.Dir(real)) + `/lib/python3.12"]}` + "\n"), nil
		}
		return h.Output(ctx)
	}
	env := []string{"PATH=" + filepath.Dir(shim) + ":/usr/bin:/bin", "HOME=" + base}
	rt, err := New(Options{Run: run}).Resolve(context.Background(), Command{Argv: []string{"python3", "-u", script}, Dir: base, Env: env})
	require.NoError(t, err)
	assert.Equal(t, []string{real, "-u", script}, rt.Argv)
	assert.Contains(t, asked, []string{manager, "which", "python3"})
	assert.NotContains(t, rt.Exec, manager)
	assert.NotContains(t, rt.Exec, shim)
	assert.True(t, covered(rt.Read, filepath.Join(root, "versions", "3.12.1")), "the interpreter's prefix, as it reported it: %v", rt.Read)
	assert.True(t, covered(rt.Read, filepath.Dir(script)))
	assert.False(t, covered(rt.Read, base), "HOME itself never: %v", rt.Read)

	// A script whose #! finds the shim on PATH gets the real interpreter too.
	tool := filepath.Join(base, "srv", "tool.py")
	write(t, tool, "#!/usr/bin/env python3\nprint(1)\n", 0o755)
	rt, err = New(Options{Run: run}).Resolve(context.Background(), Command{Argv: []string{tool, "x"}, Dir: base, Env: env})
	require.NoError(t, err)
	assert.Equal(t, []string{real, tool, "x"}, rt.Argv)
}

// A real venv outside the script's directory: the interpreter says where
// it loads from, pyvenv.cfg and site-packages included.
func TestPythonVenv(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(py, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Skipf("python3 -m venv unavailable (Debian: apt-get install python3-venv): %v: %s", err, out)
	}
	script := filepath.Join(t.TempDir(), "srv", "server.py")
	write(t, script, "print(1)\n", 0o644)
	rt, err := New(Options{}).Resolve(context.Background(), Command{Argv: []string{filepath.Join(venv, "bin", "python"), script}, Env: append(os.Environ(), "HOME=/nonexistent")})
	require.NoError(t, err)
	assert.True(t, covered(rt.Read, filepath.Join(venv, "pyvenv.cfg")), "%v", rt.Read)
	sp, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
	require.NotEmpty(t, sp)
	assert.True(t, covered(rt.Read, sp[0]))
	out, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import sys; print(sys.base_prefix)").Output()
	require.NoError(t, err)
	assert.True(t, covered(rt.Read, strings.TrimSpace(string(out))), "the base interpreter's prefix: %v", rt.Read)
}

func TestNpxResolved(t *testing.T) {
	base := t.TempDir()
	node := fakeNode(t, base)
	npm := filepath.Join(base, "nodejs", "bin", "npm")
	write(t, npm, "#!/bin/sh\n", 0o755)
	npx := filepath.Join(base, "nodejs", "bin", "npx")
	write(t, npx, "#!/bin/sh\n", 0o755)
	inst := filepath.Join(base, "cache", "_npx", "abc123", "node_modules")
	pkg := filepath.Join(inst, "@modelcontextprotocol", "server-memory")
	write(t, filepath.Join(pkg, "package.json"), `{"name":"@modelcontextprotocol/server-memory","bin":{"mcp-server-memory":"dist/index.js"},"dependencies":{"dep":"1"}}`, 0o644)
	write(t, filepath.Join(pkg, "dist", "index.js"), "#!/usr/bin/env node\n", 0o755)
	write(t, filepath.Join(inst, "dep", "package.json"), `{"name":"dep"}`, 0o644)

	var asked launch.Helper
	run := func(ctx context.Context, h launch.Helper) ([]byte, error) {
		asked = h
		return []byte("npm warn something\n" + filepath.Join(inst, ".bin") + ":" + filepath.Dir(node) + "\n"), nil
	}
	env := []string{"PATH=" + filepath.Dir(node), "HOME=" + filepath.Join(base, "home")}
	rt, err := New(Options{Run: run}).Resolve(context.Background(), Command{Argv: []string{"npx", "-y", "@modelcontextprotocol/server-memory@2026.8.31", "--flag"}, Dir: base, Env: env})
	require.NoError(t, err)
	assert.Equal(t, []string{node, filepath.Join(pkg, "dist", "index.js"), "--flag"}, rt.Argv)
	assert.Equal(t, []string{npm, "exec", "--yes", "--ignore-scripts", "--package=@modelcontextprotocol/server-memory@2026.8.31", "--", node}, asked.Argv[:7])
	assert.Empty(t, asked.Dir, "npm runs in an empty directory of its own, not the server's")
	assert.Equal(t, []string{filepath.Join(base, "home", ".npm")}, asked.Write, "npm writes its cache and nothing else")
	assert.Equal(t, []uint16{443}, asked.TCP, "the registry's port")
	assert.True(t, covered(rt.Read, pkg))
	assert.True(t, covered(rt.Read, filepath.Join(inst, "dep")))

	// npm fails (no network, no such package): an error at once that
	// says what to do.
	fail := func(ctx context.Context, h launch.Helper) ([]byte, error) {
		return nil, errors.New("npm error 404 Not Found")
	}
	_, err = New(Options{Run: fail}).Resolve(context.Background(), Command{Argv: []string{"npx", "-y", "no-such-pkg"}, Dir: base, Env: env})
	require.ErrorIs(t, err, ErrUnresolved)
	assert.Contains(t, err.Error(), "404")
	assert.Contains(t, err.Error(), "npx -y no-such-pkg --help")
	_, err = New(Options{Run: fail}).Resolve(context.Background(), Command{Argv: []string{"npx", "no-such-pkg"}, Dir: base, Env: env})
	assert.Contains(t, err.Error(), "add -y")
}

func TestNpxSpec(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		spec string
		yes  bool
		args []string
	}{
		{[]string{"npx", "-y", "@a/b", "/ws"}, "@a/b", true, []string{"/ws"}},
		{[]string{"npx", "--yes", "pkg@1.2", "--", "-x"}, "pkg@1.2", true, []string{"--", "-x"}},
		{[]string{"npm", "exec", "--", "pkg", "a"}, "pkg", false, []string{"a"}},
		{[]string{"npx", "-p", "pkg", "bin", "a"}, "pkg", false, []string{"\x00bin=bin", "a"}},
	} {
		spec, yes, args, err := npxSpec(tc.argv)
		require.NoError(t, err, tc.argv)
		assert.Equal(t, tc.spec, spec)
		assert.Equal(t, tc.yes, yes)
		assert.Equal(t, tc.args, args)
	}
	for _, bad := range [][]string{{"npx"}, {"npx", "-y"}, {"npx", "-c", "echo"}, {"npx", "-p"}} {
		_, _, _, err := npxSpec(bad)
		assert.Error(t, err, bad)
	}
	for spec, want := range map[string]string{"@a/b@1": "@a/b", "a@latest": "a", "a": "a", "./x": "", "git+https://x": "", "a/b": ""} {
		got, ok := packageName(spec)
		assert.Equal(t, want, got, spec)
		assert.Equal(t, want != "", ok, spec)
	}
}

func TestUnresolvable(t *testing.T) {
	_, err := New(Options{}).Resolve(context.Background(), Command{Argv: []string{"no-such-program"}, Env: []string{"PATH=/nonexistent"}})
	require.ErrorIs(t, err, ErrUnresolved)
	_, err = New(Options{}).Resolve(context.Background(), Command{Argv: []string{"/bin/sh", "x"}, Env: []string{"PATH=/nonexistent"}, Dir: "/"})
	require.NoError(t, err)
	_, err = New(Options{}).Resolve(context.Background(), Command{})
	require.ErrorIs(t, err, ErrUnresolved)
}

func TestEnvTarget(t *testing.T) {
	assert.Equal(t, "node", envTarget([]string{"node"}))
	assert.Equal(t, "node", envTarget([]string{"-S", "node", "--x"}))
	assert.Equal(t, "node", envTarget([]string{"-Snode --x"}))
	assert.Equal(t, "python3", envTarget([]string{"A=1", "-i", "python3"}))
	assert.Equal(t, "p", envTarget([]string{"-u", "X", "p"}))
	assert.Equal(t, "", envTarget(nil))
}

func FuzzNpxSpec(f *testing.F) {
	f.Add("npx\x00-y\x00@a/b@1\x00/ws")
	f.Add("npm\x00exec\x00-p\x00x\x00y")
	f.Fuzz(func(t *testing.T, s string) {
		argv := strings.Split(s, "\x00")
		spec, _, _, err := npxSpec(argv)
		if err == nil && spec == "" {
			t.Fatalf("no error and no spec for %q", argv)
		}
		packageName(spec)
		envTarget(argv)
	})
}

// A package.json in $HOME above a script is not a package to grant: the
// script's own directory is granted instead.
func TestNodeStrayPackageInHome(t *testing.T) {
	home := t.TempDir()
	node := fakeNode(t, t.TempDir())
	write(t, filepath.Join(home, "package.json"), `{"name":"my-home"}`, 0o644)
	script := filepath.Join(home, "srv", "js", "server.js")
	write(t, script, "", 0o644)
	rt, err := New(Options{}).Resolve(context.Background(), Command{Argv: []string{node, script}, Dir: home, Env: []string{"HOME=" + home, "PATH=/usr/bin"}})
	require.NoError(t, err)
	assert.True(t, covered(rt.Read, filepath.Dir(script)), "%v", rt.Read)
	assert.False(t, covered(rt.Read, home), "%v", rt.Read)
}

// A program in runtime.exec runs with its ELF loader, and git's
// configuration files are found where git-config(1) says: the global file
// and what it includes are granted read-only, the repository's own config
// is not.
func TestHelperGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	home := t.TempDir()
	extra := filepath.Join(t.TempDir(), "extra.cfg")
	write(t, extra, "[user]\n\tname = compat\n", 0o644)
	write(t, filepath.Join(home, ".gitconfig"), "[include]\n\tpath = "+extra+"\n", 0o644)
	write(t, filepath.Join(home, ".config", "git", "ignore"), "*.swp\n", 0o644)
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + home}
	rt, err := New(Options{ExtraExec: []string{git}}).Resolve(context.Background(), Command{Argv: []string{"/bin/true"}, Dir: t.TempDir(), Env: env})
	require.NoError(t, err)
	assert.Contains(t, rt.Exec, git)
	chain, err := Interpreters(git, "/usr/bin:/bin")
	require.NoError(t, err)
	for _, c := range chain {
		assert.Contains(t, rt.Exec, c, "git's loader runs too")
	}
	for _, f := range []string{filepath.Join(home, ".gitconfig"), extra, filepath.Join(home, ".config", "git", "ignore")} {
		assert.True(t, covered(rt.Read, f), "%s readable (%v)", f, rt.Read)
	}
	if _, err := os.Stat("/etc/gitconfig"); err == nil {
		assert.True(t, covered(rt.Read, "/etc/gitconfig"))
	}
	assert.False(t, covered(rt.Read, home), "only the files, not $HOME")
	assert.False(t, covered(rt.Read, filepath.Join(home, ".config", "git", "credentials")))
}

func TestGitIncludes(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gitconfig")
	write(t, cfg, "[user]\n\tname = u\n\tpath = /not/an/include\n[include]\n\tpath = ~/extra.cfg\n"+
		"[includeIf \"gitdir:~/work/\"]\n\tpath = work.cfg\n[Include]\n  PATH = \"/abs/x.cfg\"\n", 0o644)
	assert.Equal(t, []string{"/home/u/extra.cfg", filepath.Join(dir, "work.cfg"), "/abs/x.cfg"}, gitIncludes(cfg, "/home/u"))
}

// A package's node_modules is data its author controls: a dependency
// symlinked out of the package's tree (to another project beside a
// canary, to one under $HOME) is not granted; one symlinked inside it
// (pnpm's node_modules/.pnpm store) or into the workspace root that
// declares the package (npm workspaces link members) is.
func TestNodeDependencySymlink(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	node := fakeNode(t, base)
	outside := filepath.Join(base, "outside")
	write(t, filepath.Join(outside, "package.json"), `{"name":"data"}`, 0o644)
	write(t, filepath.Join(outside, "canary.txt"), "CANARY", 0o644)
	project := filepath.Join(home, "work", "app")
	write(t, filepath.Join(project, "package.json"), `{"name":"app"}`, 0o644)
	write(t, filepath.Join(project, ".env"), "DB_PASSWORD=x", 0o644)

	pkg := filepath.Join(base, "srv", "pkg")
	write(t, filepath.Join(pkg, "package.json"), `{"name":"evil","dependencies":{"data":"1","app":"1","inner":"1","pn":"1"}}`, 0o644)
	entry := filepath.Join(pkg, "index.js")
	write(t, entry, "", 0o644)
	nm := filepath.Join(pkg, "node_modules")
	require.NoError(t, os.MkdirAll(nm, 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(nm, "data")))
	require.NoError(t, os.Symlink(project, filepath.Join(nm, "app")))
	// pnpm: node_modules/pn -> .pnpm/pn@1/node_modules/pn, whose own
	// dependency is a sibling symlink in the store.
	store := filepath.Join(nm, ".pnpm")
	write(t, filepath.Join(store, "pn@1", "node_modules", "pn", "package.json"), `{"name":"pn","dependencies":{"pd":"1"}}`, 0o644)
	write(t, filepath.Join(store, "pd@1", "node_modules", "pd", "package.json"), `{"name":"pd"}`, 0o644)
	require.NoError(t, os.Symlink(".pnpm/pn@1/node_modules/pn", filepath.Join(nm, "pn")))
	require.NoError(t, os.Symlink("../../pd@1/node_modules/pd", filepath.Join(store, "pn@1", "node_modules", "pd")))
	// A vendored package inside the tree, linked from node_modules.
	write(t, filepath.Join(pkg, "vendor", "inner", "package.json"), `{"name":"inner"}`, 0o644)
	require.NoError(t, os.Symlink("../vendor/inner", filepath.Join(nm, "inner")))

	env := []string{"PATH=" + filepath.Dir(node), "HOME=" + home}
	rt, err := New(Options{}).Resolve(context.Background(), Command{Argv: []string{node, entry}, Dir: base, Env: env})
	require.NoError(t, err)
	for _, not := range []string{outside, project} {
		assert.False(t, covered(rt.Read, not), "%s must not be readable (%v)", not, rt.Read)
	}
	assert.Contains(t, strings.Join(rt.Notes, "\n"), outside+" of "+pkg+" not granted")
	for _, want := range []string{pkg, filepath.Join(store, "pd@1", "node_modules", "pd"), filepath.Join(pkg, "vendor", "inner")} {
		assert.True(t, covered(rt.Read, want), "%s readable (%v)", want, rt.Read)
	}

	// The same link from the package's own node_modules into the tree
	// outside it is refused whatever the dependency's name: the rule is
	// where the real path lies, not what the link is called.
	rt, err = New(Options{ExtraRead: []string{outside}}).Resolve(context.Background(), Command{Argv: []string{node, entry}, Dir: base, Env: env})
	require.NoError(t, err)
	assert.True(t, covered(rt.Read, outside), "runtime.read still grants it: %v", rt.Read)
}

// npm workspaces: the root's node_modules links each member; a member
// server's dependency on its sibling resolves through that link into the
// workspace's own tree, and is granted. A link out of the workspace is not.
func TestNodeWorkspaceSibling(t *testing.T) {
	base := t.TempDir()
	node := fakeNode(t, base)
	repo := filepath.Join(base, "repo")
	write(t, filepath.Join(repo, "package.json"), `{"name":"mono","private":true,"workspaces":["packages/*"]}`, 0o644)
	srv := filepath.Join(repo, "packages", "server")
	write(t, filepath.Join(srv, "package.json"), `{"name":"@m/server","dependencies":{"@m/lib":"*","hoisted":"1","far":"1"}}`, 0o644)
	write(t, filepath.Join(srv, "dist", "index.js"), "", 0o644)
	lib := filepath.Join(repo, "packages", "lib")
	write(t, filepath.Join(lib, "package.json"), `{"name":"@m/lib"}`, 0o644)
	write(t, filepath.Join(repo, "node_modules", "hoisted", "package.json"), `{"name":"hoisted"}`, 0o644)
	far := filepath.Join(base, "elsewhere", "far")
	write(t, filepath.Join(far, "package.json"), `{"name":"far"}`, 0o644)
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "node_modules", "@m"), 0o755))
	require.NoError(t, os.Symlink("../../packages/lib", filepath.Join(repo, "node_modules", "@m", "lib")))
	require.NoError(t, os.Symlink("../../packages/server", filepath.Join(repo, "node_modules", "@m", "server")))
	require.NoError(t, os.Symlink(far, filepath.Join(repo, "node_modules", "far")))

	env := []string{"PATH=" + filepath.Dir(node), "HOME=/nonexistent"}
	rt, err := New(Options{}).Resolve(context.Background(), Command{Argv: []string{node, filepath.Join(srv, "dist", "index.js")}, Dir: base, Env: env})
	require.NoError(t, err)
	for _, want := range []string{srv, lib, filepath.Join(repo, "node_modules", "hoisted")} {
		assert.True(t, covered(rt.Read, want), "%s readable (%v)", want, rt.Read)
	}
	assert.False(t, covered(rt.Read, far), "%v", rt.Read)
	assert.False(t, covered(rt.Read, repo), "the workspace root is trusted for links, not granted: %v", rt.Read)
}

// ELFInterpreter reads a dynamic program's loader, and nothing from a
// static program or a script.
func TestELFInterpreter(t *testing.T) {
	interp, err := ELFInterpreter("/usr/bin/true")
	require.NoError(t, err)
	assert.Contains(t, interp, "ld-linux", "coreutils' true is dynamic")
	script := filepath.Join(t.TempDir(), "s")
	write(t, script, "#!/bin/sh\ntrue\n", 0o755)
	got, err := ELFInterpreter(script)
	require.NoError(t, err)
	assert.Empty(t, got)
	loader, err := filepath.EvalSymlinks(interp)
	require.NoError(t, err)
	got, err = ELFInterpreter(loader)
	require.NoError(t, err)
	assert.Empty(t, got, "the loader itself has none")
}
