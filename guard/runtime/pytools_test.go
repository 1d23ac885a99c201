package runtime

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakePyTool installs package pkg the way `uv tool install` and `pipx
// install` lay it out, without an index: a venv at dir/venvName made by
// python3 -m venv, the package's dist-info, a module, and a console
// script.
func fakePyTool(t *testing.T, dir, venvName, module, script, version string) string {
	t.Helper()
	venv := filepath.Join(dir, venvName)
	out, err := exec.Command("/usr/bin/python3", "-m", "venv", "--without-pip", venv).CombinedOutput()
	if err != nil {
		t.Skipf("python3 -m venv: %v: %s", err, out)
	}
	site, err := filepath.Glob(filepath.Join(venv, "lib", "python*", "site-packages"))
	require.NoError(t, err)
	require.Len(t, site, 1)
	write(t, filepath.Join(site[0], module, "__init__.py"), "def main():\n    import sys\n    print('tool ran', *sys.argv[1:])\n", 0o644)
	require.NoError(t, os.MkdirAll(filepath.Join(site[0], module+"-"+version+".dist-info"), 0o755))
	write(t, filepath.Join(venv, "bin", script), "#!"+filepath.Join(venv, "bin", "python")+"\nimport sys\nfrom "+module+" import main\nsys.exit(main())\n", 0o755)
	return venv
}

func TestUvxInstalledTool(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	base := t.TempDir()
	bin := filepath.Join(base, "bin")
	// uvx itself never runs: a stand-in that would fail if it did.
	write(t, filepath.Join(bin, "uvx"), "#!/bin/sh\necho uvx must not run >&2\nexit 9\n", 0o755)
	tools := filepath.Join(base, "uv-tools")
	venv := fakePyTool(t, tools, "mcp-server-fetch", "mcp_server_fetch", "mcp-server-fetch", "1.2.0")
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + filepath.Join(base, "home"), "UV_TOOL_DIR=" + tools}
	res := New(Options{})
	entry := filepath.Join(venv, "bin", "mcp-server-fetch")
	for _, argv := range [][]string{
		{"uvx", "mcp-server-fetch", "--ws", "/data"},
		{"uvx", "mcp-server-fetch@1.2.0", "--ws", "/data"},
		{"uvx", "--from", "MCP_Server.Fetch==1.2.0", "mcp-server-fetch", "--ws", "/data"},
		{"uvx", "-q", "--python", "3.11", "mcp-server-fetch", "--ws", "/data"},
	} {
		rt, err := res.Resolve(context.Background(), Command{Argv: argv, Dir: base, Env: env})
		require.NoError(t, err, argv)
		assert.Equal(t, []string{entry, "--ws", "/data"}, rt.Argv, argv)
		assert.Contains(t, rt.Exec, filepath.Join(venv, "bin", "python"), "the venv's interpreter runs")
		site, _ := filepath.Glob(filepath.Join(venv, "lib", "python*", "site-packages"))
		assert.True(t, covered(rt.Read, site[0]), "site-packages readable: %v", rt.Read)
		assert.False(t, covered(rt.Exec, filepath.Join(bin, "uvx")), "uvx is not granted")
	}
	// The resolved command runs, without uvx.
	rt, err := res.Resolve(context.Background(), Command{Argv: []string{"uvx", "mcp-server-fetch", "hi"}, Dir: base, Env: env})
	require.NoError(t, err)
	out, err := exec.Command(rt.Argv[0], rt.Argv[1:]...).Output()
	require.NoError(t, err)
	assert.Equal(t, "tool ran hi\n", string(out))

	// What an installed tool cannot give is refused at once, saying what to do.
	for argv, want := range map[string]string{
		"uvx not-installed":                    "uv tool install not-installed",
		"uvx mcp-server-fetch@9.9":             "9.9 wanted, 1.2.0 installed",
		"uvx mcp-server-fetch@latest":          "fetch the newest",
		"uvx --with requests mcp-server-fetch": "other than the installed tool's",
		"uvx --from mcp-server-fetch nope":     `no command "nope"`,
	} {
		_, err := res.Resolve(context.Background(), Command{Argv: strings.Fields(argv), Dir: base, Env: env})
		require.ErrorIs(t, err, ErrUnresolved, argv)
		assert.Contains(t, err.Error(), want, argv)
	}
}

func TestPipxRunInstalledTool(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	base := t.TempDir()
	bin := filepath.Join(base, "bin")
	// pipx answers `pipx environment` by failing, as an old pipx would:
	// the documented layout is used.
	write(t, filepath.Join(bin, "pipx"), "#!/bin/sh\nexit 2\n", 0o755)
	home := filepath.Join(base, "home")
	venvs := filepath.Join(home, ".local", "share", "pipx", "venvs")
	venv := fakePyTool(t, venvs, "notes-server", "notes_server", "notes", "0.3.1")
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + home}
	res := New(Options{})
	rt, err := res.Resolve(context.Background(), Command{Argv: []string{"pipx", "run", "--spec", "notes-server==0.3.1", "notes", "--ws", "/w"}, Dir: base, Env: env})
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(venv, "bin", "notes"), "--ws", "/w"}, rt.Argv)
	assert.False(t, covered(rt.Read, home), "not $HOME, only the venv: %v", rt.Read)

	// PIPX_HOME moves the venvs.
	other := filepath.Join(base, "pipx-home")
	venv2 := fakePyTool(t, filepath.Join(other, "venvs"), "notes", "notes_server", "notes", "0.3.1")
	rt, err = res.Resolve(context.Background(), Command{Argv: []string{"pipx", "run", "notes"}, Dir: base, Env: append(env, "PIPX_HOME="+other)})
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(venv2, "bin", "notes")}, rt.Argv)

	_, err = res.Resolve(context.Background(), Command{Argv: []string{"pipx", "run", "absent-server"}, Dir: base, Env: env})
	require.ErrorIs(t, err, ErrUnresolved)
	assert.Contains(t, err.Error(), "pipx install absent-server")
	assert.Contains(t, err.Error(), venvs, "says where it looked")
	_, err = res.Resolve(context.Background(), Command{Argv: []string{"pipx", "install", "x"}, Dir: base, Env: env})
	require.ErrorIs(t, err, ErrUnresolved)
}

func TestParsePyReq(t *testing.T) {
	for in, want := range map[string][3]string{
		"mcp-server-fetch":     {"mcp-server-fetch", "mcp-server-fetch", ""},
		"MCP_Server.Fetch@1.2": {"mcp-server-fetch", "MCP_Server.Fetch", "1.2"},
		"pkg[cli]==2.0":        {"pkg", "pkg", "2.0"},
		"pkg[cli] @ 2.0":       {"pkg", "pkg", "2.0"},
	} {
		n, name, v, err := parsePyReq(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, [3]string{n, name, v}, in)
	}
	for _, bad := range []string{"", "../x", "git+https://x/y", "pkg>=1"} {
		_, _, _, err := parsePyReq(bad)
		assert.Error(t, err, bad)
	}
}
