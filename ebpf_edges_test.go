//go:build linux

package mcpguard_test

// Kernel-enforcement edge cases of L3 on BPF LSM. They need -bpf, root and
// a kernel that enforces BPF LSM; on the build machines that is the VM:
//
//	mcpguard vm -- go test -bpf -run 'Edges|LSM' .
//
// Each case starts this test binary again as a guarded "server" (see
// edgeChild) that performs a list of steps with raw system calls and prints
// one line per step: "ok", "EPERM" or "err <why>". Outcomes are checked
// from outside too: files that must not exist, sockets that must not have
// been reached, processes that must be gone.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/bpf"
	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/guard/policy"
	guardruntime "github.com/mcpguard/mcpguard/guard/runtime"
	"github.com/mcpguard/mcpguard/guard/sandbox"
	"github.com/mcpguard/mcpguard/internal/testenv"
	"github.com/mcpguard/mcpguard/lab/attack"
)

const edgeStepsEnv = "MCPGUARD_EDGE_STEPS"

func init() { edgeChild() }

// edgeChild runs the steps in $MCPGUARD_EDGE_STEPS (a JSON list of
// [op, args...]) and exits, when this binary was started as a guarded
// server by one of the edge tests.
func edgeChild() {
	raw := os.Getenv(edgeStepsEnv)
	if raw == "" {
		return
	}
	var steps [][]string
	if err := json.Unmarshal([]byte(raw), &steps); err != nil {
		fmt.Println("steps err", err)
		os.Exit(2)
	}
	for _, s := range steps {
		fmt.Println(s[0], edgeResult(edgeStep(s)))
	}
	os.Exit(0)
}

func edgeResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, unix.EPERM):
		return "EPERM"
	case errors.Is(err, unix.EXDEV):
		// A link across mounts: the write root is a mount of its own in
		// the launcher's namespace.
		return "EXDEV"
	case errors.Is(err, unix.EROFS):
		// The launcher's mount namespace is read-only outside the write
		// roots: the VFS refuses before any LSM hook runs.
		return "EROFS"
	case errors.Is(err, unix.ECONNREFUSED):
		// The launcher's network namespace has no listener there.
		return "ECONNREFUSED"
	}
	return "err " + strings.ReplaceAll(err.Error(), "\n", " ")
}

func edgeStep(s []string) error {
	arg := func(i int) string {
		if i < len(s) {
			return s[i]
		}
		return ""
	}
	switch s[0] {
	case "read":
		_, err := os.ReadFile(arg(1))
		return err
	case "write":
		return os.WriteFile(arg(1), []byte("written by a guarded process\n"), 0o644)
	case "tmpwrite":
		// A temporary file where the runtime puts them (os.TempDir).
		if os.TempDir() == "/tmp" {
			return errors.New("TMPDIR is the shared /tmp")
		}
		return os.WriteFile(filepath.Join(os.TempDir(), arg(1)), []byte("scratch\n"), 0o644)
	case "link":
		return os.Link(arg(1), arg(2))
	case "exec":
		return exec.Command(arg(1), s[2:]...).Run()
	case "git":
		// git HOME DIR ARGS...: git as the tests run it (testenv.GitArgs)
		cmd := exec.Command(arg(1), append(append(append([]string{}, testenv.GitArgs...), "-C", arg(3)), s[4:]...)...)
		cmd.Env = testenv.GitEnv(arg(2))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	case "connect":
		return edgeSocket(unix.SOCK_STREAM, arg(1), arg(2), false)
	case "sendto":
		return edgeSocket(unix.SOCK_DGRAM, arg(1), arg(2), true)
	case "uring":
		return attack.URingOpen(arg(1), arg(2) == "async")
	case "spawn", "daemon":
		self, err := os.Executable()
		if err != nil {
			return err
		}
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), edgeStepsEnv+"="+arg(1))
		if s[0] == "daemon" {
			// The grandchild of a double fork: a new session, not waited
			// for, outliving the server.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			return cmd.Start()
		}
		out, err := cmd.Output()
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			fmt.Println("child." + line)
		}
		return err
	case "sleep":
		ms, _ := strconv.Atoi(arg(1))
		time.Sleep(time.Duration(ms) * time.Millisecond)
		return nil
	case "record":
		// Run a step and keep its result in a file (for a daemon, whose
		// output goes nowhere).
		return os.WriteFile(arg(1), []byte(edgeResult(edgeStep(s[2:]))), 0o644)
	case "waitfile":
		for {
			if _, err := os.Stat(arg(1)); err == nil {
				return nil
			}
			time.Sleep(10 * time.Millisecond)
		}
	case "pidfile":
		return os.WriteFile(arg(1), []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	if f, ok := attack.Steps()[s[0]]; ok {
		return f(arg(1))
	}
	return fmt.Errorf("unknown step %q", s[0])
}

// edgeSocket connects (or sends one datagram, unconnected) to ip:port with
// raw syscalls, so that IPv4-mapped IPv6 addresses go out as AF_INET6.
func edgeSocket(typ int, ip, port string, send bool) error {
	addr := net.ParseIP(ip)
	p, _ := strconv.Atoi(port)
	var (
		sa     unix.Sockaddr
		family = unix.AF_INET6
	)
	if strings.Contains(ip, ":") {
		var a [16]byte
		copy(a[:], addr.To16())
		sa = &unix.SockaddrInet6{Port: p, Addr: a}
	} else {
		family = unix.AF_INET
		var a [4]byte
		copy(a[:], addr.To4())
		sa = &unix.SockaddrInet4{Port: p, Addr: a}
	}
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if send {
		return unix.Sendto(fd, []byte("exfil"), 0, sa)
	}
	return unix.Connect(fd, sa)
}

// edgeSession starts a guarded session for p; it skips where the kernel
// refuses BPF LSM.
func edgeSession(t *testing.T, p *policy.Policy) (*sandbox.Session, *strings.Builder) {
	t.Helper()
	testenv.RequireBPF(t)
	var log strings.Builder
	s, err := sandbox.New(context.Background(), p, sandbox.Options{Server: "edge", Config: configs.CEBPF, Audit: audit.New(&log)})
	testenv.SkipIfNotSupported(t, err)
	t.Cleanup(func() { s.Close() })
	return s, &log
}

// edgeRun runs steps in a guarded child of session s and returns each
// step's result by op (later duplicates get a #n suffix).
func edgeRun(t *testing.T, s *sandbox.Session, steps ...[]string) map[string]string {
	t.Helper()
	wait := edgeStart(t, s, steps...)
	res, err := wait()
	require.NoError(t, err, "guarded helper: %v", res)
	return res
}

// edgeRunMode runs steps as a launched server ("launched") or from a task
// joined to s with its maps only, no launcher in front of the hooks
// ("joined").
func edgeRunMode(t *testing.T, s *sandbox.Session, mode string, steps ...[]string) map[string]string {
	t.Helper()
	if mode == "launched" {
		return edgeRun(t, s, steps...)
	}
	require.NoError(t, s.Prepare(exec.Command("/bin/true"))) // maps only; never run
	return edgeJoined(t, s, steps...)
}

// edgeSteps splits lab/attack's "OP:ARG" steps for the edge child.
func edgeSteps(steps []string) [][]string {
	var out [][]string
	for _, st := range steps {
		name, arg, _ := strings.Cut(st, ":")
		out = append(out, []string{name, arg})
	}
	return out
}

