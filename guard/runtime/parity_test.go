//go:build linux

package runtime_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/landlock"
	"github.com/mcpguard/mcpguard/guard/landlock/ruleset"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/guard/runtime"
	"github.com/mcpguard/mcpguard/guard/sandbox"
)

// Both L3 backends grant the same runtime for the same command: the
// Landlock rules and the BPF rules each backend builds from a command
// name the same programs as executable and the same trees as readable.
func TestBackendsAgree(t *testing.T) {
	base := t.TempDir()
	nodeDir := filepath.Join(base, "nodejs", "bin")
	require.NoError(t, os.MkdirAll(nodeDir, 0o755))
	node := filepath.Join(nodeDir, "node")
	require.NoError(t, os.WriteFile(node, []byte("#!/bin/sh\nexit 0\n"), 0o755))
	nm := filepath.Join(base, "proj", "node_modules")
	pkg := filepath.Join(nm, "@acme", "server")
	for path, body := range map[string]string{
		filepath.Join(pkg, "package.json"):             `{"name":"@acme/server","dependencies":{"dep":"1"}}`,
		filepath.Join(pkg, "index.js"):                 "#!/usr/bin/env node\n",
		filepath.Join(nm, "dep", "package.json"):       `{"name":"dep"}`,
		filepath.Join(nm, "unrelated", "package.json"): `{"name":"unrelated"}`,
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(body), 0o755))
	}
	bin := filepath.Join(nm, ".bin", "acme")
	require.NoError(t, os.MkdirAll(filepath.Dir(bin), 0o755))
	require.NoError(t, os.Symlink("../@acme/server/index.js", bin))
	env := []string{"PATH=" + nodeDir + ":/usr/bin:/bin", "HOME=/nonexistent"}

	commands := [][]string{{bin, "/ws"}, {node, filepath.Join(pkg, "index.js")}, {"/bin/sh", "-c", "true"}}
	if py, err := exec.LookPath("python3"); err == nil {
		commands = append(commands, []string{py, "-c", "pass"})
	}
	pol := &policy.Policy{Runtime: policy.Runtime{Read: []string{"/opt"}}}
	ll, err := landlock.New(pol, landlock.Options{Wrapper: "/opt/mcpguard", Probe: func() (int, error) { return 7, nil }})
	require.NoError(t, err)
	res := runtime.New(runtime.Options{ExtraRead: pol.Runtime.Read})
	for _, argv := range commands {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env, cmd.Dir = env, base
		rules, llArgv, err := ll.CommandRules(context.Background(), cmd)
		require.NoError(t, err, argv)
		fromLandlock := map[string]string{}
		for _, p := range rules.Paths {
			switch p.Why {
			case "runtime exec":
				fromLandlock[p.Path] = "exec"
			case "runtime read":
				fromLandlock[p.Path] = "read"
			}
		}
		files, execs, bpfArgv, err := sandbox.ServerFiles(context.Background(), res, runtime.Command{Argv: argv, Dir: base, Env: env})
		require.NoError(t, err, argv)
		fromBPF := map[string]string{}
		for _, f := range files {
			fromBPF[f.Path] = "read"
		}
		for _, e := range execs {
			fromBPF[e] = "exec"
		}
		assert.Equal(t, fromLandlock, fromBPF, "%v", argv)
		assert.Equal(t, llArgv, bpfArgv, "%v", argv)
		assert.Equal(t, "read", fromBPF["/opt"], "the policy's runtime.read reaches both")
		assert.NotContains(t, fromBPF, filepath.Join(nm, "unrelated"))
	}
}

// Both backends' baselines hold the shared system list, and neither grants
// a file below /etc that the other does not (a server reading
// /etc/passwd ran under Landlock and failed under BPF before).
func TestBaselinesAgree(t *testing.T) {
	fromLandlock, fromBPF := map[string]bool{}, map[string]bool{}
	for _, r := range ruleset.Runtime() {
		fromLandlock[r.Path] = true
	}
	for _, r := range sandbox.Baseline() {
		fromBPF[r.Path] = true
	}
	for _, p := range runtime.System() {
		assert.True(t, fromLandlock[p], "Landlock's baseline lacks %s", p)
		assert.True(t, fromBPF[p], "the BPF baseline lacks %s", p)
	}
	etc := func(m map[string]bool) []string {
		var out []string
		for p := range m {
			if strings.HasPrefix(p, "/etc/") {
				out = append(out, p)
			}
		}
		slices.Sort(out)
		return out
	}
	assert.Equal(t, etc(fromLandlock), etc(fromBPF))
}
