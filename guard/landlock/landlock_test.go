//go:build linux

package landlock_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/landlock"
	"github.com/mcpguard/mcpguard/guard/landlock/ruleset"
	"github.com/mcpguard/mcpguard/guard/launch"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/internal/testenv"
	"github.com/mcpguard/mcpguard/lab/attack"
)

// childEnv makes the test binary act as the guarded server: it performs
// the actions named on its command line and prints one verdict per action.
const childEnv = "MCPGUARD_LANDLOCK_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// child runs actions ("read:PATH", "write:PATH", "tmp:NAME" (a file in
// os.TempDir(), which it prints first), "connect:HOST:PORT",
// "udp:HOST:PORT", "exec:PATH", "signal:PID", "spawn") and prints "ACTION ok" or "ACTION denied" or "ACTION error: ...".
// "spawn" runs the rest of the actions in a grandchild (this binary again)
// and relays its lines prefixed with "grandchild ".
func child(actions []string) int {
	for i, a := range actions {
		if a == "spawn" {
			cmd := exec.Command(os.Args[0], actions[i+1:]...)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				fmt.Printf("spawn error: %v\n", err)
				return 1
			}
			sc := bufio.NewScanner(strings.NewReader(string(out)))
			for sc.Scan() {
				fmt.Printf("grandchild %s\n", sc.Text())
			}
			return 0
		}
		fmt.Printf("%s %s\n", a, verdict(do(a)))
	}
	return 0
}

func do(action string) error {
	verb, arg, _ := strings.Cut(action, ":")
	switch verb {
	case "read":
		_, err := os.ReadFile(arg)
		return err
	case "write":
		return os.WriteFile(arg, []byte("x"), 0o644)
	case "tmp":
		fmt.Printf("tmpdir %s\n", os.TempDir())
		return os.WriteFile(filepath.Join(os.TempDir(), arg), []byte("x"), 0o644)
	case "connect":
		c, err := net.Dial("tcp", arg)
		if err == nil {
			c.Close()
		}
		return err
	case "mptcp":
		d := net.Dialer{}
		d.SetMultipathTCP(true)
		c, err := d.Dial("tcp", arg)
		if err == nil {
			c.Close()
		}
		return err
	case "link":
		// link:FROM>TO makes a hard link.
		from, to, _ := strings.Cut(arg, ">")
		return os.Link(from, to)
	case "socket":
		kinds := map[string][3]int{
			"raw":    {syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_UDP},
			"sctp":   {syscall.AF_INET, syscall.SOCK_STREAM, 132},
			"packet": {syscall.AF_PACKET, syscall.SOCK_RAW, 0},
			"tcp":    {syscall.AF_INET6, syscall.SOCK_STREAM | syscall.SOCK_CLOEXEC, 0},
			"unix":   {syscall.AF_UNIX, syscall.SOCK_STREAM, 0},
		}
		k, ok := kinds[arg]
		if !ok {
			return fmt.Errorf("unknown socket kind %q", arg)
		}
		fd, err := syscall.Socket(k[0], k[1], k[2])
		if err == nil {
			syscall.Close(fd)
		}
		return err
	case "udp":
		c, err := net.Dial("udp", arg)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("exfil"))
		return err
	case "exec":
		return exec.Command(arg).Run()
	default:
		if f, ok := attack.Steps()[verb]; ok {
			return f(arg)
		}
	case "signal":
		pid, err := strconv.Atoi(arg)
		if err != nil {
			return err
		}
		// Signal 0 checks permission without delivering anything.
		return syscall.Kill(pid, 0)
	}
	return fmt.Errorf("unknown action %q", action)
}

func verdict(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return "denied"
	case errors.Is(err, syscall.EROFS):
		// Under a root proxy the launcher's mount namespace is read-only
		// outside the write roots: the VFS refuses before Landlock is
		// asked. TestEnforcementLandlockAlone covers Landlock itself.
		// (The child, as the server's user, cannot tell whether the proxy
		// is root.)
		return "denied"
	case errors.Is(err, syscall.ECONNREFUSED):
		// Under a root proxy the server has a network namespace of its
		// own: a destination the egress filter does not serve has no
		// listener there (the test's listeners stay up on the host
		// throughout, so a refusal cannot mean they were gone; the child,
		// as the server's user, cannot tell whether the proxy is root).
		return "denied"
	}
	return "error: " + err.Error()
}