// edgeStart starts the guarded child; wait collects its results (and may
// run on another goroutine).
func edgeStart(t *testing.T, s *sandbox.Session, steps ...[]string) (wait func() (map[string]string, error)) {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	raw, _ := json.Marshal(steps)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), edgeStepsEnv+"="+string(raw))
	require.NoError(t, s.Prepare(cmd))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	require.NoError(t, s.Started(cmd.Process.Pid))
	return func() (map[string]string, error) {
		res := map[string]string{}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			op, r, _ := strings.Cut(sc.Text(), " ")
			key := op
			for n := 2; ; n++ {
				if _, dup := res[key]; !dup {
					break
				}
				key = op + "#" + strconv.Itoa(n)
			}
			res[key] = r
		}
		return res, cmd.Wait()
	}
}

// edgeJoined runs steps in a child that is not started through the
// launcher: a plain child of this (root) test process, with every
// capability and no seccomp filter, joined to session s by tgid (as
// BenchmarkLSM joins itself) before it does anything. What it cannot do,
// the BPF LSM hooks alone refused. s must have been prepared.
func edgeJoined(t *testing.T, s *sandbox.Session, steps ...[]string) map[string]string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	gate := filepath.Join(t.TempDir(), "go")
	raw, _ := json.Marshal(append([][]string{{"waitfile", gate}}, steps...))
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), edgeStepsEnv+"="+string(raw))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	require.NoError(t, s.Started(cmd.Process.Pid))
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	res := map[string]string{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		op, r, _ := strings.Cut(sc.Text(), " ")
		if op == "waitfile" {
			continue
		}
		key := op
		for n := 2; ; n++ {
			if _, dup := res[key]; !dup {
				break
			}
			key = op + "#" + strconv.Itoa(n)
		}
		res[key] = r
	}
	require.NoError(t, cmd.Wait(), "joined helper: %s", stderr.String())
	return res
}

// edgeDirs makes ws (the policy's write root), a secret outside it, and a
// sibling ws-evil that shares ws's name as a string prefix.
type edgeDirs struct{ root, ws, evil, secret string }

func newEdgeDirs(t *testing.T) edgeDirs {
	root := t.TempDir()
	d := edgeDirs{root: root, ws: filepath.Join(root, "ws"), evil: filepath.Join(root, "ws-evil"),
		secret: filepath.Join(root, "home", ".ssh", "id_rsa")}
	for _, dir := range []string{d.ws, d.evil, filepath.Dir(d.secret)} {
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	require.NoError(t, os.WriteFile(d.secret, []byte("CANARY-SSH\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(d.ws, "notes.txt"), []byte("hello\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d.evil, "loot.txt"), []byte("evil\n"), 0o644))
	return d
}

func (d edgeDirs) policy() *policy.Policy {
	return &policy.Policy{Server: "edge", Filesystem: policy.Filesystem{Write: []string{d.ws}}}
}

func TestEdgesFailClosedWithoutKernel(t *testing.T) {
	// Whatever this kernel is, C-ebpf either gets real enforcement or
	// refuses to build, and then `mcpguard run` never starts the server.
	pol := filepath.Join(t.TempDir(), "p.json")
	require.NoError(t, os.WriteFile(pol, []byte(`{"server":"edge","filesystem":{"write":["/nonexistent"]}}`), 0o644))
	s, err := configs.Build(configs.CEBPF, configs.Options{Server: "edge", PolicyFile: pol})
	if err == nil {
		require.NotNil(t, s.Sandbox)
		require.Equal(t, "ebpf", s.Sandbox.Name())
		require.NoError(t, s.Sandbox.Close())
		return
	}
	require.ErrorIs(t, err, configs.ErrUnavailable)
	if testing.Short() {
		t.Skip("-short: the end-to-end half builds the CLI")
	}

	// End to end: the server would leave a marker the moment it ran.
	// Exit status 5 (not started), the config's reason on stderr, and no
	// marker, now or after the server would have had time to write it.
	bin := filepath.Join(t.TempDir(), "mcpguard")
	build := exec.Command("go", "build", "-o", bin, "./cmd/mcpguard")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	marker := filepath.Join(t.TempDir(), "server-ran")
	run := exec.Command(bin, "run", "--config", configs.CEBPF, "--policy", pol, "--",
		"sh", "-c", `echo ran > "$0"`, marker)
	var stderr strings.Builder
	run.Stderr = &stderr
	err = run.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "stderr: %s", stderr.String())
	assert.Equal(t, 5, exit.ExitCode(), "stderr: %s", stderr.String())
	assert.Contains(t, stderr.String(), "server not started")
	assert.Contains(t, stderr.String(), "config not available")
	time.Sleep(200 * time.Millisecond)
	assert.NoFileExists(t, marker, "the server ran although its config failed closed")
}

func TestEdgesFailClosedMapsUnavailable(t *testing.T) {
	testenv.RequireBPF(t)
	// Pins on a filesystem that is not bpffs: refused before any server.
	_, err := sandbox.New(context.Background(), &policy.Policy{}, sandbox.Options{PinRoot: t.TempDir()})
	require.Error(t, err)
	testenv.SkipIfNotSupported(t, bpfOrNil(err))
	require.ErrorIs(t, err, bpf.ErrNotBPFFS)

	// Programs attached but a pinned map removed: refused too.
	root := "/sys/fs/bpf/mcpguard-edge-failclosed"
	o, err := bpf.Attach(root)
	require.NoError(t, err)
	o.Close()
	t.Cleanup(func() { bpf.Detach(root) })
	require.NoError(t, os.Remove(filepath.Join(root, bpf.Version(), "fs_rules")))
	_, err = sandbox.New(context.Background(), &policy.Policy{}, sandbox.Options{PinRoot: root})
	require.ErrorContains(t, err, "fs_rules")
}

// bpfOrNil keeps err when it is the kernel refusing (to skip on it).
func bpfOrNil(err error) error {
	if errors.Is(err, guard.ErrKernelRefused) {
		return err
	}
	return nil
}

func TestEdgesWorkspaceAndPrefix(t *testing.T) {
	d := newEdgeDirs(t)
	s, log := edgeSession(t, d.policy())
	require.NoError(t, s.Prepare(exec.Command("/bin/true"))) // maps only: BPF alone, no mount view
	res := edgeJoined(t, s,
		[]string{"read", filepath.Join(d.ws, "notes.txt")},
		[]string{"write", filepath.Join(d.ws, "out.txt")},
		[]string{"read", filepath.Join(d.evil, "loot.txt")},
		[]string{"write", filepath.Join(d.evil, "planted.txt")},
		[]string{"read", d.secret},
		[]string{"read", "/etc/hosts"},
		[]string{"read", "/etc/shadow"},
		[]string{"read", "/proc/self/status"},
		[]string{"read", "/proc/1/environ"},
	)
	assert.Equal(t, map[string]string{
		"read": "ok", "write": "ok", // the workspace
		"read#2": "EPERM", "write#2": "EPERM", // /ws does not admit /ws-evil (the hook, by inode, not by prefix)
		"read#3": "EPERM",                 // the secret
		"read#4": "ok", "read#5": "EPERM", // baseline /etc files, not the rest of /etc
		"read#6": "ok", "read#7": "EPERM", // own /proc, not another process's
	}, res)
	b, err := os.ReadFile(filepath.Join(d.ws, "out.txt"))
	require.NoError(t, err)
	assert.Equal(t, "written by a guarded process\n", string(b))
	assert.NoFileExists(t, filepath.Join(d.evil, "planted.txt"))
	s.Close()
	assert.Contains(t, log.String(), `"rule":"file.open_denied"`)
	assert.Contains(t, log.String(), d.secret)
	assert.Contains(t, log.String(), `"rule":"file.proc_denied"`)
}

