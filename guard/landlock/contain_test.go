//go:build linux

package landlock_test

// Containment edge tests (issue #18) on the Landlock backend, run through
// the launcher as the proxy runs servers. Each attack is judged outside the
// guard: a canary that must not reach a listener or the child's output, a
// file that must not exist or change, the test process's own state.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/landlock"
	"github.com/mcpguard/mcpguard/guard/launch"
	"github.com/mcpguard/mcpguard/guard/launch/seccomp"
	"github.com/mcpguard/mcpguard/internal/testenv"
	"github.com/mcpguard/mcpguard/lab/attack"
)

func rootOrSkip(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the launcher drops privilege only under a root proxy")
	}
}

// guardedChild is this test binary prepared as a guarded child.
type guardedChild struct {
	sb  *landlock.Sandbox
	cmd *exec.Cmd
}

// Output runs it as the proxy would and returns its stdout.
func (g guardedChild) Output() ([]byte, error) { return sandboxedOutput(g.sb, g.cmd) }

// execChild prepares this test binary as a guarded child doing actions.
func execChild(t *testing.T, sb *landlock.Sandbox, actions ...string) guardedChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], actions...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	require.NoError(t, sb.Prepare(cmd))
	cmd.Stderr = os.Stderr
	return guardedChild{sb, cmd}
}

// runRaw runs the guarded child and returns its whole output (verdicts
// and whatever the attacks obtained).
func runRaw(t *testing.T, w *world, actions ...string) string {
	t.Helper()
	out, err := execChild(t, newSandbox(t, w.pol), actions...).Output()
	require.NoError(t, err)
	t.Logf("child:\n%s", out)
	return string(out)
}

func canary() string { return fmt.Sprintf("CANARY-%d-%d", os.Getpid(), time.Now().UnixNano()) }

// TestContainPrivileges: the server has no capability left, no_new_privs
// and the seccomp filter.
func TestContainPrivileges(t *testing.T) {
	rootOrSkip(t)
	w := newWorld(t)
	sb := newSandbox(t, w.pol)
	cmd := execChild(t, sb, "caps:")
	out, err := cmd.Output()
	require.NoError(t, err)
	for _, want := range []string{"CapEff: 0000000000000000", "CapPrm: 0000000000000000", "CapBnd: 0000000000000000", "CapAmb: 0000000000000000", "NoNewPrivs: 1", "Seccomp: 2"} {
		assert.Contains(t, string(out), "status "+want)
	}
}

// TestContainPtraceProxy: the server can neither attach to the proxy (this
// test process) nor read its memory: the canary held here never shows in
// the child's output, and nothing traces this process afterwards.
func TestContainPtraceProxy(t *testing.T) {
	rootOrSkip(t)
	w := newWorld(t)
	secret := []byte(canary())
	pid := os.Getpid()
	out := runRaw(t, w,
		fmt.Sprintf("ptrace:%d", pid),
		fmt.Sprintf("vmread:%d@%#x#%d", pid, uintptr(unsafe.Pointer(&secret[0])), len(secret)),
		// The launcher's pid 1, seen from inside.
		"ptrace:1", fmt.Sprintf("vmread:1@%#x#%d", uintptr(unsafe.Pointer(&secret[0])), len(secret)))
	assert.NotContains(t, out, string(secret))
	assert.NotContains(t, out, "ptrace:"+strconv.Itoa(pid)+" ok")
	st, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	assert.Contains(t, string(st), "TracerPid:\t0")
}

// TestContainBindMount: bind-mounting the secret directory into the write
// root, to read it through the write root's rule, fails.
func TestContainBindMount(t *testing.T) {
	rootOrSkip(t)
	w := newWorld(t)
	secret, err := os.ReadFile(filepath.Join(w.outside, "id_rsa"))
	require.NoError(t, err)
	out := runRaw(t, w,
		"bind:"+w.outside+">"+filepath.Join(w.writeRoot, "m"),
		"bind:"+w.outside+">"+w.writeRoot)
	assert.NotContains(t, out, strings.TrimSpace(string(secret)))
}