// world is what the enforcement tests run against: roots, a secret
// outside them, and two loopback listeners, one allowed by port.
type world struct {
	readRoot, writeRoot, outside string
	allowed, denied              net.Listener
	pol                          *policy.Policy
}

func newWorld(t *testing.T) *world {
	t.Helper()
	base := t.TempDir()
	w := &world{
		readRoot:  filepath.Join(base, "ro"),
		writeRoot: filepath.Join(base, "ws"),
		outside:   filepath.Join(base, "home"),
	}
	for _, d := range []string{w.readRoot, w.writeRoot, w.outside} {
		require.NoError(t, os.Mkdir(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(w.readRoot, "doc.txt"), []byte("doc"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(w.outside, "id_rsa"), []byte("secret"), 0o600))
	w.allowed, w.denied = testenv.Listener(t), testenv.Listener(t)
	w.pol = &policy.Policy{
		Filesystem: policy.Filesystem{Read: []string{w.readRoot}, Write: []string{w.writeRoot}},
		Network:    policy.Network{Allow: []policy.NetRule{{Host: "127.0.0.1", Ports: []int{port(w.allowed)}}}},
		Exec:       policy.Exec{Allow: []string{"/usr/bin/true"}},
	}
	return w
}

func port(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }

// runGuarded starts this test binary as a guarded child doing actions and
// returns its verdicts by action.
func runGuarded(t *testing.T, sb *landlock.Sandbox, actions ...string) map[string]string {
	t.Helper()
	cmd := exec.Command(os.Args[0], actions...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	require.NoError(t, sb.Prepare(cmd))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := sandboxedOutput(sb, cmd)
	require.NoError(t, err, "guarded child: %s", stderr.String())
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimPrefix(line, "grandchild ") == "EXECUTED" {
			// A program run from a memfd printed its argument
			// (attack.MemfdExec): the fileless exec happened.
			got[line] = "ran"
			continue
		}
		i := strings.LastIndex(line, " ok")
		if i < 0 || i+3 != len(line) {
			i = strings.LastIndex(line, " denied")
		}
		if i < 0 {
			i = strings.Index(line, " error: ")
		}
		require.GreaterOrEqual(t, i, 0, "unparsable child line %q", line)
		action, v := line[:i], strings.TrimSpace(line[i+1:])
		got[action] = hiddenIsDenied(action, v)
	}
	return got
}

// hiddenIsDenied: a file that exists here but not in the server's view
// (below a directory the server's user could not search, covered by the
// launcher's stub tree: launch.View) was denied to it, as surely as by
// EACCES.
func hiddenIsDenied(action, v string) string {
	kind, arg, _ := strings.Cut(strings.TrimPrefix(action, "grandchild "), ":")
	if !strings.HasSuffix(v, ": no such file or directory") || !filepath.IsAbs(arg) || os.Geteuid() != 0 {
		return v
	}
	if _, err := os.Stat(arg); err == nil {
		return "denied"
	}
	if _, err := os.Stat(filepath.Dir(arg)); err == nil && kind == "write" {
		return "denied" // a new file in a directory hidden from it
	}
	return v
}

// sandboxedOutput runs a prepared command the way the proxy does: Start,
// Started (where the egress filter sets up the server's network and opens
// the launcher's gate), Wait, Close. It returns what the command wrote on
// stdout (unless the caller set Stdout).
func sandboxedOutput(sb *landlock.Sandbox, cmd *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &out
	}
	defer sb.Close()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if err := sb.Started(cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	err := cmd.Wait()
	return out.Bytes(), err
}

func newSandbox(t testing.TB, p *policy.Policy) *landlock.Sandbox {
	t.Helper()
	sb, err := landlock.New(p, landlock.Options{})
	landlockOrSkip(t, err)
	// Close is what removes what Prepare made outside the server (its
	// TMPDIR among them), for tests that prepare and never run.
	t.Cleanup(func() { sb.Close() })
	return sb
}

// landlockOrSkip skips where the kernel has no Landlock (the fail-closed
// tests below cover that case with an injected probe).
func landlockOrSkip(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, guard.ErrKernelRefused) {
		t.Skipf("kernel has no Landlock here: %v", err)
	}
	require.NoError(t, err)
}

func TestEnforcement(t *testing.T) {
	w := newWorld(t)
	// A symlink in a readable root that points at the secret.
	require.NoError(t, os.Symlink(filepath.Join(w.outside, "id_rsa"), filepath.Join(w.readRoot, "link")))
	sb := newSandbox(t, w.pol)
	t.Logf("Landlock ABI %d; limits: %s", sb.ABI(), sb.Limits())

	want := map[string]string{
		"read:" + filepath.Join(w.readRoot, "doc.txt"):   "ok",
		"read:" + filepath.Join(w.outside, "id_rsa"):     "denied",
		"write:" + filepath.Join(w.writeRoot, "out.txt"): "ok",
		"write:" + filepath.Join(w.readRoot, "out.txt"):  "denied",
		"write:" + filepath.Join(w.outside, "stage.txt"): "denied",
		"connect:" + w.allowed.Addr().String():           "ok",
		"connect:" + w.denied.Addr().String():            "denied",
		fmt.Sprintf("connect:[::1]:%d", port(w.denied)):  "denied",
		"exec:/usr/bin/true":                             "ok",
		"exec:/usr/bin/id":                               "denied",
	}
	if sb.ABI() < 4 {
		t.Logf("ABI %d has no network rules: connects are not restricted", sb.ABI())
		want["connect:"+w.denied.Addr().String()] = "ok"
		delete(want, fmt.Sprintf("connect:[::1]:%d", port(w.denied)))
	}
	if sb.ABI() >= 6 {
		// Landlock scopes signals to the sandbox from ABI 6 on: the guarded
		// tree cannot signal this (unsandboxed) test process.
		want[fmt.Sprintf("signal:%d", os.Getpid())] = "denied"
	}
	// Another process's environment (here the test's) is out of reach.
	want[fmt.Sprintf("read:/proc/%d/environ", os.Getpid())] = "denied"

	// A program copied into a memfd and run from it (fileless exec; the
	// copy is /bin/echo, not on exec.allow, printing EXECUTED) must not
	// run: Landlock does not judge files on the kernel's internal mounts,
	// so the launcher makes the server's memfds non-executable.
	memfd := "memfdexec:/bin/echo"
	actions := append(keys(want), "read:/proc/self/status", memfd)
	got := runGuarded(t, sb, append(actions, append([]string{"spawn"}, actions...)...)...)
	assert.NotContains(t, got, "EXECUTED", "a memfd ran in the child")
	assert.NotContains(t, got, "grandchild EXECUTED", "a memfd ran in the grandchild")
	assert.True(t, memfdRefused(got[memfd]), "child: %s: %s", memfd, got[memfd])
	assert.True(t, memfdRefused(got["grandchild "+memfd]), "grandchild: %s: %s", memfd, got["grandchild "+memfd])
	for a, v := range want {
		if v == "denied" && invisible(a) && os.Geteuid() == 0 {
			// Under a root proxy the launcher gives the server its own pid
			// namespace: this process does not exist there at all.
			assert.Contains(t, []string{"denied", "error: no such process", fmt.Sprintf("error: open /proc/%d/environ: no such file or directory", os.Getpid())}, got[a], "child: %s", a)
			assert.Contains(t, []string{"denied", "error: no such process", fmt.Sprintf("error: open /proc/%d/environ: no such file or directory", os.Getpid())}, got["grandchild "+a], "grandchild: %s", a)
			continue
		}
		assert.Equal(t, v, got[a], "child: %s", a)
		assert.Equal(t, v, got["grandchild "+a], "grandchild: %s", a)
	}
	// The server reads its own /proc/self; a child cannot (a documented
	// cost of keeping other processes' /proc/PID/environ out of reach).
	assert.Equal(t, "ok", got["read:/proc/self/status"])
	assert.Equal(t, "denied", got["grandchild read:/proc/self/status"])
	// The write that was allowed happened; the denied ones left nothing.
	assert.FileExists(t, filepath.Join(w.writeRoot, "out.txt"))
	assert.NoFileExists(t, filepath.Join(w.readRoot, "out.txt"))
	assert.NoFileExists(t, filepath.Join(w.outside, "stage.txt"))
}

// memfdRefused reports whether a memfdexec step was refused: its exec
// denied (the kernel made the memfd non-executable: vm.memfd_noexec=2 in
// the server's pid namespace, Linux 6.3+), or memfd_create refused by the
// seccomp filter where the kernel does not (ENOSYS).
func memfdRefused(v string) bool {
	return v == "denied" || v == "error: "+syscall.ENOSYS.Error()
}

// invisible reports whether action a targets this test process by pid.
func invisible(a string) bool {
	pid := fmt.Sprint(os.Getpid())
	return a == "signal:"+pid || a == "read:/proc/"+pid+"/environ"
}

// TestUnguardedBaseline runs the same child without the sandbox: every
// action the enforcement test expects denied succeeds here, so the denials
// there come from Landlock and not from the test's set-up.
func TestUnguardedBaseline(t *testing.T) {
	w := newWorld(t)
	cmd := exec.Command(os.Args[0],
		"read:"+filepath.Join(w.outside, "id_rsa"),
		"write:"+filepath.Join(w.outside, "stage.txt"),
		"connect:"+w.denied.Addr().String(),
		"exec:/usr/bin/id",
		"memfdexec:/bin/echo",
		"link:"+filepath.Join(w.outside, "id_rsa")+">"+filepath.Join(w.writeRoot, "hl"),
		fmt.Sprintf("read:/proc/%d/environ", os.Getpid()),
		fmt.Sprintf("signal:%d", os.Getpid()),
	)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.Output()
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "EXECUTED" {
			continue // the memfd's program ran (asserted below)
		}
		assert.True(t, strings.HasSuffix(line, " ok"), "unguarded: %s", line)
	}
	assert.Contains(t, string(out), "EXECUTED\n", "without the sandbox a program runs from a memfd")
}