// Persistence files stay read-only inside a write root.
func TestEdgesProtectedNames(t *testing.T) {
	d := newEdgeDirs(t)
	hooks := filepath.Join(d.ws, ".git", "hooks")
	require.NoError(t, os.MkdirAll(hooks, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(d.ws, ".bashrc"), []byte("# user's\n"), 0o644))
	s, log := edgeSession(t, d.policy())
	res := edgeRun(t, s,
		[]string{"write", filepath.Join(d.ws, ".envrc")},
		[]string{"write", filepath.Join(d.ws, ".bashrc")},
		[]string{"write", filepath.Join(hooks, "pre-push")},
		[]string{"write", filepath.Join(hooks, "pre-push.sample")},
		[]string{"write", filepath.Join(d.ws, ".git", "HEAD")},
		[]string{"read", filepath.Join(d.ws, ".bashrc")},
	)
	// The launcher binds .git/hooks and an existing .bashrc read-only
	// (EROFS: by identity, before any name check); .envrc, created during
	// the session, is refused by name (EPERM).
	assert.Equal(t, map[string]string{
		"write": "EPERM", "write#2": "EROFS", // created, overwritten
		"write#3": "EROFS",            // a hook
		"write#4": "EROFS",            // the hooks directory is read-only as a whole
		"write#5": "ok", "read": "ok", // the rest of .git, reading
	}, res)
	assert.NoFileExists(t, filepath.Join(d.ws, ".envrc"))
	assert.NoFileExists(t, filepath.Join(hooks, "pre-push"))
	b, err := os.ReadFile(filepath.Join(d.ws, ".bashrc"))
	require.NoError(t, err)
	assert.Equal(t, "# user's\n", string(b))
	s.Close()
	assert.Contains(t, log.String(), `"rule":"file.protected_denied"`)
}

func TestEdgesTmpStaging(t *testing.T) {
	d := newEdgeDirs(t)
	s, log := edgeSession(t, d.policy())
	stage := filepath.Join(os.TempDir(), fmt.Sprintf("mcpguard-stage-%d", os.Getpid()))
	steps := [][]string{{"write", stage}, {"write", filepath.Join(d.root, "stage")}}
	// Launched: the mounts outside the write root are read-only.
	res := edgeRun(t, s, steps...)
	assert.Equal(t, map[string]string{"write": "EROFS", "write#2": "EROFS"}, res)
	// Joined without the launcher: the LSM hooks alone refuse.
	res = edgeJoined(t, s, steps...)
	assert.Equal(t, map[string]string{"write": "EPERM", "write#2": "EPERM"}, res)
	assert.NoFileExists(t, stage, "a denied create leaves no empty file")
	assert.NoFileExists(t, filepath.Join(d.root, "stage"))
	s.Close()
	assert.Contains(t, log.String(), `"rule":"file.write_denied"`)
}

// TestEdgesScratch: a launched server's temporary files just work without
// a grant of the shared /tmp (still refused): its TMPDIR is a directory
// of its own (launch.Scratch), gone after the session.
func TestEdgesScratch(t *testing.T) {
	d := newEdgeDirs(t)
	s, _ := edgeSession(t, d.policy())
	before, err := filepath.Glob(filepath.Join(os.TempDir(), "mcpguard-tmp-*"))
	require.NoError(t, err)
	stage := filepath.Join(os.TempDir(), fmt.Sprintf("mcpguard-stage-%d", os.Getpid()))
	res := edgeRun(t, s, []string{"tmpwrite", "a.txt"}, []string{"write", stage})
	assert.Equal(t, map[string]string{"tmpwrite": "ok", "write": "EROFS"}, res)
	require.NoError(t, s.Close())
	after, err := filepath.Glob(filepath.Join(os.TempDir(), "mcpguard-tmp-*"))
	require.NoError(t, err)
	assert.ElementsMatch(t, before, after, "the scratch goes with the session")
}

func TestEdgesSymlinkAndHardlink(t *testing.T) {
	d := newEdgeDirs(t)
	require.NoError(t, os.Symlink(d.secret, filepath.Join(d.ws, "sym")))
	// A hard link planted in the workspace before the server starts (the
	// server itself may not make one).
	require.NoError(t, os.Link(d.secret, filepath.Join(d.ws, "hard")))
	s, log := edgeSession(t, d.policy())
	require.NoError(t, s.Prepare(exec.Command("/bin/true"))) // maps only: BPF alone, no mount view
	res := edgeJoined(t, s,
		[]string{"read", filepath.Join(d.ws, "sym")},
		[]string{"read", filepath.Join(d.ws, "hard")},
		[]string{"link", d.secret, filepath.Join(d.ws, "hard2")},
		[]string{"link", filepath.Join(d.ws, "notes.txt"), filepath.Join(d.ws, "notes2")},
	)
	// Without the launcher's mount view (which hides the secret's
	// directory: ENOENT before any hook), the hooks alone.
	assert.Equal(t, map[string]string{"read": "EPERM", "read#2": "EPERM", "link": "EPERM", "link#2": "EPERM"}, res)
	assert.NoFileExists(t, filepath.Join(d.ws, "hard2"))
	s.Close()
	assert.Contains(t, log.String(), `"rule":"file.hardlink_denied"`)
	assert.Contains(t, log.String(), `"rule":"file.link_denied"`)
}