// TestContainRawSockets: a raw IP datagram and a packet-socket frame carry
// a canary towards a UDP sink on loopback; the sink never sees it.
func TestContainRawSockets(t *testing.T) {
	rootOrSkip(t)
	w := newWorld(t)
	sink, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer sink.Close()
	port := sink.LocalAddr().(*net.UDPAddr).Port
	c := canary()
	runRaw(t, w, fmt.Sprintf("rawudp:%d#%s", port, c), "packet:"+c)
	require.NoError(t, sink.SetReadDeadline(time.Now().Add(500*time.Millisecond)))
	buf := make([]byte, 256)
	n, _, _ := sink.ReadFrom(buf)
	assert.NotContains(t, string(buf[:n]), c)
}

// TestContainIOUring: a UDP socket made through io_uring (which socket(2)
// rules never see) carries a canary to a UDP sink; on ABI < 10 Landlock
// does not check the send itself. The sink never sees it.
func TestContainIOUring(t *testing.T) {
	rootOrSkip(t)
	w := newWorld(t)
	sink, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer sink.Close()
	c := canary()
	runRaw(t, w, fmt.Sprintf("uringudp:%d#%s", sink.LocalAddr().(*net.UDPAddr).Port, c))
	require.NoError(t, sink.SetReadDeadline(time.Now().Add(500*time.Millisecond)))
	buf := make([]byte, 256)
	n, _, _ := sink.ReadFrom(buf)
	assert.NotContains(t, string(buf[:n]), c)
}

// TestContainUnixSockets: a local daemon's pathname socket (world-writable,
// so DAC admits anyone) and an abstract one: the canary written by the
// server reaches neither listener.
func TestContainUnixSockets(t *testing.T) {
	rootOrSkip(t)
	w := newWorld(t)
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	path := filepath.Join(dir, "daemon.sock")
	abstract := fmt.Sprintf("@mcpguard-test-%d", os.Getpid())
	got := make(chan string, 4)
	for _, addr := range []string{path, abstract} {
		l, err := net.Listen("unix", addr)
		require.NoError(t, err)
		defer l.Close()
		if addr == path {
			require.NoError(t, os.Chmod(path, 0o777))
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				var b bytes.Buffer
				c.SetReadDeadline(time.Now().Add(time.Second))
				b.ReadFrom(c)
				c.Close()
				got <- b.String()
			}
		}()
	}
	c := canary()
	runRaw(t, w, "unix:"+path+"#"+c, "unix:"+abstract+"#"+c)
	select {
	case s := <-got:
		assert.NotContains(t, s, c, "a listener received the canary")
	case <-time.After(300 * time.Millisecond):
	}
}

// TestContainKeyring: a secret in the proxy's session keyring (as
// aws-vault or a Kerberos KEYRING: cache would leave it) is out of reach.
func TestContainKeyring(t *testing.T) {
	rootOrSkip(t)
	w := newWorld(t)
	c := canary()
	desc := fmt.Sprintf("mcpguard-test-%d", os.Getpid())
	// The test thread's own session keyring (keyrings are per-thread
	// credentials: the thread stays locked, and forks the child), inherited
	// by children unless the launcher gives them a fresh one.
	runtime.LockOSThread()
	if _, _, e := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); e != 0 {
		t.Skipf("no keyrings here: %v", e)
	}
	id, err := unix.AddKey("user", desc, []byte(c), unix.KEY_SPEC_SESSION_KEYRING)
	require.NoError(t, err)
	defer unix.KeyctlInt(unix.KEYCTL_UNLINK, id, unix.KEY_SPEC_SESSION_KEYRING, 0, 0)
	out := runRaw(t, w, "key:"+desc)
	assert.NotContains(t, out, c)
}

