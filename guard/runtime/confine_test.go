package runtime

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/landlock/ruleset"
	"github.com/mcpguard/mcpguard/guard/launch"
)

// The resolver never runs what a server left in its workspace outside a
// sandbox (issue 31). Each test plants code where an earlier session of
// the server could have put it; the oracles are outside the resolver: a
// marker file the planted code creates when it runs with write access,
// and a canary it prints when it can read it.

func needHelperSandbox(t *testing.T) {
	t.Helper()
	if _, err := ruleset.CheckABI(ruleset.KernelABI); err != nil {
		t.Skipf("no Landlock here to confine helpers: %v", err)
	}
}

// plantedPython writes code that, when Python imports it, creates marker
// and copies canary's content into sys.path (where the resolver would
// report it).
func plantedPython(marker, canary string) string {
	return fmt.Sprintf(`import sys
try:
    open(%q, "w").write("ran")
except Exception:
    pass
try:
    sys.path.append("/leak-" + open(%q).read().strip())
except Exception:
    pass
`, marker, canary)
}

func canaryFile(t *testing.T) (path, value string) {
	t.Helper()
	value = fmt.Sprintf("CANARY-RESOLVE-%d", os.Getpid())
	path = filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(path, []byte(value), 0o644))
	return path, value
}

func assertNoLeak(t *testing.T, rt *Runtime, marker, canary string) {
	t.Helper()
	assert.NoFileExists(t, marker, "planted code ran with write access outside any sandbox")
	all := strings.Join(append(append(append([]string{}, rt.Read...), rt.Exec...), rt.Notes...), "\n")
	assert.NotContains(t, all, canary, "planted code read the canary")
}

// TestResolvePlantedJSONModule: a json.py in the server's working
// directory (its workspace). The resolver's question to the interpreter
// imports json; run in the workspace, it imported this one.
func TestResolvePlantedJSONModule(t *testing.T) {
	needHelperSandbox(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	ws := t.TempDir()
	marker := filepath.Join(t.TempDir(), "marker")
	canary, value := canaryFile(t)
	write(t, filepath.Join(ws, "json.py"), plantedPython(marker, canary)+"from _json import *\n", 0o644)
	write(t, filepath.Join(ws, "server.py"), "print(1)\n", 0o644)
	rt, err := New(Options{Writable: []string{ws}}).Resolve(context.Background(),
		Command{Argv: []string{py, "-B", "server.py"}, Dir: ws, Env: os.Environ()})
	require.NoError(t, err)
	t.Logf("notes: %v", rt.Notes)
	assertNoLeak(t, rt, marker, value)
}

// TestResolvePlantedPth: a venv inside the workspace, with a .pth file
// in its site-packages. Python runs a .pth's import lines at start-up,
// isolated or not, so the probe runs it: confined, it can neither write
// outside nor read the canary, and what it adds to sys.path outside the
// interpreter's trees is not granted.
func TestResolvePlantedPth(t *testing.T) {
	needHelperSandbox(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	ws := t.TempDir()
	venv := filepath.Join(ws, ".venv")
	if out, err := exec.Command(py, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Skipf("python3 -m venv: %v: %s", err, out)
	}
	sp, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
	require.NotEmpty(t, sp)
	marker := filepath.Join(t.TempDir(), "marker")
	canary, value := canaryFile(t)
	write(t, filepath.Join(sp[0], "evil.pth"), "import os; exec("+fmt.Sprintf("%q", plantedPython(marker, canary))+")\n", 0o644)
	write(t, filepath.Join(ws, "server.py"), "print(1)\n", 0o644)
	rt, err := New(Options{Writable: []string{ws}}).Resolve(context.Background(),
		Command{Argv: []string{filepath.Join(venv, "bin", "python"), "server.py"}, Dir: ws, Env: os.Environ()})
	require.NoError(t, err)
	t.Logf("notes: %v", rt.Notes)
	assertNoLeak(t, rt, marker, value)
	// The same .pth run the way the resolver used to (unconfined) fires
	// both oracles: the test can fail.
	out, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import sys; print(sys.path)").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.FileExists(t, marker)
	assert.Contains(t, string(out), value)
}

// TestResolvePlantedNodeBin: npx in a workspace holding
// node_modules/.bin/node. npm exec puts the working directory's
// node_modules/.bin first on PATH, so `npm exec ... -- node` ran the
// planted node.
func TestResolvePlantedNodeBin(t *testing.T) {
	needHelperSandbox(t)
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Skip("no npx")
	}
	pkg, ok := cachedNpmPackage(t)
	if !ok {
		t.Skip("no npm package of testdata/compat in npm's cache (scripts/deps.sh)")
	}
	ws := t.TempDir()
	marker := filepath.Join(t.TempDir(), "marker")
	write(t, filepath.Join(ws, "node_modules", ".bin", "node"), "#!/bin/sh\ntouch "+marker+"\necho /planted/node_modules/.bin\n", 0o755)
	env := append(os.Environ(), "npm_config_offline=true", "npm_config_update_notifier=false")
	rt, err := New(Options{Writable: []string{ws}}).Resolve(context.Background(),
		Command{Argv: []string{npx, "-y", pkg}, Dir: ws, Env: env})
	require.NoError(t, err)
	assert.NoFileExists(t, marker, "the planted node ran")
	assert.Equal(t, "node", filepath.Base(rt.Argv[0]))
	assert.NotContains(t, strings.Join(rt.Read, " "), "planted")
	// npm in the workspace, as before: the planted node runs.
	cmd := exec.Command("npm", "exec", "--yes", "--package="+pkg, "--", "node", "-e", "1")
	cmd.Dir, cmd.Env = ws, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Logf("npm exec in the workspace: %v: %s", err, out)
	}
	assert.FileExists(t, marker, "npm exec in the workspace runs its node_modules/.bin/node")
}

// cachedNpmPackage is the spec of a package testdata/compat installs
// (scripts/deps.sh), so that npm exec finds it in its cache offline.
func cachedNpmPackage(t *testing.T) (string, bool) {
	b, err := os.ReadFile("../../testdata/compat/node_modules/@modelcontextprotocol/server-memory/package.json")
	if err != nil {
		return "", false
	}
	i := strings.Index(string(b), `"version": "`)
	if i < 0 {
		return "", false
	}
	v, _, _ := strings.Cut(string(b)[i+len(`"version": "`):], `"`)
	return "@modelcontextprotocol/server-memory@" + v, true
}

// A helper's environment is the minimal one, whatever the server's holds.
func TestHelperEnv(t *testing.T) {
	env := []string{"PATH=/ws/node_modules/.bin:/usr/bin", "HOME=/home/u", "API_TOKEN=s3cret", "npm_config_cache=/c", "LANG=C.UTF-8"}
	got := helperEnv(env, []string{"/opt/node/bin"}, "npm_config_")
	assert.Equal(t, []string{"PATH=/opt/node/bin:/usr/local/bin:/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "npm_config_cache=/c"}, got)
	var h launch.Helper
	assert.Empty(t, h.Env)
}
