//go:build linux

package launch_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard/launch"
)

// launchSteps runs this test binary as the launched server under spec,
// doing steps, and returns its output. env is more of its environment.
func launchSteps(t *testing.T, spec launch.Spec, steps [][2]string, env ...string) string {
	t.Helper()
	raw, err := json.Marshal(steps)
	require.NoError(t, err)
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self)
	cmd.Env = append(append(os.Environ(), stepsEnv+"="+string(raw)), env...)
	spec.Reach = append(spec.Reach, self) // the server program, in a 0700 build directory
	l, err := launch.Prepare(cmd, spec, launch.Options{})
	require.NoError(t, err)
	defer l.Close()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("server:\n%s", out)
	return string(out)
}

// rootSpec is the spec a root proxy makes for a server with write root ws.
func rootSpec(t *testing.T, ws string) launch.Spec {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the launcher's namespaces need root")
	}
	spec, err := launch.NewSpec(0, func(string) string { return "" }, []string{ws})
	require.NoError(t, err)
	return spec
}

// TestInheritNothing: a descriptor the proxy's parent leaked without
// O_CLOEXEC (here: opened by this test without it, so the launcher
// inherits it as the proxy's children do) does not reach the server.
// The oracle is the canary the descriptor's file holds, in the server's
// output. Under a non-root proxy stage 2 runs alone; as root both stages.
func TestInheritNothing(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	canary := fmt.Sprintf("CANARY-FD-%d", os.Getpid())
	require.NoError(t, os.WriteFile(secret, []byte(canary), 0o644))
	fd, err := unix.Open(secret, unix.O_RDONLY, 0) // no O_CLOEXEC: leaked
	require.NoError(t, err)
	defer unix.Close(fd)
	specs := map[string]launch.Spec{"stage 2 alone": {}}
	if os.Geteuid() == 0 {
		specs["root: both stages"] = rootSpec(t, t.TempDir())
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			out := launchSteps(t, spec, [][2]string{{"fds", ""}})
			assert.Contains(t, out, "fds ok")
			assert.NotContains(t, out, canary)
		})
	}
	// Without the launcher, the same step reads it: the oracle can fire.
	t.Run("baseline", func(t *testing.T) {
		self, err := os.Executable()
		require.NoError(t, err)
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), stepsEnv+`=[["fds",""]]`)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), canary)
	})
}

// TestOwnNamespaces: the server has IPC, UTS and cgroup namespaces of its
// own: a root-owned 0600 System V segment of the host cannot be attached
// (its canary never shows), a message queue it creates does not outlive
// it on the host, its host name is the launcher's, and its cgroup path is
// its namespace's root.
func TestOwnNamespaces(t *testing.T) {
	spec := rootSpec(t, t.TempDir())
	canary := fmt.Sprintf("CANARY-SHM-%d", os.Getpid())
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600)
	require.NoError(t, err)
	defer unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	seg, err := unix.SysvShmAttach(id, 0, 0)
	require.NoError(t, err)
	copy(seg, canary)
	require.NoError(t, unix.SysvShmDetach(seg))
	key := fmt.Sprintf("%#x", 0x6d630000|os.Getpid()&0xffff)

	out := launchSteps(t, spec, [][2]string{{"shmat", fmt.Sprint(id)}, {"msgq", key}, {"ns", ""}})
	assert.NotContains(t, out, canary, "the host's segment")
	assert.Contains(t, out, "hostname "+launch.Hostname+"\n")
	assert.Contains(t, out, "cgroup 0::/\n")
	for _, n := range []string{"ipc", "uts", "cgroup", "mnt", "pid"} {
		mine, err := os.Readlink("/proc/self/ns/" + n)
		require.NoError(t, err)
		assert.NotContains(t, out, "ns "+n+" "+mine+"\n", "the server shares the %s namespace", n)
	}
	q, err := os.ReadFile("/proc/sysvipc/msg")
	require.NoError(t, err)
	for _, l := range strings.Split(string(q), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) > 0 {
			assert.NotEqual(t, fmt.Sprint(0x6d630000|os.Getpid()&0xffff), f[0], "the server's queue outlived it on the host")
		}
	}
	// Without the launcher the segment is attached: the oracle can fire.
	t.Run("baseline", func(t *testing.T) {
		self, err := os.Executable()
		require.NoError(t, err)
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), stepsEnv+`=[["shmat","`+fmt.Sprint(id)+`"]]`)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), canary)
	})
}