// TestContainUnguardedBaseline runs the same attacks without the guard:
// each succeeds, so the oracles above can see an attack that happens.
func TestContainUnguardedBaseline(t *testing.T) {
	rootOrSkip(t)
	w := newWorld(t)
	secret := []byte(canary())
	pid := os.Getpid()
	sink, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer sink.Close()
	c := canary()
	git := filepath.Join(w.writeRoot, ".git")
	require.NoError(t, os.MkdirAll(filepath.Join(git, "hooks"), 0o755))
	usink, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer usink.Close()
	cmd := exec.Command(os.Args[0],
		fmt.Sprintf("vmread:%d@%#x#%d", pid, uintptr(unsafe.Pointer(&secret[0])), len(secret)),
		fmt.Sprintf("rawudp:%d#%s", sink.LocalAddr().(*net.UDPAddr).Port, c),
		fmt.Sprintf("uringudp:%d#%s", usink.LocalAddr().(*net.UDPAddr).Port, c),
		"gitswap:"+w.writeRoot)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.Output()
	require.NoError(t, err)
	assert.Contains(t, string(out), string(secret), "process_vm_readv of the parent")
	require.NoError(t, sink.SetReadDeadline(time.Now().Add(2*time.Second)))
	buf := make([]byte, 256)
	n, _, err := sink.ReadFrom(buf)
	require.NoError(t, err)
	assert.Contains(t, string(buf[:n]), c, "raw datagram")
	assert.FileExists(t, filepath.Join(git, "hooks", "pre-commit"), "hook planted through a renamed .git")
	if strings.Contains(string(out), "uringudp:") && !strings.Contains(string(out), "io_uring_setup") {
		require.NoError(t, usink.SetReadDeadline(time.Now().Add(2*time.Second)))
		n, _, err = usink.ReadFrom(buf)
		require.NoError(t, err)
		assert.Contains(t, string(buf[:n]), c, "datagram from an io_uring socket")
	} else {
		t.Logf("io_uring unavailable on this kernel: %s", out)
	}
}