// TestUDP: below ABI 10 Landlock does not see UDP, so the wrapper's
// socket filter refuses UDP sockets unless the policy admits DNS (port 53)
// or any port; from ABI 10 Landlock filters UDP by the policy's ports.
// Under a root proxy the server's network namespace has no way to the
// sink at all: whatever the socket calls answer, the evidence is that the
// sink receives nothing.
func TestUDP(t *testing.T) {
	w := newWorld(t)
	sink, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer sink.Close()
	send := "udp:" + sink.LocalAddr().String()
	received := func() string {
		require.NoError(t, sink.SetReadDeadline(time.Now().Add(2*time.Second)))
		buf := make([]byte, 16)
		n, _, _ := sink.ReadFrom(buf)
		return string(buf[:n])
	}

	sb := newSandbox(t, w.pol)
	got := runGuarded(t, sb, send)[send]
	if os.Geteuid() == 0 {
		assert.Empty(t, received(), "a datagram left the server's network namespace")
	} else {
		assert.Equal(t, "denied", got, "a policy without DNS or any-port rules")
	}

	// A policy that admits DNS needs UDP sockets: below ABI 10 they cannot
	// be filtered by port, so the datagram gets out, and Limits says so.
	w.pol.Network.Allow = append(w.pol.Network.Allow, policy.NetRule{Host: "192.0.2.53", Ports: []int{53}})
	sb = newSandbox(t, w.pol)
	got = runGuarded(t, sb, send)[send]
	switch {
	case os.Geteuid() == 0:
		assert.Empty(t, received(), "a datagram left the server's network namespace")
	case sb.ABI() >= 10:
		assert.Equal(t, "denied", got, "Landlock filters UDP by port")
	default:
		assert.Equal(t, "ok", got)
		assert.Contains(t, sb.Limits(), "UDP not covered")
		assert.Equal(t, "exfil", received(), "the datagram reached the sink")
	}
}

