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
	run := func(ctx context.Context, c Command) ([]byte, error) {
		asked = append(asked, c.Argv)
		if c.Argv[0] == real && slices.Contains(c.Argv, "-c") {
			return []byte(`{"prefix":"` + filepath.Dir(filepath.Dir(real)) + `","base_prefix":"` + filepath.Dir(filepath.Dir(real)) + `","path":["` + filepath.Dir(filepath.Dir(real)) + `/lib/python3.12"]}` + "\n"), nil
		}
		return runCommand(ctx, c)
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

	var asked []string
	run := func(ctx context.Context, c Command) ([]byte, error) {
		asked = c.Argv
		return []byte("npm warn something\n" + filepath.Join(inst, ".bin") + ":" + filepath.Dir(node) + "\n"), nil
	}
	env := []string{"PATH=" + filepath.Dir(node), "HOME=" + filepath.Join(base, "home")}
	rt, err := New(Options{Run: run}).Resolve(context.Background(), Command{Argv: []string{"npx", "-y", "@modelcontextprotocol/server-memory@2026.8.31", "--flag"}, Dir: base, Env: env})
	require.NoError(t, err)
	assert.Equal(t, []string{node, filepath.Join(pkg, "dist", "index.js"), "--flag"}, rt.Argv)
	assert.Equal(t, []string{npm, "exec", "--yes", "--package=@modelcontextprotocol/server-memory@2026.8.31"}, asked[:4])
	assert.True(t, covered(rt.Read, pkg))
	assert.True(t, covered(rt.Read, filepath.Join(inst, "dep")))

	// npm fails (no network, no such package): an error at once that
	// says what to do.
	fail := func(ctx context.Context, c Command) ([]byte, error) {
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

// A program in runtime.exec runs with its ELF loader, and git is asked
// which configuration files it reads: the global file and what it
// includes are granted read-only, the repository's own config is not.
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

func TestGitOrigins(t *testing.T) {
	out := "file:/etc/gitconfig\tcore.pager=less\nfile:/home/u/.gitconfig\tuser.name=u\n" +
		"command line:\tx=y\nfile:\"/odd\\tname\"\ta=b\nfile:relative\tc=d\n"
	assert.Equal(t, []string{"/etc/gitconfig", "/home/u/.gitconfig"}, gitOrigins([]byte(out)))
}