// TestContainProtectedGit: with a repository in the write root, renaming
// .git away to plant a hook, swapping in a fresh .git, or pointing
// core.hooksPath elsewhere all leave the repository as it was.
func TestContainProtectedGit(t *testing.T) {
	rootOrSkip(t)
	w := newWorld(t)
	git := filepath.Join(w.writeRoot, ".git")
	require.NoError(t, os.MkdirAll(filepath.Join(git, "hooks"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(git, "config"), []byte("[core]\n"), 0o644))
	var before unix.Stat_t
	require.NoError(t, unix.Stat(git, &before))
	runRaw(t, w, "gitswap:"+w.writeRoot, "gitnew:"+w.writeRoot,
		"append:"+filepath.Join(git, "config")+"#\thooksPath = /tmp/evil\n",
		"write:"+filepath.Join(git, "hooks", "post-checkout"))
	assert.NoFileExists(t, filepath.Join(git, "hooks", "pre-commit"))
	assert.NoFileExists(t, filepath.Join(git, "hooks", "post-checkout"))
	cfg, err := os.ReadFile(filepath.Join(git, "config"))
	require.NoError(t, err)
	assert.Equal(t, "[core]\n", string(cfg))
	var after unix.Stat_t
	require.NoError(t, unix.Stat(git, &after))
	assert.Equal(t, before.Ino, after.Ino, ".git is still the same directory")
}

// TestContainHardLink: a hard link planted in the read root ahead of the
// session, to the secret outside every root: under a root proxy it is
// masked in the server's mount namespace, and the audit log names it; the
// secret never shows in the child's output. A file with one name beside it
// stays readable.
func TestContainHardLink(t *testing.T) {
	rootOrSkip(t)
	w := newWorld(t)
	secret, err := os.ReadFile(filepath.Join(w.outside, "id_rsa"))
	require.NoError(t, err)
	links := []string{filepath.Join(w.readRoot, "notes-backup"), filepath.Join(w.writeRoot, "deep", "x", "cache.bin")}
	require.NoError(t, os.MkdirAll(filepath.Dir(links[1]), 0o755))
	for _, l := range links {
		require.NoError(t, os.Link(filepath.Join(w.outside, "id_rsa"), l))
	}
	// Unguarded, the link does reach the secret.
	plain := exec.Command(os.Args[0], "leakfile:"+links[0])
	plain.Env = append(os.Environ(), childEnv+"=1")
	got, err := plain.Output()
	require.NoError(t, err)
	require.Contains(t, string(got), strings.TrimSpace(string(secret)))
	var log strings.Builder
	sb, err := landlock.New(w.pol, landlock.Options{Audit: audit.New(&log), Server: "contain"})
	landlockOrSkip(t, err)
	t.Cleanup(func() { sb.Close() })
	out, err := execChild(t, sb, "leakfile:"+links[0], "leakfile:"+links[1], "read:"+filepath.Join(w.readRoot, "doc.txt")).Output()
	require.NoError(t, err)
	t.Logf("child:\n%s", out)
	assert.NotContains(t, string(out), strings.TrimSpace(string(secret)))
	assert.Contains(t, string(out), "read:"+filepath.Join(w.readRoot, "doc.txt")+" ok")
	assert.Contains(t, string(out), "leakfile:"+links[0]+" denied")
	for _, l := range links {
		assert.Contains(t, log.String(), `"rule":"landlock.hardlink_masked"`)
		assert.Contains(t, log.String(), l)
	}
}

// TestEnforcementLandlockAlone: the Landlock domain by itself (the bare
// wrapper, no launcher namespaces, so no read-only mounts in front of it)
// denies writes and reads outside the roots.
func TestEnforcementLandlockAlone(t *testing.T) {
	w := newWorld(t)
	sb := newSandbox(t, w.pol)
	r := *sb.Rules()
	r.Paths = append(append([]landlock.PathRule(nil), r.Paths...), landlock.PathRule{Path: os.Args[0], Access: landlock.Exec})
	enc, err := r.Encode()
	require.NoError(t, err)
	actions := []string{
		"write:" + filepath.Join(w.readRoot, "out.txt"),
		"write:" + filepath.Join(w.outside, "stage.txt"),
		"read:" + filepath.Join(w.outside, "id_rsa"),
		"write:" + filepath.Join(w.writeRoot, "ok.txt"),
		"memfdexec:/bin/echo",
	}
	cmd := exec.Command(os.Args[0], append([]string{landlock.ExecArg, enc, os.Args[0], os.Args[0]}, actions...)...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.Output()
	require.NoError(t, err)
	for _, a := range actions[:3] {
		assert.Contains(t, string(out), a+" denied\n")
	}
	assert.Contains(t, string(out), actions[3]+" ok\n")
	// In the proxy's own pid namespace (no launcher to set
	// vm.memfd_noexec=2 for it), unless the host enforces it already, the
	// seccomp filter refuses executable memfds; either way none runs.
	assert.NotContains(t, string(out), "EXECUTED")
	if seccomp.KernelMemfdNoExec() {
		assert.Contains(t, string(out), actions[4]+" denied\n")
	} else {
		assert.Contains(t, string(out), actions[4]+" error: "+unix.ENOSYS.Error()+"\n")
	}
	assert.NoFileExists(t, filepath.Join(w.readRoot, "out.txt"))
	assert.NoFileExists(t, filepath.Join(w.outside, "stage.txt"))
}

// TestContainAsNobody: with MCPGUARD_SERVER_USER the server runs as that
// user, without groups or capabilities, and still gets what the policy
// grants when the files allow that user (the set-up gives the workspace to
// it, as a user's own workspace belongs to the user).
func TestContainAsNobody(t *testing.T) {
	rootOrSkip(t)
	t.Setenv(launch.UserEnv, "65534:65534")
	w := newWorld(t)
	base := filepath.Dir(w.writeRoot)
	require.NoError(t, os.Chmod(base, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(base), 0o755))
	require.NoError(t, os.Chown(w.writeRoot, launch.Nobody, launch.Nobody))
	// The server program must be reachable by that user: this test binary,
	// copied out of go's private build directory.
	dir, err := os.MkdirTemp("", "mcpguard-nobody-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "server")
	b, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, b, 0o755))

	sb := newSandbox(t, w.pol)
	cmd := exec.Command(bin, "caps:", "read:"+filepath.Join(w.readRoot, "doc.txt"),
		"write:"+filepath.Join(w.writeRoot, "mine.txt"), "read:"+filepath.Join(w.outside, "id_rsa"))
	cmd.Env = append(os.Environ(), childEnv+"=1")
	require.NoError(t, sb.Prepare(cmd))
	cmd.Stderr = os.Stderr
	out, err := sandboxedOutput(sb, cmd)
	require.NoError(t, err)
	t.Logf("child:\n%s", out)
	for _, want := range []string{"status Uid: 65534 65534 65534 65534", "status Gid: 65534 65534 65534 65534",
		"status CapEff: 0000000000000000", "status CapBnd: 0000000000000000",
		"read:" + filepath.Join(w.readRoot, "doc.txt") + " ok", "write:" + filepath.Join(w.writeRoot, "mine.txt") + " ok",
		"read:" + filepath.Join(w.outside, "id_rsa") + " denied"} {
		assert.Contains(t, string(out), want)
	}
	assert.NotContains(t, string(out), "secret")
	var st unix.Stat_t
	require.NoError(t, unix.Stat(filepath.Join(w.writeRoot, "mine.txt"), &st))
	assert.Equal(t, uint32(launch.Nobody), st.Uid, "the file the server wrote is the server user's")
}

// TestContainProtectWalkIncomplete: a write root with more entries than
// launch.Protect looks at is still served, and the audit log says that
// protection by identity stopped early (as the BPF backend does), so the
// user learns that entries further on are protected by name only.
func TestContainProtectWalkIncomplete(t *testing.T) {
	rootOrSkip(t)
	w := newWorld(t)
	many := filepath.Join(w.writeRoot, "many")
	require.NoError(t, os.Mkdir(many, 0o755))
	// On a tmpfs (the test runs as root), creating and walking the
	// entries takes a second, not a minute of disk metadata.
	require.NoError(t, unix.Mount("tmpfs", many, "tmpfs", 0, "nr_inodes=300000"))
	t.Cleanup(func() { _ = unix.Unmount(many, unix.MNT_DETACH) })
	for i := range launch.MaxWalk + 1 {
		f, err := os.Create(filepath.Join(many, strconv.Itoa(i)))
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	var log strings.Builder
	sb, err := landlock.New(w.pol, landlock.Options{Audit: audit.New(&log), Server: "contain"})
	landlockOrSkip(t, err)
	t.Cleanup(func() { sb.Close() })
	out, err := execChild(t, sb, "write:"+filepath.Join(w.writeRoot, "ok.txt")).Output()
	require.NoError(t, err)
	assert.Contains(t, string(out), "write:"+filepath.Join(w.writeRoot, "ok.txt")+" ok")
	assert.Contains(t, log.String(), `"rule":"`+launch.RuleProtectWalk+`"`)
}

// TestContainProtectedNames: protected names (a .git made during the
// session, git's redirections and hooks, editor and agent settings,
// .envrc, .mcp.json, a bare repository's HEAD) are neither created nor
// written by any route (open O_CREAT, mknod, rename, link, symlink, an
// O_TMPFILE linked in, renameat2 RENAME_EXCHANGE, a directory renamed into
// place holding the name, the protected directory made afresh, writing
// or truncating an existing one), whether they existed at the start or
// not. The evidence is the payload found, or not, at each path after the
// session; unguarded, every route leaves it (the baseline subtest).
func TestContainProtectedNames(t *testing.T) {
	rootOrSkip(t)
	w := newWorld(t)
	cases, err := attack.NameCases(w.writeRoot)
	require.NoError(t, err)
	cases = append(cases, attack.GitModelCases(w.writeRoot)...)
	steps := attack.NameSteps(cases)
	out := runRaw(t, w, steps...)
	assert.Equal(t, len(steps), strings.Count(out, "\n"), "every step ran")
	for _, c := range cases {
		assert.False(t, attack.HasPayload(c.Path), "payload at %s", c.Path)
	}
	// A benign write in the workspace, beside them, still works.
	assert.Contains(t, runRaw(t, w, "write:"+filepath.Join(w.writeRoot, "notes.txt")), " ok")
	// Relative paths from a working directory inside the write root go
	// through the supervised view too.
	rel := filepath.Join(w.writeRoot, "relsub")
	require.NoError(t, os.Mkdir(rel, 0o755))
	sb := newSandbox(t, w.pol)
	g := execChild(t, sb, "name:creat#.envrc", "name:mkdir#.vscode/tasks.json", "write:plain.txt")
	g.cmd.Dir = rel
	relOut, err := g.Output()
	require.NoError(t, err)
	assert.Contains(t, string(relOut), "write:plain.txt ok")
	assert.False(t, attack.HasPayload(filepath.Join(rel, ".envrc")), "relative .envrc")
	assert.False(t, attack.HasPayload(filepath.Join(rel, ".vscode", "tasks.json")), "relative .vscode")

	// Unguarded, each route on a fresh workspace leaves the payload.
	t.Run("baseline", func(t *testing.T) {
		for i := range steps {
			ws := t.TempDir()
			cases, err := attack.NameCases(ws)
			require.NoError(t, err)
			step := attack.NameSteps(append(cases, attack.GitModelCases(ws)...))[i]
			cmd := exec.Command(os.Args[0], step)
			cmd.Env = append(os.Environ(), childEnv+"=1")
			out, err := cmd.Output()
			require.NoError(t, err)
			assert.Contains(t, string(out), " ok", step)
			_, path, _ := strings.Cut(step, "#")
			assert.True(t, attack.HasPayload(path), "unguarded, %s", step)
		}
	})
}

// TestContainExecutables: no route leaves a program (a regular file with
// an execute bit holding the payload) in a supervised write root: a shim
// in node_modules/.bin or a toolchain's cargo made executable, chmodded,
// fchmodded, mknodded, an O_TMPFILE linked in, an existing program moved
// onto the shim's name, an existing script written or truncated. The
// evidence is each path after the session; unguarded, every route leaves
// a program (namefs's TestExecutables baseline, and the "ok" here).
func TestContainExecutables(t *testing.T) {
	rootOrSkip(t)
	w := newWorld(t)
	cases, err := attack.ExecCases(w.writeRoot)
	require.NoError(t, err)
	steps := attack.ExecSteps(cases)
	out := runRaw(t, w, append(steps, "write:"+filepath.Join(w.writeRoot, "notes.txt"))...)
	assert.Equal(t, len(steps)+1, strings.Count(out, "\n"), "every step ran")
	for _, c := range cases {
		assert.False(t, attack.HasProgram(c.Path), "program at %s", c.Path)
	}
	assert.Contains(t, out, "notes.txt ok", "data beside them is written")
}

// TestContainExecConfig: files the user's tools execute or read as
// configuration (package.json scripts, a .pth file, Makefiles, a CI
// workflow) are written under a write grant and listed, with the change,
// in the session change report; with filesystem.protect_exec_config no
// route writes them. A file beside them is written either way.
func TestContainExecConfig(t *testing.T) {
	rootOrSkip(t)
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("protect=%v", refuse), func(t *testing.T) {
			w := newWorld(t)
			w.pol.Filesystem.ProtectExecConfig = refuse
			cases, err := attack.ExecConfigCases(w.writeRoot)
			require.NoError(t, err)
			var log, report strings.Builder
			sb, err := landlock.New(w.pol, landlock.Options{Audit: audit.New(&log), Server: "contain", Report: &report})
			landlockOrSkip(t, err)
			t.Cleanup(func() { sb.Close() })
			steps := append(attack.NameSteps(cases), "write:"+filepath.Join(w.writeRoot, "notes.txt"))
			out, err := execChild(t, sb, steps...).Output()
			require.NoError(t, err)
			t.Logf("child:\n%s\nreport:\n%s", out, report.String())
			assert.Contains(t, string(out), "write:"+filepath.Join(w.writeRoot, "notes.txt")+" ok")
			for _, c := range cases {
				if refuse {
					assert.False(t, attack.HasPayload(c.Path), "payload at %s", c.Path)
					continue
				}
				assert.True(t, attack.HasPayload(c.Path), "payload at %s", c.Path)
				assert.Contains(t, report.String(), c.Path)
				assert.Contains(t, log.String(), c.Path)
			}
			if !refuse {
				assert.Contains(t, report.String(), "+# mcpguard-payload")
				assert.Contains(t, log.String(), `"rule":"report.exec_config_changed"`)
			}
		})
	}
}

