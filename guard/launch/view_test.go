//go:build linux

package launch_test

import (
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/launch"
)

func owner(t *testing.T, p string) [2]uint32 {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	return [2]uint32{st.Uid, st.Gid}
}

// TestServerIdentity: with no MCPGUARD_SERVER_USER and no sudo caller the
// server runs as nobody, never uid 0. Its write root (root's, 0700, below
// root's 0700 temporary directories) and a read root holding a root-owned
// 0600 file are reachable through its view; what it creates is owned by
// root on disk; a root-owned 0640 file outside its grants stays unreadable
// by DAC alone (no Landlock or BPF here: the launcher only).
func TestServerIdentity(t *testing.T) {
	ws, data := t.TempDir(), t.TempDir()
	spec := rootSpec(t, ws)
	require.NoError(t, os.Chmod(ws, 0o700))
	dataFile := filepath.Join(data, "notes.txt")
	require.NoError(t, os.WriteFile(dataFile, []byte("granted-data"), 0o600))
	// A 0755 directory straight under /tmp: reachable by path, so only
	// the key's own mode keeps it.
	outside, err := os.MkdirTemp("", "mcpguard-dac-*")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(outside) })
	require.NoError(t, os.Chmod(outside, 0o755))
	key := filepath.Join(outside, "server.key")
	canary := fmt.Sprintf("CANARY-KEY-%d", os.Getpid())
	require.NoError(t, os.WriteFile(key, []byte(canary), 0o640))
	spec.Readable = []string{data}
	created := filepath.Join(ws, "made-by-server")

	out := launchSteps(t, spec, [][2]string{{"ns", ""}, {"leakfile", dataFile}, {"create", created + "#hello"}, {"leakfile", key}})
	assert.Contains(t, out, fmt.Sprintf("ids %d %d %d %d\n", launch.Nobody, launch.Nobody, launch.Nobody, launch.Nobody))
	assert.Contains(t, out, "leak granted-data", "a granted root-owned 0600 file")
	assert.Contains(t, out, "create ok")
	assert.NotContains(t, out, canary, "root's 0640 key outside the grants")
	assert.Contains(t, out, "leakfile err open "+key+": permission denied", "denied by DAC")
	b, err := os.ReadFile(created)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(b))
	assert.Equal(t, [2]uint32{0, 0}, owner(t, created), "what the server creates keeps the write root's owner on disk")
	assert.Equal(t, [2]uint32{0, 0}, owner(t, ws))
	assert.Equal(t, os.FileMode(0o700), mode(t, ws), "the write root keeps its mode")

	// The server as uid 0 without capabilities (main before issue 31) read
	// the key: DAC is what the identity adds.
	t.Run("baseline", func(t *testing.T) {
		self, err := os.Executable()
		require.NoError(t, err)
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), stepsEnv+`=[["leakfile",`+strconvQuote(key)+`]]`)
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", b)
		assert.Contains(t, string(b), canary)
	})
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

// TestViewWorkdirInWriteRoot: the server's working directory is its
// write root (the usual case): it stays writable, not covered by a
// read-only mount of the directory it starts in.
func TestViewWorkdirInWriteRoot(t *testing.T) {
	ws := t.TempDir()
	spec := rootSpec(t, ws)
	self, err := os.Executable()
	require.NoError(t, err)
	raw := `[["create",` + strconvQuote(filepath.Join(ws, "made")+"#x") + `]]`
	cmd := exec.Command(self)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), stepsEnv+"="+raw)
	spec.Reach = []string{self}
	l, err := launch.Prepare(cmd, spec, launch.Options{})
	require.NoError(t, err)
	defer l.Close()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "create ok\n", string(out))
}

// TestWriteRootNoExec: a binary the server writes into its write root
// runs neither by execve nor through the ELF loader run directly (which
// maps it with mmap(PROT_EXEC), something Landlock's execute right does
// not judge); a program that lay in the write root when the session
// started (a runtime grant inside it) still runs, and the write root
// stays writable; with the supervised file system the dropped file does not
// even get an execute bit. With and without the supervised file system over the
// write root (the Landlock backend's). The launcher alone: no Landlock
// or BPF here. The oracle is what the programs print.
func TestWriteRootNoExec(t *testing.T) {
	loader := elfInterp(t, "/usr/bin/id")
	for _, supervised := range []bool{false, true} {
		t.Run(fmt.Sprintf("supervised=%v", supervised), func(t *testing.T) {
			ws := t.TempDir()
			spec := rootSpec(t, ws)
			kept := filepath.Join(ws, "tools", "kept")
			copyFile(t, "/usr/bin/id", kept, 0o755)
			spec.Reach = []string{"/bin/sh", filepath.Dir(kept)}
			if supervised {
				spec.Supervise = []string{ws}
			}
			script := `cat /usr/bin/id > "$WS/dropped" && echo copied
chmod 755 "$WS/dropped"; echo "chmod rc=$?"
"$WS/dropped" -u; echo "direct rc=$?"
"$LOADER" "$WS/dropped" -u; echo "loader rc=$?"
"$WS/tools/kept" -u; echo "kept rc=$?"
echo data > "$WS/written"; echo "write rc=$?"
`
			cmd := exec.Command("/bin/sh", "-c", script)
			cmd.Dir = ws
			cmd.Env = []string{"PATH=/usr/bin:/bin", "WS=" + ws, "LOADER=" + loader}
			l, err := launch.Prepare(cmd, spec, launch.Options{})
			require.NoError(t, err)
			defer l.Close()
			b, _ := cmd.CombinedOutput()
			out := string(b)
			t.Logf("server:\n%s", out)
			nobody := fmt.Sprintf("%d\n", launch.Nobody)
			assert.Contains(t, out, "copied\n", "the server writes its write root")
			// The supervised file system adds no execute bit (namefs's
			// Executable); the mount alone lets it be added, and noexec
			// still refuses to run the file.
			if supervised {
				assert.Contains(t, out, "chmod rc=1")
			} else {
				assert.Contains(t, out, "chmod rc=0")
			}
			assert.Contains(t, out, "direct rc=126", "execve of a file in the write root")
			assert.NotContains(t, out, nobody+"direct", "the dropped binary ran")
			assert.NotContains(t, out, nobody+"loader", "the dropped binary ran through the loader")
			assert.NotContains(t, out, "loader rc=0")
			assert.Contains(t, out, nobody+"kept rc=0", "a program in the write root at the start runs")
			assert.Contains(t, out, "write rc=0")

			// The same file through the same loader outside the sandbox:
			// a working binary, so the refusal above is the mount's.
			dropped := filepath.Join(ws, "dropped")
			require.FileExists(t, dropped)
			o, err := exec.Command(loader, dropped, "-u").CombinedOutput()
			require.NoError(t, err, "%s", o)
			assert.Equal(t, "0\n", string(o))
		})
	}
}

// elfInterp is the ELF loader (PT_INTERP) of prog.
func elfInterp(t *testing.T, prog string) string {
	t.Helper()
	f, err := elf.Open(prog)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			require.NoError(t, err)
			return strings.TrimRight(string(b), "\x00")
		}
	}
	t.Skipf("%s is not dynamically linked", prog)
	return ""
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(t, os.WriteFile(dst, b, mode))
}