// edgeListen returns a TCP listener and a UDP socket on addr that record
// whether anything reached them.
func edgeListen(t *testing.T, network, addr string) (port string, reached func() bool) {
	t.Helper()
	got := make(chan struct{}, 1)
	switch network {
	case "tcp", "tcp6":
		l, err := net.Listen(network, addr)
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		go func() {
			if c, err := l.Accept(); err == nil {
				got <- struct{}{}
				c.Close()
			}
		}()
		_, port, _ = net.SplitHostPort(l.Addr().String())
	default:
		c, err := net.ListenPacket(network, addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		go func() {
			buf := make([]byte, 64)
			if _, _, err := c.ReadFrom(buf); err == nil {
				got <- struct{}{}
			}
		}()
		_, port, _ = net.SplitHostPort(c.LocalAddr().String())
	}
	return port, func() bool {
		select {
		case <-got:
			return true
		case <-time.After(300 * time.Millisecond):
			return false
		}
	}
}

func TestEdgesNetwork(t *testing.T) {
	testenv.RequireBPF(t)
	allowed, allowedReached := edgeListen(t, "tcp", "127.0.0.2:0")
	sink, sinkReached := edgeListen(t, "tcp", "127.0.0.1:0")
	sink6, sink6Reached := edgeListen(t, "tcp6", "[::1]:0")
	udp, udpReached := edgeListen(t, "udp", "127.0.0.1:0")
	ap, _ := strconv.Atoi(allowed)
	d := newEdgeDirs(t)
	p := d.policy()
	p.Network.Allow = []policy.NetRule{{Host: "127.0.0.2", Ports: []int{ap}}}
	s, log := edgeSession(t, p)
	res := edgeRun(t, s,
		[]string{"connect", "127.0.0.2", allowed},              // the allowed API
		[]string{"connect", "127.0.0.1", sink},                 // localhost exfiltration
		[]string{"connect", "::1", sink6},                      // IPv6 loopback
		[]string{"connect", "::ffff:127.0.0.1", sink},          // IPv4-mapped sink
		[]string{"connect", "::ffff:127.0.0.2", allowed},       // IPv4-mapped allowed
		[]string{"connect", "127.0.0.2", strconv.Itoa(ap + 1)}, // right host, wrong port
		[]string{"sendto", "127.0.0.1", udp},                   // unconnected UDP
		[]string{"connect", "192.0.2.1", "80"},                 // no rule at all
		[]string{"sendto", "192.0.2.1", "53"},                  // no rule at all
	)
	// The server is in a network namespace of its own: a destination the
	// egress filter does not serve has no listener there (ECONNREFUSED;
	// a datagram goes nowhere); loopback is the server's own (its local
	// workers), so the hooks admit it there, and deny what no rule names.
	assert.Equal(t, map[string]string{
		"connect": "ok", "connect#2": "ECONNREFUSED", "connect#3": "ECONNREFUSED", "connect#4": "ECONNREFUSED",
		"connect#5": "ok", "connect#6": "ECONNREFUSED", "sendto": "ok",
		"connect#7": "EPERM", "sendto#2": "EPERM",
	}, res)
	assert.True(t, allowedReached(), "the allowed endpoint was reached")
	assert.False(t, sinkReached(), "the IPv4 sink was not reached")
	assert.False(t, sink6Reached(), "the IPv6 sink was not reached")
	assert.False(t, udpReached(), "the UDP sink got no datagram")
	s.Close()
	assert.Contains(t, log.String(), `"rule":"net.connect_denied"`)
	assert.Contains(t, log.String(), `"target":"192.0.2.1:80"`)
	assert.Contains(t, log.String(), `"rule":"net.sendto_denied"`)
}

// TestEdgesNetworkJoined: the session's net rules are about the server's
// own network namespace (its loopback, the egress filter's listeners). A
// task of the session in the guard's namespace (joined by tgid, every
// capability, no seccomp) reaches none of them: there, loopback is the
// host's services.
func TestEdgesNetworkJoined(t *testing.T) {
	sink, sinkReached := edgeListen(t, "tcp", "127.0.0.1:0")
	sink6, sink6Reached := edgeListen(t, "tcp6", "[::1]:0")
	udp, udpReached := edgeListen(t, "udp", "127.0.0.1:0")
	d := newEdgeDirs(t)
	s, log := edgeSession(t, d.policy())                     // no network: the rules admit loopback
	require.NoError(t, s.Prepare(exec.Command("/bin/true"))) // maps only; never run
	res := edgeJoined(t, s,
		[]string{"connect", "127.0.0.1", sink},
		[]string{"connect", "::1", sink6},
		[]string{"connect", "::ffff:127.0.0.1", sink},
		[]string{"sendto", "127.0.0.1", udp},
	)
	assert.Equal(t, map[string]string{
		"connect": "EPERM", "connect#2": "EPERM", "connect#3": "EPERM", "sendto": "EPERM",
	}, res)
	assert.False(t, sinkReached(), "the IPv4 sink was not reached")
	assert.False(t, sink6Reached(), "the IPv6 sink was not reached")
	assert.False(t, udpReached(), "the UDP sink got no datagram")
	s.Close()
	assert.Contains(t, log.String(), `"rule":"net.connect_denied"`)
	assert.Contains(t, log.String(), `"rule":"net.sendto_denied"`)
}

func TestEdgesChildrenInherit(t *testing.T) {
	d := newEdgeDirs(t)
	s, _ := edgeSession(t, d.policy())
	grand, _ := json.Marshal([][]string{{"read", d.secret}, {"read", filepath.Join(d.ws, "notes.txt")}})
	child, _ := json.Marshal([][]string{{"read", d.secret}, {"spawn", string(grand)}})
	require.NoError(t, s.Prepare(exec.Command("/bin/true"))) // maps only: BPF alone, no mount view
	res := edgeJoined(t, s, []string{"spawn", string(child)})
	assert.Equal(t, map[string]string{
		"child.read":       "EPERM",                             // the child
		"child.child.read": "EPERM", "child.child.read#2": "ok", // the grandchild
		"child.spawn": "ok", "spawn": "ok",
	}, res)
}

// A daemon double-forked by the server does not outlive it: the server
// is the first child of the launcher's pid 1, whose exit ends the pid
// namespace and everything in it. The server waits until its daemon runs,
// then exits; a surviving daemon would write late.txt in the workspace (a
// write its policy allows) a second later. It never appears.
func TestEdgesDaemonOutlivesServer(t *testing.T) {
	d := newEdgeDirs(t)
	s, _ := edgeSession(t, d.policy())
	pidfile := filepath.Join(d.ws, "daemon.pid")
	late := filepath.Join(d.ws, "late.txt")
	daemon, _ := json.Marshal([][]string{{"pidfile", pidfile}, {"sleep", "1000"}, {"write", late}, {"sleep", "60000"}})
	res := edgeRun(t, s, []string{"daemon", string(daemon)}, []string{"waitfile", pidfile})
	assert.Equal(t, map[string]string{"daemon": "ok", "waitfile": "ok"}, res, "the server exited, after its daemon started")
	time.Sleep(3 * time.Second)
	assert.NoFileExists(t, late, "the daemon died with the server's pid namespace")
	require.NoError(t, s.Close())
}

// globalPid finds the pid, in this (the initial) pid namespace, of the
// process that calls itself nsPid in its own namespace, inside an mcpguard
// session cgroup.
func globalPid(t *testing.T, nsPid string) string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(st), "\n") {
			f := strings.Fields(l)
			if len(f) >= 3 && f[0] == "NSpid:" && f[len(f)-1] == nsPid && f[1] == e.Name() {
				cg, _ := os.ReadFile("/proc/" + e.Name() + "/cgroup")
				if strings.Contains(string(cg), "/mcpguard/") {
					return e.Name()
				}
			}
		}
	}
	t.Fatalf("no process with namespace pid %s in a session", nsPid)
	return ""
}