// TestOtherSockets: what Landlock's TCP rules do not see is refused by the
// socket filter: Multipath TCP (refused as unsupported, so the dialer falls
// back to TCP, which Landlock denies), SCTP, raw sockets.
func TestOtherSockets(t *testing.T) {
	if !ruleset.HasSocketFilter() {
		t.Skip("no seccomp socket filter on this architecture")
	}
	w := newWorld(t)
	sb := newSandbox(t, w.pol)
	if sb.ABI() < 4 {
		t.Skip("no network rules below ABI 4")
	}
	mptcp := "mptcp:" + w.denied.Addr().String()
	mptcpOK := "mptcp:" + w.allowed.Addr().String()
	got := runGuarded(t, sb, mptcp, mptcpOK, "socket:raw", "socket:sctp", "socket:packet", "socket:tcp", "socket:unix")
	assert.Equal(t, "denied", got[mptcp], "MPTCP to a denied port")
	assert.Equal(t, "ok", got[mptcpOK], "MPTCP falls back to TCP on an allowed port")
	for _, a := range []string{"socket:raw", "socket:sctp", "socket:packet"} {
		assert.Equal(t, "denied", got[a], a)
	}
	assert.Equal(t, "ok", got["socket:tcp"])
	if sb.ABI() < 9 {
		// Landlock cannot judge which unix socket a connect reaches below
		// ABI 9: the filter refuses unix sockets outright.
		assert.Equal(t, "denied", got["socket:unix"])
	} else {
		assert.Equal(t, "ok", got["socket:unix"])
	}
}