// TestContainGitWork: a server that runs git in a repository inside its
// write root still commits, fetches, stashes and collects garbage (git
// writes only its data below .git: objects, refs, logs, index, HEAD,
// FETCH_HEAD, the commit-graph, lock files), while it cannot point the
// repository elsewhere (commondir, objects/info/alternates) or write
// anything else in .git. Judged from the repository afterwards, by git
// run outside the sandbox.
func TestContainGitWork(t *testing.T) {
	rootOrSkip(t)
	gitPath := testenv.GitPath(t)
	w := newWorld(t)
	repo, remote := filepath.Join(w.writeRoot, "repo"), filepath.Join(w.readRoot, "remote")
	testenv.GitRepos(t, w.readRoot, repo, remote)
	git := func(args ...string) *exec.Cmd {
		cmd := exec.Command(gitPath, append(append(append([]string{}, testenv.GitArgs...), "-C", repo), args...)...)
		cmd.Env = testenv.GitEnv(w.readRoot)
		return cmd
	}
	require.NoError(t, exec.Command("chmod", "-R", "a+rwX", w.writeRoot, w.readRoot).Run())
	// a local fetch runs git-upload-pack through the shell
	w.pol.Exec.Allow = []string{gitPath, "/usr/lib/git-core", "/bin/sh", "/usr/bin/dash"}
	guarded := func(args ...string) string {
		cmd := git(args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		sb := newSandbox(t, w.pol)
		require.NoError(t, sb.Prepare(cmd))
		out, err := sandboxedOutput(sb, cmd)
		require.NoError(t, err, "guarded git %v: %s%s", args, out, stderr.String())
		return string(out)
	}
	require.NoError(t, os.WriteFile(filepath.Join(repo, "b.txt"), []byte("two\n"), 0o666))
	guarded("add", "b.txt")
	guarded("commit", "-qm", "two")
	guarded("fetch", "-q", remote, "main")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "a.txt"), []byte("changed\n"), 0o666))
	guarded("stash", "-q")
	guarded("stash", "pop", "-q")
	guarded("gc", "-q")
	guarded("commit-graph", "write", "--reachable")
	assert.Equal(t, "2\n", testenv.Git(t, w.readRoot, repo, "rev-list", "--count", "HEAD"))
	assert.FileExists(t, filepath.Join(repo, ".git", "FETCH_HEAD"))
	assert.FileExists(t, filepath.Join(repo, ".git", "objects", "info", "commit-graph"))
	assert.Contains(t, testenv.Git(t, w.readRoot, repo, "status", "--short"), "M a.txt")

	// The redirections: refused by name, whatever git would make of them.
	evil := filepath.Join(w.writeRoot, "evil")
	require.NoError(t, os.Mkdir(evil, 0o777))
	out := runRaw(t, w,
		"write:"+filepath.Join(repo, ".git", "commondir"),
		"write:"+filepath.Join(repo, ".git", "objects", "info", "alternates"),
		"write:"+filepath.Join(repo, ".git", "info", "attributes"),
		"write:"+filepath.Join(repo, ".git", "new-name"),
		"write:"+filepath.Join(evil, "config"))
	for _, p := range []string{"commondir", "objects/info/alternates", "info/attributes", "new-name"} {
		assert.NoFileExists(t, filepath.Join(repo, ".git", p))
		assert.NotContains(t, out, filepath.Join(repo, ".git", p)+" ok")
	}
	assert.Contains(t, out, "write:"+filepath.Join(evil, "config")+" ok", "outside a .git, config is any file")
}

// TestContainNestedWriteRoots: a write root inside another (policy init
// writes ${WS} and ${WS}/state for a server with a state directory) is
// written like the outer one: files and directories made in both, the
// protected names still refused in the inner one. Before, the second
// supervised mount refused every name made below it (issue 33's matrix).
func TestContainNestedWriteRoots(t *testing.T) {
	rootOrSkip(t)
	w := newWorld(t)
	inner := filepath.Join(w.writeRoot, "state")
	require.NoError(t, os.Mkdir(inner, 0o777))
	w.pol.Filesystem.Write = append(w.pol.Filesystem.Write, inner)
	out := runRaw(t, w, "write:"+filepath.Join(inner, "db.json"), "write:"+filepath.Join(w.writeRoot, "a.txt"),
		"name:creat#"+filepath.Join(inner, ".envrc"))
	assert.Contains(t, out, "state/db.json ok")
	assert.Contains(t, out, "ws/a.txt ok")
	assert.NotContains(t, out, ".envrc ok")
	assert.FileExists(t, filepath.Join(inner, "db.json"))
	assert.False(t, attack.HasPayload(filepath.Join(inner, ".envrc")))
}
