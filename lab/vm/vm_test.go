//go:build linux

package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/lab/vm/vmproto"
)

// The test binary doubles as a fake qemu: it speaks the guest's side of the
// protocol over the sockets named on its command line, running the
// requested command on the host. That exercises the runner's own logic
// (sockets, request, streaming, exit status, ack, failures) without a VM.
const fakeQEMUEnv = "MCPGUARD_VM_FAKE_QEMU"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeQEMUEnv); mode != "" {
		if err := fakeQEMU(mode, os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "fake qemu:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeQEMU connects like qemu does, then behaves as vminit would (mode
// "guest"), or reports first and sends output later ("late"), or fails
// ("error", "die", "hang").
func fakeQEMU(mode string, args []string) error {
	socks := map[string]string{} // chardev id -> path
	ports := map[string]string{} // port name -> chardev id
	for i := 0; i+1 < len(args); i++ {
		opts := map[string]string{}
		for _, kv := range strings.Split(args[i+1], ",") {
			k, v, _ := strings.Cut(kv, "=")
			opts[k] = v
		}
		switch args[i] {
		case "-chardev":
			socks[opts["id"]] = opts["path"]
		case "-device":
			if strings.HasPrefix(args[i+1], "virtserialport,") {
				ports[opts["name"]] = opts["chardev"]
			}
		}
	}
	conns := map[string]net.Conn{}
	for id, p := range socks {
		c, err := net.Dial("unix", p)
		if err != nil {
			return err
		}
		defer c.Close()
		conns[id] = c
	}
	port := func(name string) net.Conn { return conns[ports[name]] }
	fmt.Fprintln(conns["con"], "[    0.000000] Linux version 6.1.0-fake")
	ctl := port(vmproto.PortControl)
	lines := vmproto.NewScanner(ctl)
	req, err := vmproto.ReadRequest(lines)
	if err != nil {
		return err
	}
	switch mode {
	case "die":
		fmt.Fprintln(conns["con"], "Kernel panic - not syncing: fake")
		return nil
	case "hang":
		fmt.Fprintln(conns["con"], "INFO: task fake:1 blocked for more than 120 seconds.")
		time.Sleep(time.Minute)
		return nil
	case "error":
		return vmproto.WriteJSON(ctl, vmproto.Message{Kind: vmproto.KindError, Error: "mount 9p on /newroot: no such device"})
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = req.Env, req.Dir, &out, &errb
	if req.Stdin {
		cmd.Stdin = port(vmproto.PortStdin)
	}
	if err := vmproto.WriteJSON(ctl, vmproto.Message{Kind: vmproto.KindStarted}); err != nil {
		return err
	}
	_ = cmd.Run()
	exit := vmproto.Message{Kind: vmproto.KindExit, Status: vmproto.ProcessStatus(cmd.ProcessState),
		Stdout: int64(out.Len()), Stderr: int64(errb.Len())}
	send := func() {
		port(vmproto.PortStdout).Write(out.Bytes())
		port(vmproto.PortStderr).Write(errb.Bytes())
	}
	if mode == "late" {
		// The exit report overtakes the output, as it can through
		// separate ports: the runner must wait for the bytes.
		if err := vmproto.WriteJSON(ctl, exit); err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond)
		send()
	} else {
		send()
		if err := vmproto.WriteJSON(ctl, exit); err != nil {
			return err
		}
	}
	for lines.Scan() {
		if lines.Text() == vmproto.Ack {
			return nil
		}
	}
	return errors.New("no ack")
}

// runFake runs argv through the runner against the fake qemu.
func runFake(t *testing.T, mode string, cfg Config, argv ...string) (int, string, string, error) {
	t.Helper()
	t.Setenv(fakeQEMUEnv, mode)
	var out, errb bytes.Buffer
	cfg.Stdout, cfg.Stderr = &out, &errb
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	req := request(&cfg, argv)
	require.NoError(t, req.Validate())
	ctx := t.Context()
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, cfg.Timeout, ErrTimeout)
		defer cancel()
	}
	st, err := boot(ctx, &cfg, bootFiles{qemu: os.Args[0], kernel: "vmlinuz", initrd: "initrd"}, req)
	return st, out.String(), errb.String(), err
}

func TestRunStatusAndOutput(t *testing.T) {
	for _, mode := range []string{"guest", "late"} {
		t.Run(mode, func(t *testing.T) {
			st, out, errs, err := runFake(t, mode, Config{}, "sh", "-c", "echo one; echo two >&2; echo three; exit 7")
			require.NoError(t, err)
			assert.Equal(t, 7, st)
			assert.Equal(t, "one\nthree\n", out)
			assert.Equal(t, "two\n", errs)
		})
	}
	t.Run("signal", func(t *testing.T) {
		st, _, _, err := runFake(t, "guest", Config{}, "sh", "-c", "kill -9 $$")
		require.NoError(t, err)
		assert.Equal(t, 137, st)
	})
	t.Run("large output in order", func(t *testing.T) {
		st, out, _, err := runFake(t, "late", Config{}, "seq", "200000")
		require.NoError(t, err)
		assert.Equal(t, 0, st)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		require.Len(t, lines, 200000)
		assert.Equal(t, "1", lines[0])
		assert.Equal(t, "123456", lines[123455])
		assert.Equal(t, "200000", lines[199999])
	})
}

func TestRunArgsEnvDir(t *testing.T) {
	dir := t.TempDir()
	env := append(os.Environ(), "MCPGUARD_VM_TEST=spaces and\nnewline")
	st, out, _, err := runFake(t, "guest", Config{Dir: dir, Env: env},
		"sh", "-c", `printf '%s|' "$@"; pwd; printf '%s' "$MCPGUARD_VM_TEST"`, "sh", "a b", "", "*")
	require.NoError(t, err)
	assert.Equal(t, 0, st)
	assert.Equal(t, "a b||*|"+dir+"\nspaces and\nnewline", out)
}