// TestAnyPortRule: a network rule without ports cannot be expressed by
// port, so without a network namespace (a non-root proxy) connecting is
// left unrestricted, and Limits says so. Under a root proxy the egress
// filter admits the rule's address on every port and nothing else.
func TestAnyPortRule(t *testing.T) {
	w := newWorld(t)
	w.pol.Network.Allow = []policy.NetRule{{Host: "127.0.0.2"}}
	sb := newSandbox(t, w.pol)
	sink, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer sink.Close()
	udp := "udp:" + sink.LocalAddr().String()
	got := runGuarded(t, sb, "connect:"+w.denied.Addr().String(), "read:"+filepath.Join(w.outside, "id_rsa"), udp)
	if os.Geteuid() == 0 {
		assert.Contains(t, sb.Limits(), "egress filter")
		// Not reached: refused by Landlock or the egress filter, or found
		// nothing (refused) in the server's network namespace.
		assert.Contains(t, []string{"denied", "error: dial tcp " + w.denied.Addr().String() + ": connect: connection refused"},
			got["connect:"+w.denied.Addr().String()], "another address on any port")
	} else {
		assert.Contains(t, sb.Limits(), "TCP connect unrestricted")
		assert.Equal(t, "ok", got["connect:"+w.denied.Addr().String()])
	}
	assert.Equal(t, "denied", got["read:"+filepath.Join(w.outside, "id_rsa")], "filesystem rules still hold")
	switch {
	case os.Geteuid() == 0:
		// UDP sockets are the server's to make in its own namespace; the
		// datagram goes nowhere.
		require.NoError(t, sink.SetReadDeadline(time.Now().Add(time.Second)))
		n, _, _ := sink.ReadFrom(make([]byte, 16))
		assert.Zero(t, n, "a datagram left the server's network namespace")
	case ruleset.HasSocketFilter() || sb.ABI() >= 10:
		assert.Equal(t, "denied", got[udp], "a host's TCP services do not open UDP")
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// noLandlock stands in for a kernel built without Landlock.
func noLandlock() (int, error) {
	return 0, fmt.Errorf("landlock_create_ruleset: %w", syscall.ENOSYS)
}

func TestFailClosedWithoutLandlock(t *testing.T) {
	for name, probe := range map[string]landlock.Probe{
		"ENOSYS": noLandlock,
		"ABI 0":  func() (int, error) { return 0, nil },
	} {
		t.Run(name, func(t *testing.T) {
			sb, err := landlock.New(&policy.Policy{}, landlock.Options{Probe: probe})
			require.Error(t, err)
			assert.Nil(t, sb)
			assert.ErrorIs(t, err, guard.ErrKernelRefused)
			assert.Contains(t, err.Error(), "landlock unavailable")
		})
	}
}

// TestWrapperFailsClosed: the wrapper itself refuses to run the program
// when it cannot enforce (here: a rule on a path that vanished), and says
// why on stderr with exit status 126. The program would leave a marker.
func TestWrapperFailsClosed(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	rules := &landlock.Rules{Paths: []landlock.PathRule{{Path: filepath.Join(dir, "gone"), Access: landlock.Read}}}
	enc, err := rules.Encode()
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], landlock.ExecArg, enc, "/usr/bin/touch", "touch", marker)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, landlock.WrapperExitCode, ee.ExitCode())
	assert.Contains(t, stderr.String(), "mcpguard landlock:")
	assert.Contains(t, stderr.String(), "gone")
	assert.NoFileExists(t, marker)

	// And in-process with a kernel without Landlock: an error, no exec.
	err = landlock.Wrap([]string{enc, "/usr/bin/touch", "touch", marker}, noLandlock)
	assert.ErrorIs(t, err, ruleset.ErrUnavailable)
	assert.NoFileExists(t, marker)
}