// A guarded process moved out of the session cgroup (here by root, from
// outside) stays guarded: it is tracked by tgid since it was forked.
func TestEdgesLeavesCgroup(t *testing.T) {
	d := newEdgeDirs(t)
	// The secret's directory is not in the server's mount view; a hard
	// link to it planted in the workspace is, and only the hook (by inode)
	// refuses it.
	hard := filepath.Join(d.ws, "hard")
	require.NoError(t, os.Link(d.secret, hard))
	s, _ := edgeSession(t, d.policy())
	pidfile, gofile, result := filepath.Join(d.ws, "pid"), filepath.Join(d.ws, "go"), filepath.Join(d.ws, "result")
	child, _ := json.Marshal([][]string{{"pidfile", pidfile}, {"waitfile", gofile}, {"record", result, "read", hard}})
	wait := edgeStart(t, s, []string{"spawn", string(child)})
	type outcome struct {
		res map[string]string
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := wait()
		done <- outcome{res, err}
	}()
	var pid string
	// Generous: the child is a Go binary started twice under emulation on
	// a loaded host.
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidfile)
		pid = string(b)
		return err == nil && pid != ""
	}, 90*time.Second, 10*time.Millisecond)
	mi, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	var cg2 string
	for _, line := range strings.Split(string(mi), "\n") {
		if pre, post, ok := strings.Cut(line, " - "); ok && strings.HasPrefix(post, "cgroup2 ") {
			cg2 = strings.Fields(pre)[4]
		}
	}
	require.NotEmpty(t, cg2)
	// The child wrote its pid in the server's own pid namespace.
	pid = globalPid(t, pid)
	require.NoError(t, os.WriteFile(filepath.Join(cg2, "cgroup.procs"), []byte(pid), 0))
	own, err := os.ReadFile("/proc/" + pid + "/cgroup")
	require.NoError(t, err)
	require.Contains(t, string(own), "0::/\n", "moved to the root cgroup")
	require.NoError(t, os.WriteFile(gofile, nil, 0o644))
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, map[string]string{"child.pidfile": "ok", "child.waitfile": "ok", "child.record": "ok", "spawn": "ok"}, r.res)
	b, err := os.ReadFile(result)
	require.NoError(t, err)
	assert.Equal(t, "EPERM", string(b), "still guarded outside the cgroup")
}

func TestEdgesFilelessExec(t *testing.T) {
	d := newEdgeDirs(t)
	p := d.policy()
	p.Exec.Allow = []string{"/usr/bin/true"}
	loader, err := guardruntime.ELFInterpreter("/usr/bin/true")
	require.NoError(t, err)
	require.NotEmpty(t, loader)
	s, log := edgeSession(t, p)
	res := edgeRun(t, s,
		[]string{"exec", "/usr/bin/true"},
		[]string{"exec", "/usr/bin/id"},
		[]string{"memfdexec", "/bin/echo"},
		// The loader run as a program would map /usr/bin/id with no exec
		// check: it has no exec rule, yet true (whose loader it is) runs.
		[]string{"exec", loader, "/usr/bin/id"},
		[]string{"exec", loader, "/usr/bin/true"},
	)
	assert.Equal(t, map[string]string{"exec": "ok", "exec#2": "EPERM", "memfdexec": "EPERM", "exec#3": "EPERM", "exec#4": "EPERM"}, res,
		"an allowed exec runs, others do not, a memfd never becomes a process (EXECUTED would show), and the loader is never a program")
	s.Close()
	assert.Contains(t, log.String(), `"rule":"exec.denied"`)
}

func TestEdgesIOUring(t *testing.T) {
	d := newEdgeDirs(t)
	s, _ := edgeSession(t, d.policy())
	notes := filepath.Join(d.ws, "notes.txt")
	res := edgeRun(t, s,
		[]string{"uring", notes, "inline"},
		[]string{"uring", d.secret, "inline"},
		[]string{"uring", notes, "async"},
		[]string{"uring", d.secret, "async"},
	)
	// The launcher's seccomp filter closes io_uring altogether (ENOSYS,
	// as on a kernel without it); where this kernel has io_uring, that is
	// the filter's doing, and no open through it happens.
	if err := attack.URingOpen(notes, false); err != nil {
		t.Skipf("io_uring unavailable on this kernel: %v", err)
	}
	closed := "err io_uring_setup: function not implemented"
	assert.Equal(t, map[string]string{"uring": closed, "uring#2": closed, "uring#3": closed, "uring#4": closed}, res)
	// Without the launcher's filter (a task joined by tgid, as root with
	// every capability), the LSM hooks alone still judge each open, in the
	// submitter and in io-wq workers.
	res = edgeJoined(t, s,
		[]string{"uring", notes, "inline"},
		[]string{"uring", d.secret, "inline"},
		[]string{"uring", notes, "async"},
		[]string{"uring", d.secret, "async"},
	)
	assert.Equal(t, map[string]string{"uring": "ok", "uring#2": "EPERM", "uring#3": "ok", "uring#4": "EPERM"}, res,
		"opens submitted through io_uring are checked, in the submitter and in io-wq workers")
}

// BPF rules hold on overlayfs (a container's root, the VM's $HOME): with
// layers on different file systems, stat(2) shows a file under a per-layer
// pseudo device while the hooks see the overlay's inode. A file granted by
// its own rule (read) and a program granted by exec.allow, both on such an
// overlay, must work; a sibling file must stay denied.
func TestEdgesOverlay(t *testing.T) {
	testenv.RequireBPF(t)
	lower := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(lower, "granted.txt"), []byte("ok\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(lower, "other.txt"), []byte("no\n"), 0o644))
	prog, err := os.ReadFile("/bin/true")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(lower, "true"), prog, 0o755))
	mnt := testenv.Overlay(t, lower)

	s, _ := edgeSession(t, &policy.Policy{Server: "edge",
		Filesystem: policy.Filesystem{Read: []string{filepath.Join(mnt, "granted.txt")}},
		Exec:       policy.Exec{Allow: []string{filepath.Join(mnt, "true")}}})
	// The hooks alone (the mount view would hide other.txt: ENOENT).
	require.NoError(t, s.Prepare(exec.Command("/bin/true")))
	res := edgeJoined(t, s,
		[]string{"read", filepath.Join(mnt, "granted.txt")},
		[]string{"read", filepath.Join(mnt, "other.txt")},
		[]string{"exec", filepath.Join(mnt, "true")},
	)
	assert.Equal(t, map[string]string{"read": "ok", "read#2": "EPERM", "exec": "ok"}, res)
}

// containWorld is what the containment edge tests attack: the edge dirs,
// a UDP sink on loopback, unix listeners (a world-writable daemon socket
// outside the workspace, an abstract one, and one inside the workspace,
// which the policy admits), a canary, and a policy that grants some
// network (so that the server shares this network namespace and the
// socket rules, not a namespace, decide).
type containWorld struct {
	edgeDirs
	canary                  string
	udp                     net.PacketConn
	daemon, abstract, inner string
	heard                   chan string
}

func newContainWorld(t *testing.T) *containWorld {
	w := &containWorld{edgeDirs: newEdgeDirs(t), heard: make(chan string, 16)}
	w.canary = fmt.Sprintf("CANARY-%d-%d", os.Getpid(), time.Now().UnixNano())
	var err error
	w.udp, err = net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { w.udp.Close() })
	daemonDir := filepath.Join(w.root, "run")
	require.NoError(t, os.MkdirAll(daemonDir, 0o755))
	w.daemon = filepath.Join(daemonDir, "daemon.sock")
	w.abstract = fmt.Sprintf("@mcpguard-edge-%d", os.Getpid())
	w.inner = filepath.Join(w.ws, "worker.sock")
	for _, addr := range []string{w.daemon, w.abstract, w.inner} {
		l, err := net.Listen("unix", addr)
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		if !strings.HasPrefix(addr, "@") {
			require.NoError(t, os.Chmod(addr, 0o777))
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.SetReadDeadline(time.Now().Add(2 * time.Second))
				b := make([]byte, 256)
				n, _ := c.Read(b)
				c.Close()
				w.heard <- addr + " " + string(b[:n])
			}
		}()
	}
	return w
}

func (w *containWorld) policy() *policy.Policy {
	p := w.edgeDirs.policy()
	p.Network.Allow = []policy.NetRule{{Host: "127.0.0.2", Ports: []int{9}}}
	return p
}

