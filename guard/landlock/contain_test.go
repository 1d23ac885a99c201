package landlock_test

// Containment edge tests (issue #18) on the Landlock backend, run through
// the launcher as the proxy runs servers. Each attack is judged outside the
// guard: a canary that must not reach a listener or the child's output, a
// file that must not exist or change, the test process's own state.

import (
	"bytes"
	"encoding/binary"
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

	"github.com/mcpguard/mcpguard/guard/landlock"
)

// containActions are the attack steps; each prints what it obtained, so a
// canary in the output is a successful attack.
var containActions = map[string]func(string) error{
	// ptrace:PID attaches to PID (and detaches).
	"ptrace": func(arg string) error {
		pid, _ := strconv.Atoi(arg)
		if err := unix.PtraceAttach(pid); err != nil {
			return err
		}
		return unix.PtraceDetach(pid)
	},
	// vmread:PID@ADDR#LEN reads another process's memory and prints it.
	"vmread": func(arg string) error {
		pidS, rest, _ := strings.Cut(arg, "@")
		addrS, lenS, _ := strings.Cut(rest, "#")
		pid, _ := strconv.Atoi(pidS)
		addr, _ := strconv.ParseUint(addrS, 0, 64)
		n, _ := strconv.Atoi(lenS)
		buf := make([]byte, n)
		local := []unix.Iovec{{Base: &buf[0], Len: uint64(n)}}
		remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: n}}
		if _, err := unix.ProcessVMReadv(pid, local, remote, 0); err != nil {
			return err
		}
		fmt.Printf("leak %s\n", buf)
		return nil
	},
	// bind:SRC>DST bind-mounts SRC onto DST and prints DST/id_rsa.
	"bind": func(arg string) error {
		src, dst, _ := strings.Cut(arg, ">")
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(dst, "id_rsa"))
		fmt.Printf("leak %s\n", b)
		return err
	},
	// rawudp:PORT#PAYLOAD sends PAYLOAD to 127.0.0.1:PORT over a raw IP
	// socket (the UDP header built by hand).
	"rawudp": func(arg string) error {
		portS, payload, _ := strings.Cut(arg, "#")
		port, _ := strconv.Atoi(portS)
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_UDP)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		pkt := make([]byte, 8+len(payload))
		binary.BigEndian.PutUint16(pkt[0:], 40000)
		binary.BigEndian.PutUint16(pkt[2:], uint16(port))
		binary.BigEndian.PutUint16(pkt[4:], uint16(len(pkt)))
		copy(pkt[8:], payload)
		return unix.Sendto(fd, pkt, 0, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	},
	// packet:PAYLOAD opens a packet socket on lo and sends a frame.
	"packet": func(arg string) error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, int(htons(unix.ETH_P_IP)))
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Sendto(fd, []byte(arg), 0, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: 1})
	},
	// unix:PATH#PAYLOAD connects to a pathname (or @abstract) unix socket
	// and writes PAYLOAD.
	"unix": func(arg string) error {
		path, payload, _ := strings.Cut(arg, "#")
		c, err := net.Dial("unix", path)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte(payload))
		return err
	},
	// key:DESC searches the session keyring for a user key and prints it.
	"key": func(arg string) error {
		id, err := unix.KeyctlSearch(unix.KEY_SPEC_SESSION_KEYRING, "user", arg, 0)
		if err != nil {
			return err
		}
		buf := make([]byte, 256)
		n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
		if err != nil {
			return err
		}
		fmt.Printf("leak %s\n", buf[:n])
		return nil
	},
	// gitswap:WS renames WS/.git away, plants a hook, renames it back.
	"gitswap": func(ws string) error {
		git, away := filepath.Join(ws, ".git"), filepath.Join(ws, ".git-away")
		if err := os.Rename(git, away); err != nil {
			return err
		}
		err := os.WriteFile(filepath.Join(away, "hooks", "pre-commit"), []byte("#!/bin/sh\ntouch pwned\n"), 0o755)
		if rerr := os.Rename(away, git); err == nil {
			err = rerr
		}
		return err
	},
	// gitnew:WS builds a fresh .git with a hook beside the real one and
	// swaps it in.
	"gitnew": func(ws string) error {
		fresh := filepath.Join(ws, "fresh-git")
		if err := os.MkdirAll(filepath.Join(fresh, "hooks"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(fresh, "hooks", "pre-commit"), []byte("#!/bin/sh\ntouch pwned\n"), 0o755); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(ws, ".git"), filepath.Join(ws, "old-git")); err != nil {
			return err
		}
		return os.Rename(fresh, filepath.Join(ws, ".git"))
	},
	// append:PATH#TEXT appends to a file (.git/config: core.hooksPath).
	"append": func(arg string) error {
		path, text, _ := strings.Cut(arg, "#")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString(text)
		return err
	},
	// caps prints the effective, bounding and ambient capability sets.
	"caps": func(string) error {
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "Cap") || strings.HasPrefix(l, "NoNewPrivs") || strings.HasPrefix(l, "Seccomp:") {
				fmt.Printf("status %s\n", strings.Join(strings.Fields(l), " "))
			}
		}
		return nil
	},
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func rootOrSkip(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the launcher drops privilege only under a root proxy")
	}
}

// execChild prepares this test binary as a guarded child doing actions.
func execChild(t *testing.T, sb *landlock.Sandbox, actions ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], actions...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	require.NoError(t, sb.Prepare(cmd))
	cmd.Stderr = os.Stderr
	return cmd
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
	cmd := exec.Command(os.Args[0],
		fmt.Sprintf("vmread:%d@%#x#%d", pid, uintptr(unsafe.Pointer(&secret[0])), len(secret)),
		fmt.Sprintf("rawudp:%d#%s", sink.LocalAddr().(*net.UDPAddr).Port, c),
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