func TestPrepareRewritesCommand(t *testing.T) {
	sb, err := landlock.New(&policy.Policy{}, landlock.Options{Wrapper: "/opt/mcpguard", Probe: func() (int, error) { return 7, nil }})
	require.NoError(t, err)
	t.Cleanup(func() { sb.Close() })
	cmd := exec.Command("/usr/bin/python3", "-u", "script-that-does-not-exist.py", "--ws", "/ws")
	require.NoError(t, sb.Prepare(cmd))
	assert.Equal(t, "/opt/mcpguard", cmd.Path)
	require.Len(t, cmd.Args, 9)
	stage := launch.ExecArg
	if os.Geteuid() == 0 {
		stage = launch.StageArg
	}
	assert.Equal(t, []string{"/opt/mcpguard", stage}, cmd.Args[:2])
	assert.Equal(t, []string{"/usr/bin/python3", "/usr/bin/python3", "-u", "script-that-does-not-exist.py", "--ws", "/ws"}, cmd.Args[3:])
	spec, err := launch.DecodeSpec(cmd.Args[2])
	require.NoError(t, err)
	require.NotNil(t, spec.Landlock)
	r := spec.Landlock
	var execs []string
	for _, p := range r.Paths {
		if p.Access == landlock.Exec {
			execs = append(execs, p.Path)
		}
	}
	assert.Contains(t, execs, "/usr/bin/python3")
	assert.Contains(t, execs, "/lib64/ld-linux-x86-64.so.2", "the dynamic loader runs too")

	// An interpreter's script: its directory and that one's parent (a
	// shared ../lib) become readable, unless that would expose $HOME.
	base := t.TempDir()
	script := filepath.Join(base, "servers", "notes", "server.py")
	require.NoError(t, os.MkdirAll(filepath.Dir(script), 0o755))
	require.NoError(t, os.WriteFile(script, []byte("print(1)\n"), 0o644))
	for _, tc := range []struct {
		home       string
		want, deny []string
	}{
		{"/nonexistent-home", []string{filepath.Dir(script), filepath.Join(base, "servers")}, nil},
		{filepath.Join(base, "servers"), []string{filepath.Dir(script)}, []string{filepath.Join(base, "servers")}},
		{filepath.Dir(script), nil, []string{filepath.Dir(script), filepath.Join(base, "servers")}},
	} {
		cmd := exec.Command("/usr/bin/python3", "-u", script)
		cmd.Env = []string{"HOME=" + tc.home, "PATH=/usr/bin"}
		require.NoError(t, sb.Prepare(cmd))
		spec, err := launch.DecodeSpec(cmd.Args[2])
		require.NoError(t, err)
		r := spec.Landlock
		var code []string
		for _, p := range r.Paths {
			if p.Why == "runtime read" {
				code = append(code, p.Path)
			}
		}
		for _, w := range tc.want {
			assert.True(t, slices.ContainsFunc(code, func(c string) bool { return w == c || strings.HasPrefix(w, c+"/") }),
				"HOME=%s: %s readable (%v)", tc.home, w, code)
		}
		for _, d := range tc.deny {
			assert.NotContains(t, code, d, "HOME=%s", tc.home)
		}
	}
	// A compiled server gets no code directory: its flags are not scripts.
	cmd = exec.Command("/usr/bin/true", "--ws", script)
	require.NoError(t, sb.Prepare(cmd))
	assert.NotContains(t, cmd.Args[2], filepath.Dir(script))

	bad := exec.Command("no-such-program-anywhere")
	assert.Error(t, sb.Prepare(bad), "a command that cannot be found is not wrapped")
}