func (w *containWorld) udpPort() int { return w.udp.LocalAddr().(*net.UDPAddr).Port }

// steps are the attacks of every class, each more than one way.
func (w *containWorld) steps(proxyPid int, secret []byte) [][]string {
	c := w.canary
	vm := func(pid int) string {
		return fmt.Sprintf("%d@%#x#%d", pid, uintptr(unsafe.Pointer(&secret[0])), len(secret))
	}
	return [][]string{
		{"maptamper", filepath.Join(sandbox.DefaultPinRoot, bpf.Version()) + "#" + w.secret},
		{"ptrace", strconv.Itoa(proxyPid)},
		{"vmread", vm(proxyPid)},
		{"bind", filepath.Dir(w.secret) + ">" + filepath.Join(w.ws, "m")},
		{"bind", filepath.Dir(w.secret) + ">" + w.ws},
		{"rawudp", fmt.Sprintf("%d#%s", w.udpPort(), c)},
		{"packet", c},
		{"uringudp", fmt.Sprintf("%d#%s", w.udpPort(), c)},
		{"unix", w.daemon + "#" + c},
		{"unix", w.abstract + "#" + c},
		{"unix", w.inner + "#inner-ok"},
	}
}

// check holds the oracles: no canary at any sink or in the output, the
// secret never printed, the workspace's own socket reached.
func (w *containWorld) check(t *testing.T, res map[string]string, secret []byte) {
	t.Helper()
	for k, v := range res {
		assert.NotContains(t, v, "CANARY-SSH", "%s leaked the secret file", k)
		assert.NotContains(t, v, string(secret), "%s leaked the proxy's memory", k)
	}
	require.NoError(t, w.udp.SetReadDeadline(time.Now().Add(500*time.Millisecond)))
	buf := make([]byte, 512)
	for {
		n, _, err := w.udp.ReadFrom(buf)
		if err != nil {
			break
		}
		assert.NotContains(t, string(buf[:n]), w.canary, "a datagram reached the sink")
	}
	innerOK := false
	deadline := time.After(time.Second)
	for done := false; !done; {
		select {
		case h := <-w.heard:
			assert.NotContains(t, h, w.canary, "a unix listener got the canary")
			innerOK = innerOK || h == w.inner+" inner-ok"
		case <-deadline:
			done = true
		}
	}
	assert.True(t, innerOK, "the workspace's own unix socket stays reachable")
	assert.Equal(t, "ok", res["unix#3"])
	st, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	assert.Contains(t, string(st), "TracerPid:\t0")
	// The maps still hold every session: nothing was deleted from inside.
	_, err = os.Stat(filepath.Join(w.ws, "m", "id_rsa"))
	assert.Error(t, err, "no bind mount of the secret directory")
}

// TestEdgesContain: the server, started through the launcher as the
// proxy starts it, tries every containment class (issue #18).
func TestEdgesContain(t *testing.T) {
	w := newContainWorld(t)
	s, _ := edgeSession(t, w.policy())
	secret := []byte(w.canary + "-MEM")
	res := edgeRun(t, s, w.steps(os.Getpid(), secret)...)
	t.Logf("results: %v", res)
	for _, k := range []string{"maptamper", "ptrace", "vmread", "bind", "bind#2", "rawudp", "packet", "uringudp", "unix", "unix#2"} {
		assert.NotEqual(t, "ok", res[k], k)
	}
	w.check(t, res, secret)
}

// TestEdgesContainHooks: the same attacks by a task that kept every
// capability and has no seccomp filter (joined by tgid, not launched):
// the BPF LSM hooks alone stop them.
func TestEdgesContainHooks(t *testing.T) {
	w := newContainWorld(t)
	s, log := edgeSession(t, w.policy())
	require.NoError(t, s.Prepare(exec.Command("/bin/true"))) // maps only; never run
	secret := []byte(w.canary + "-MEM")
	res := edgeJoined(t, s, w.steps(os.Getpid(), secret)...)
	t.Logf("results: %v", res)
	t.Cleanup(func() { unix.Unmount(filepath.Join(w.ws, "m"), unix.MNT_DETACH); unix.Unmount(w.ws, unix.MNT_DETACH) })
	for _, k := range []string{"maptamper", "ptrace", "vmread", "bind", "bind#2", "rawudp", "packet", "uringudp", "unix", "unix#2"} {
		assert.Equal(t, "EPERM", res[k], k)
	}
	w.check(t, res, secret)
	s.Close()
	for _, rule := range []string{sandbox.RuleBPF, sandbox.RulePtrace, sandbox.RuleMount, sandbox.RuleSocket, sandbox.RuleUnix} {
		assert.Contains(t, log.String(), `"rule":"`+rule+`"`)
	}
}

// TestEdgesContainKeyring: a secret in this process's session keyring (as
// aws-vault or a Kerberos KEYRING: cache leaves it) is out of reach of a
// launched server (fresh keyring, seccomp) and of a joined task that
// inherited the keyring (key_permission hook).
func TestEdgesContainKeyring(t *testing.T) {
	d := newEdgeDirs(t)
	s, log := edgeSession(t, d.policy())
	// Keyrings are per-thread credentials: this thread joins a keyring
	// of its own, adds the key and forks the children.
	runtime.LockOSThread()
	if _, _, e := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); e != 0 {
		t.Skipf("no keyrings here: %v", e)
	}
	c := fmt.Sprintf("CANARY-KEY-%d", time.Now().UnixNano())
	desc := fmt.Sprintf("mcpguard-edge-%d", os.Getpid())
	_, err := unix.AddKey("user", desc, []byte(c), unix.KEY_SPEC_SESSION_KEYRING)
	require.NoError(t, err)
	launched := edgeRun(t, s, []string{"key", desc})
	joined := edgeJoined(t, s, []string{"key", desc})
	for _, res := range []map[string]string{launched, joined} {
		for k, v := range res {
			assert.NotContains(t, v, c, k)
		}
	}
	assert.Equal(t, "EPERM", joined["key"], "the key_permission hook alone")
	s.Close()
	assert.Contains(t, log.String(), `"rule":"`+sandbox.RuleKey+`"`)
}