func TestRunStdin(t *testing.T) {
	st, out, _, err := runFake(t, "guest", Config{Stdin: strings.NewReader("from the host\n")}, "cat")
	require.NoError(t, err)
	assert.Equal(t, 0, st)
	assert.Equal(t, "from the host\n", out)
}

func TestRunFailures(t *testing.T) {
	t.Run("guest error", func(t *testing.T) {
		_, _, _, err := runFake(t, "error", Config{}, "true")
		require.ErrorIs(t, err, ErrGuest)
		assert.ErrorContains(t, err, "mount 9p on /newroot")
	})
	t.Run("guest dies", func(t *testing.T) {
		_, _, _, err := runFake(t, "die", Config{}, "true")
		require.ErrorIs(t, err, ErrGuest)
		assert.ErrorContains(t, err, "without reporting an exit status")
		assert.ErrorContains(t, err, "Kernel panic - not syncing: fake", "console tail in the error")
	})
	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		_, _, _, err := runFake(t, "hang", Config{Timeout: 500 * time.Millisecond}, "true")
		require.ErrorIs(t, err, ErrTimeout)
		assert.ErrorContains(t, err, "blocked for more than 120 seconds", "console tail in the error")
		assert.Less(t, time.Since(start), 30*time.Second, "qemu killed, not waited for")
	})
	t.Run("no qemu", func(t *testing.T) {
		cfg := Config{Stdout: io.Discard, Stderr: io.Discard}
		_, err := boot(t.Context(), &cfg, bootFiles{qemu: filepath.Join(t.TempDir(), "none")}, &vmproto.Request{Argv: []string{"true"}, Dir: "/"})
		assert.ErrorContains(t, err, "start qemu")
	})
}

func TestRequest(t *testing.T) {
	home := t.TempDir()
	gocache := filepath.Join(home, ".cache", "go-build")
	require.NoError(t, os.MkdirAll(gocache, 0o755))
	mod := t.TempDir()
	extra := t.TempDir()
	env := []string{"PATH=/usr/bin", "HOME=" + home, "GOCACHE=" + gocache, "GOMODCACHE=" + mod, "TMPDIR=/var/tmp"}
	cfg := Config{Dir: "/work", Env: env, Writable: []string{extra, "relative", "/", filepath.Join(extra, "sub")}, Stdin: strings.NewReader("")}
	req := request(&cfg, []string{"go", "test", "./..."})
	assert.Equal(t, []string{"go", "test", "./..."}, req.Argv)
	assert.Equal(t, env, req.Env, "the caller's environment, unchanged")
	assert.Equal(t, "/work", req.Dir)
	assert.True(t, req.Stdin)
	// GOCACHE is inside HOME, the sub dir does not exist: one overlay each.
	assert.Equal(t, []string{home, mod, extra}, req.Overlays)
	assert.Equal(t, []string{"/var/tmp"}, req.Tmpfs, "a TMPDIR outside /tmp gets a tmpfs")
}

func TestWritableDirs(t *testing.T) {
	a := t.TempDir()
	b := filepath.Join(a, "b")
	require.NoError(t, os.Mkdir(b, 0o755))
	c := t.TempDir()
	got := writableDirs([]string{"HOME=" + b}, []string{a, c, c + "/"}, []string{"/nonexistent-dir-for-test"})
	assert.Equal(t, []string{a, c}, got, "nested and duplicate dirs dropped, missing ones too")
}

func TestQEMUArgs(t *testing.T) {
	cfg := Config{Memory: 3000, CPUs: 3, Append: "loglevel=7"}
	args := qemuArgs(&cfg, bootFiles{kernel: "/k", initrd: "/i"}, func(id string) string { return "/s/" + id })
	line := strings.Join(args, " ")
	for _, want := range []string{
		"-accel tcg,thread=multi", "-cpu max", "-smp 3", "-m 3000", "-kernel /k", "-initrd /i",
		"lsm=" + LSMs + " loglevel=7", "console=ttyS0 quiet",
		"-fsdev local,id=root,path=/,security_model=none,readonly=on,multidevs=remap",
		"-device virtio-9p-pci,fsdev=root,mount_tag=hostroot", "-machine pc",
		"-chardev socket,id=con,path=/s/con -serial chardev:con",
		"chardev=p0,name=" + vmproto.PortControl, "chardev=p1,name=" + vmproto.PortStdout, "chardev=p2,name=" + vmproto.PortStderr,
	} {
		assert.Contains(t, line, want)
	}
	assert.True(t, strings.HasSuffix(LSMs, ",bpf"))
	assert.NotContains(t, line, vmproto.PortStdin, "no stdin port unless asked")
	cfg.Stdin = strings.NewReader("")
	assert.Contains(t, strings.Join(qemuArgs(&cfg, bootFiles{}, func(id string) string { return id }), " "), "chardev=p3,name="+vmproto.PortStdin)
}

func TestCounterWait(t *testing.T) {
	c := newCounter(io.Discard)
	var got atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); got.Store(c.waitFor(10, nil)) }()
	c.Write(make([]byte, 4))
	c.Write(make([]byte, 6))
	wg.Wait()
	assert.True(t, got.Load())
	done := make(chan struct{})
	close(done)
	assert.False(t, c.waitFor(11, done), "gives up when done")
}

func TestProcCPU(t *testing.T) {
	// Burn a little CPU so that our own count is above zero.
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	assert.Greater(t, procCPU(os.Getpid()), time.Duration(0))
	assert.Equal(t, time.Duration(0), procCPU(-1))
}