func TestLimitsByABI(t *testing.T) {
	root := os.Geteuid() == 0
	for abi, want := range map[int][]string{
		3:  {"no TCP rules (needs ABI 4)", "UDP", "pathname unix sockets", "signals"},
		7:  {"by port only, no IP filtering", "UDP", "pathname unix sockets"},
		10: {"by port only, no IP filtering"},
	} {
		sb, err := landlock.New(&policy.Policy{}, landlock.Options{Wrapper: "/x", Probe: func() (int, error) { return abi, nil }})
		require.NoError(t, err)
		t.Cleanup(func() { sb.Close() })
		if root {
			// A root proxy gives the server a network namespace whose
			// only way out is the egress filter, on every ABI.
			want = []string{"network through the egress filter"}
		}
		for _, w := range want {
			assert.Contains(t, sb.Limits(), w, "ABI %d", abi)
		}
		if abi >= 10 || root {
			assert.NotContains(t, sb.Limits(), "UDP")
			assert.NotContains(t, sb.Limits(), "by port only")
		}
		assert.Contains(t, sb.Limits(), "ABI "+strconv.Itoa(abi))
	}
}

// TestServerScratch: a server's temporary files just work under L3 without
// granting the shared /tmp: its TMPDIR is a directory of its own, removed
// with the session, while /tmp itself stays refused. A TMPDIR the policy
// already grants (inside a write root) is kept.
func TestServerScratch(t *testing.T) {
	w := newWorld(t)
	outside := filepath.Join(os.TempDir(), fmt.Sprintf("mcpguard-scratch-test-%d", os.Getpid()))
	t.Cleanup(func() { os.Remove(outside) })
	run := func(tmpdir string) (string, string) {
		sb := newSandbox(t, w.pol)
		cmd := exec.Command(os.Args[0], "tmp:a.txt", "write:"+outside)
		cmd.Env = append(os.Environ(), childEnv+"=1", "TMPDIR="+tmpdir, "TMP=/tmp", "TEMP=/tmp")
		require.NoError(t, sb.Prepare(cmd))
		out, err := sandboxedOutput(sb, cmd)
		require.NoError(t, err)
		t.Logf("child:\n%s", out)
		m := regexp.MustCompile(`(?m)^tmpdir (.*)$`).FindStringSubmatch(string(out))
		require.NotNil(t, m, "the child printed no tmpdir")
		return string(out), m[1]
	}

	out, dir := run("/tmp")
	assert.Contains(t, out, "tmp:a.txt ok")
	assert.Contains(t, out, "write:"+outside+" denied", "the shared /tmp stays refused")
	assert.NotEqual(t, "/tmp", dir)
	assert.NoDirExists(t, dir, "the scratch goes with the session")
	assert.NoFileExists(t, filepath.Join("/tmp", "a.txt"))

	granted := filepath.Join(w.writeRoot, "tmp")
	require.NoError(t, os.Mkdir(granted, 0o777))
	out, dir = run(granted)
	assert.Contains(t, out, "tmp:a.txt ok")
	assert.Equal(t, granted, dir, "a TMPDIR in a write root is the policy's choice")
	assert.FileExists(t, filepath.Join(granted, "a.txt"))
}