// TestEdgesContainGit: protection by identity under C-full's launcher.
// Every way to move a protection away from a repository's hooks and
// config: renaming .git away to plant a hook and back, swapping in a
// fresh .git, renaming the directory that holds a repository (a project
// below the write root's top) or its parent, a hard link to .git/config,
// symlinks swapped in for .git and .git/hooks, a write through a symlink,
// and a plain append of core.hooksPath. The oracle is the repositories
// themselves: no hook planted, configs unchanged, each .git still the same
// directory (inode) with the same hooks.
func TestEdgesContainGit(t *testing.T) {
	d := newEdgeDirs(t)
	type repo struct {
		dir          string
		git, hooks   string
		cfg          string
		ino, hooksIn uint64
	}
	var repos []*repo
	for _, dir := range []string{d.ws, filepath.Join(d.ws, "proj"), filepath.Join(d.ws, "group", "sub")} {
		r := &repo{dir: dir, git: filepath.Join(dir, ".git")}
		r.hooks, r.cfg = filepath.Join(r.git, "hooks"), filepath.Join(r.git, "config")
		require.NoError(t, os.MkdirAll(r.hooks, 0o755))
		require.NoError(t, os.WriteFile(r.cfg, []byte("[core]\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(r.hooks, "pre-commit.sample"), []byte("#!/bin/sh\n"), 0o755))
		var st unix.Stat_t
		require.NoError(t, unix.Stat(r.git, &st))
		r.ino = st.Ino
		require.NoError(t, unix.Stat(r.hooks, &st))
		r.hooksIn = st.Ino
		repos = append(repos, r)
	}
	proj, sub := repos[1], repos[2]
	s, _ := edgeSession(t, d.policy())
	res := edgeRun(t, s,
		[]string{"gitswap", d.ws},
		[]string{"gitnew", d.ws},
		[]string{"gitswap", proj.dir},
		[]string{"dirswap", proj.dir},
		[]string{"dirswap", filepath.Dir(sub.dir) + "#sub/.git"}, // the repository's parent
		[]string{"dirswap", d.ws},                                // the write root itself
		[]string{"gitlink", d.ws},
		[]string{"gitlink", proj.dir},
		[]string{"symswap", d.ws},
		[]string{"symswap", sub.dir},
		[]string{"symwrite", proj.dir},
		[]string{"append", filepath.Join(d.ws, ".git", "config") + "#\thooksPath = /tmp/evil\n"},
		[]string{"append", proj.cfg + "#\thooksPath = /tmp/evil\n"})
	t.Logf("results: %v", res)
	for _, r := range repos {
		var st unix.Stat_t
		require.NoError(t, unix.Stat(r.git, &st), r.git)
		assert.Equal(t, r.ino, st.Ino, "%s is still the same directory", r.git)
		require.NoError(t, unix.Stat(r.hooks, &st), r.hooks)
		assert.Equal(t, r.hooksIn, st.Ino, "%s is still the same directory", r.hooks)
		ents, err := os.ReadDir(r.hooks)
		require.NoError(t, err)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		assert.Equal(t, []string{"pre-commit.sample"}, names, "%s holds only what it held", r.hooks)
		cfg, err := os.ReadFile(r.cfg)
		require.NoError(t, err)
		assert.Equal(t, "[core]\n", string(cfg), r.cfg)
	}
	// The renames that must fail did; the checks above are the oracle,
	// these say which layer stopped each: the name rule (.git is a
	// protected name: EPERM) before the pinned mount point (EBUSY).
	for _, k := range []string{"gitswap", "gitswap#2"} {
		assert.Equal(t, "EPERM", res[k], k)
	}
	for _, k := range []string{"dirswap", "dirswap#2", "gitlink", "gitlink#2", "symswap", "symswap#2", "symwrite", "append", "append#2"} {
		assert.NotEqual(t, "ok", res[k], k)
	}
}

// edgeProxyEnv makes this binary a proxy that dies without closing its
// session: "WS:OUTDIR:SERVER-EXITS". It guards a server (this binary
// again) with write access to WS, writes its session's policy id and the
// server's pid to OUTDIR, and waits to be killed.
const edgeProxyEnv = "MCPGUARD_EDGE_PROXY"

func init() {
	v := os.Getenv(edgeProxyEnv)
	if v == "" {
		return
	}
	parts := strings.Split(v, ":")
	ws, out, exits := parts[0], parts[1], parts[2] == "1"
	// These proxies reap nothing (their grace outlasts the test): under
	// TCG on a loaded host the second one's Prepare can come more than the
	// default 10 s after the first one's session was made, and reap it
	// before TestEdgesReap looks for it. The test's own session reaps.
	s, err := sandbox.New(context.Background(), &policy.Policy{Server: "edge", Filesystem: policy.Filesystem{Write: []string{ws}}},
		sandbox.Options{Server: "edge", ReapGrace: time.Hour})
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	steps := `[["sleep","600000"]]`
	if exits {
		steps = `[]`
	}
	self, _ := os.Executable()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), edgeStepsEnv+"="+steps, edgeProxyEnv+"=")
	if err := s.Prepare(cmd); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	if err := cmd.Start(); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	s.Started(cmd.Process.Pid)
	if exits {
		cmd.Wait()
	}
	os.WriteFile(filepath.Join(out, "server.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	os.WriteFile(filepath.Join(out, "policy.id"), []byte(strconv.FormatUint(s.PolicyID(), 10)), 0o644)
	select {}
}

// TestEdgesReap: proxies killed with SIGKILL (one while its server runs,
// one after its server exited) leave their sessions behind; the next
// session's Prepare reaps them: the orphaned server is killed, the cgroup
// removed, the cgroup map entry gone, so dead proxies cannot exhaust the
// 64 sessions the map holds.
func TestEdgesReap(t *testing.T) {
	testenv.RequireBPF(t)
	self, err := os.Executable()
	require.NoError(t, err)
	type dead struct {
		id     uint64
		server int
	}
	var deads []dead
	for _, exits := range []string{"0", "1"} {
		d := newEdgeDirs(t)
		out := t.TempDir()
		proxy := exec.Command(self)
		proxy.Env = append(os.Environ(), edgeProxyEnv+"="+d.ws+":"+out+":"+exits)
		proxy.Stdout = os.Stderr
		require.NoError(t, proxy.Start())
		var id uint64
		require.Eventually(t, func() bool {
			b, err := os.ReadFile(filepath.Join(out, "policy.id"))
			if err != nil {
				return false
			}
			id, err = strconv.ParseUint(string(b), 10, 64)
			return err == nil
		}, 60*time.Second, 50*time.Millisecond, "the proxy set up its session")
		b, err := os.ReadFile(filepath.Join(out, "server.pid"))
		require.NoError(t, err)
		server, _ := strconv.Atoi(string(b))
		require.NoError(t, proxy.Process.Kill())
		proxy.Wait()
		deads = append(deads, dead{id, server})
	}
	cgroups, err := ebpf.LoadPinnedMap(filepath.Join(sandbox.DefaultPinRoot, bpf.Version(), "cgroups"), nil)
	testenv.SkipIfNotSupported(t, err)
	defer cgroups.Close()
	var v uint64
	for _, dd := range deads {
		require.NoError(t, cgroups.Lookup(dd.id, &v), "the dead proxy's session is still registered")
	}
	d := newEdgeDirs(t)
	var log strings.Builder
	s, err := sandbox.New(context.Background(), d.policy(), sandbox.Options{Server: "edge", Audit: audit.New(&log), ReapGrace: time.Nanosecond})
	testenv.SkipIfNotSupported(t, err)
	defer s.Close()
	res := edgeRun(t, s, []string{"read", filepath.Join(d.ws, "notes.txt")})
	assert.Equal(t, map[string]string{"read": "ok"}, res)
	for _, dd := range deads {
		assert.ErrorIs(t, cgroups.Lookup(dd.id, &v), ebpf.ErrKeyNotExist, "session %d reaped", dd.id)
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", dd.server))
		if err == nil {
			fields := strings.Fields(string(st))
			assert.Equal(t, "Z", fields[2], "the orphaned server was killed")
		}
	}
}

// TestEdgesProtectedNameRoutes: protected names (a .git made during the
// session, git's redirections and hooks, editor and agent settings,
// .envrc, .mcp.json, a bare repository's HEAD) are neither created nor
// written by any route (open O_CREAT, mknod, rename, link, symlink,
// O_TMPFILE, RENAME_EXCHANGE, a directory renamed into place, the
// directory made afresh, write, truncate), from a launched server and
// from a joined task that has no read-only binds in front of it (the
// hooks alone). The evidence is the payload at each path afterwards;
// guard/landlock's TestContainProtectedNames shows every route works
// unguarded.
func TestEdgesProtectedNameRoutes(t *testing.T) {
	for _, mode := range []string{"launched", "joined"} {
		t.Run(mode, func(t *testing.T) {
			d := newEdgeDirs(t)
			cases, err := attack.NameCases(d.ws)
			require.NoError(t, err)
			cases = append(cases, attack.GitModelCases(d.ws)...)
			steps := edgeSteps(attack.NameSteps(cases))
			s, log := edgeSession(t, d.policy())
			res := edgeRunMode(t, s, mode, steps...)
			t.Logf("results: %v", res)
			for _, c := range cases {
				assert.False(t, attack.HasPayload(c.Path), "payload at %s", c.Path)
			}
			s.Close()
			assert.Contains(t, log.String(), `"rule":"file.protected_denied"`)
		})
	}
}

// TestEdgesExecutables: no route leaves a program in a write root (a
// regular file with an execute bit holding the payload: a shim in
// node_modules/.bin, a rustup toolchain's cargo, an existing script
// rewritten), from a launched server and from a joined task (the hooks
// alone: path_mknod's mode, path_chmod, file_open and path_truncate of a
// program, path_rename of one; not the ACL route, which the launcher's
// seccomp filter refuses). The baseline runs each route unguarded.
func TestEdgesExecutables(t *testing.T) {
	t.Run("baseline", func(t *testing.T) {
		step := attack.Steps()["plantexec"]
		ws := t.TempDir()
		cases, err := attack.ExecCases(ws)
		require.NoError(t, err)
		for _, c := range cases {
			require.NoError(t, step(c.Routes[0]+"#"+c.Path))
			assert.True(t, attack.HasProgram(c.Path), "unguarded, %s on %s", c.Routes[0], c.Path)
		}
	})
	for _, mode := range []string{"launched", "joined"} {
		t.Run(mode, func(t *testing.T) {
			d := newEdgeDirs(t)
			all, err := attack.ExecCases(d.ws)
			require.NoError(t, err)
			// Not on BPF: a link to a program, made at once or as a
			// chain. path_symlink sees the link's text only, not where
			// it will lead (docs/l3.md); the change report names such
			// links on npm's PATH.
			cases := slices.DeleteFunc(all, func(c attack.NameCase) bool {
				return slices.Contains(c.Routes, "symlink") || slices.Contains(c.Routes, "chain") ||
					// A POSIX ACL's execute bit: the launcher's seccomp
					// filter refuses extended attributes (launched);
					// the hooks alone have no setxattr hook (joined).
					(mode == "joined" && slices.Contains(c.Routes, "acl"))
			})
			require.NoError(t, exec.Command("chmod", "-R", "a+rwX", d.ws).Run())
			steps := append(edgeSteps(attack.ExecSteps(cases)), []string{"write", filepath.Join(d.ws, "notes.txt")})
			s, log := edgeSession(t, d.policy())
			res := edgeRunMode(t, s, mode, steps...)
			t.Logf("results: %v", res)
			for _, c := range cases {
				assert.False(t, attack.HasProgram(c.Path), "program at %s", c.Path)
			}
			assert.Equal(t, "ok", res["write"], "data beside them is written")
			s.Close()
			assert.Contains(t, log.String(), `"rule":"file.executable_denied"`)
		})
	}
}

// TestEdgesGitWork: below a .git only git's own data is writable (the
// git model, launch.GitData), and that is all git's ordinary work needs:
// add, commit, fetch, stash, gc and commit-graph run in a repository of
// the write root, from a launched server and from a joined task (the
// hooks alone), and their results are there afterwards.
func TestEdgesGitWork(t *testing.T) {
	gitPath := testenv.GitPath(t)
	for _, mode := range []string{"launched", "joined"} {
		t.Run(mode, func(t *testing.T) {
			d := newEdgeDirs(t)
			repo, remote := filepath.Join(d.ws, "repo"), filepath.Join(d.ws, "remote")
			testenv.GitRepos(t, d.ws, repo, remote)
			require.NoError(t, os.WriteFile(filepath.Join(repo, "b.txt"), []byte("two\n"), 0o666))
			require.NoError(t, exec.Command("chmod", "-R", "a+rwX", d.ws).Run())
			p := d.policy()
			// BPF's exec list is exact files: git runs its builtins
			// (pack-objects, update-index, pack-refs) as git-core's own
			// git, and a local fetch git-upload-pack through the shell.
			p.Exec.Allow = []string{gitPath, "/usr/lib/git-core/git", "/bin/sh", "/usr/bin/dash"}
			s, _ := edgeSession(t, p)
			g := func(args ...string) []string { return append([]string{"git", gitPath, d.ws, repo}, args...) }
			steps := [][]string{g("add", "b.txt"), g("commit", "-qm", "two")}
			if mode == "launched" {
				// The joined task is root over root's repositories:
				// upload-pack, which gets no -c from its caller, finds
				// the remote's ownership dubious there.
				steps = append(steps, g("fetch", "-q", remote, "main"))
			}
			steps = append(steps, []string{"write", filepath.Join(repo, "a.txt")}, g("stash", "-q"), g("stash", "pop", "-q"),
				g("gc", "-q"), g("commit-graph", "write", "--reachable"))
			res := edgeRunMode(t, s, mode, steps...)
			for k, v := range res {
				assert.Equal(t, "ok", v, k)
			}
			assert.Len(t, res, len(steps))
			assert.Equal(t, "2\n", testenv.Git(t, d.ws, repo, "rev-list", "--count", "HEAD"))
			if mode == "launched" {
				assert.FileExists(t, filepath.Join(repo, ".git", "FETCH_HEAD"))
			}
			assert.FileExists(t, filepath.Join(repo, ".git", "objects", "info", "commit-graph"))
			assert.Contains(t, testenv.Git(t, d.ws, repo, "status", "--short"), "M a.txt")
		})
	}
}

// TestEdgesExecConfig: files the user's tools execute or read as
// configuration (package.json, a .pth file, Makefiles, a CI workflow) are
// written under a write grant and reported in the audit log when the
// session ends; with filesystem.protect_exec_config the hooks refuse every
// route to them (joined: no launcher in front).
func TestEdgesExecConfig(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("protect=%v", refuse), func(t *testing.T) {
			d := newEdgeDirs(t)
			cases, err := attack.ExecConfigCases(d.ws)
			require.NoError(t, err)
			steps := edgeSteps(attack.NameSteps(cases))
			p := d.policy()
			p.Filesystem.ProtectExecConfig = refuse
			s, log := edgeSession(t, p)
			res := edgeRun(t, s, steps...)
			t.Logf("results: %v", res)
			s.Close()
			for _, c := range cases {
				assert.Equal(t, !refuse, attack.HasPayload(c.Path), "payload at %s", c.Path)
				if !refuse {
					assert.Contains(t, log.String(), c.Path)
				}
			}
			if refuse {
				assert.Contains(t, log.String(), `"rule":"file.protected_denied"`)
			} else {
				assert.Contains(t, log.String(), `"rule":"report.exec_config_changed"`)
			}
		})
	}
}
