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
	"syscall"
	"time"

	"github.com/mcpguard/mcpguard/lab/vm/vmproto"
)

// boot runs qemu and talks to the guest until the command's status is in.
func boot(ctx context.Context, cfg *Config, b bootFiles, req *vmproto.Request) (int, error) {
	dir, err := os.MkdirTemp("", "mcpguard-vm-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	sock := func(id string) string { return filepath.Join(dir, id) }
	// qemu connects to our listeners as it starts.
	lns, err := listen(sock, portIDs(req))
	defer closeListeners(lns)
	if err != nil {
		return 0, err
	}
	m, err := startQEMU(cfg, b.qemu, qemuArgs(cfg, b, sock))
	if err != nil {
		return 0, err
	}
	defer m.stop()
	m.accept(ctx, lns)
	stdout, stderr := newCounter(cfg.Stdout), newCounter(cfg.Stderr)
	m.copyOut("con", m.consoleWriter())
	m.copyOut("p1", stdout)
	m.copyOut("p2", stderr)
	if req.Stdin {
		defer m.feedStdin(cfg.Stdin)()
	}
	ctl := m.get("p0")
	if ctl == nil {
		if err := context.Cause(ctx); err != nil {
			return 0, err
		}
		return 0, m.failed("qemu ended before connecting: " + fmt.Sprint(m.waitErr))
	}
	defer ctl.Close()
	go func() {
		<-ctx.Done()
		ctl.Close()
	}()
	exit, err := m.converse(ctx, ctl, req)
	if errors.Is(err, ErrTimeout) {
		// What the guest's kernel said last (a hung task, a lockup, an
		// oops) is the only trace of why it never answered.
		return 0, fmt.Errorf("%w\n--- console tail ---\n%s", err, m.console.String())
	}
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(cfg.log(), "vm: command exited with status %d after %.2fs\n", exit.Status, time.Since(m.start).Seconds())
	// The exit report can overtake the output: wait for all of it.
	if !stdout.waitFor(exit.Stdout, ctx.Done()) || !stderr.waitFor(exit.Stderr, ctx.Done()) {
		return 0, context.Cause(ctx)
	}
	if _, err := io.WriteString(ctl, vmproto.Ack+"\n"); err != nil {
		return 0, fmt.Errorf("ack: %w", err)
	}
	m.awaitPowerOff(ctx)
	return exit.Status, nil
}

// portIDs names the sockets qemu connects to: the console, the control
// port, stdout, stderr and, when the command reads it, stdin.
func portIDs(req *vmproto.Request) []string {
	ids := []string{"con", "p0", "p1", "p2"}
	if req.Stdin {
		ids = append(ids, "p3")
	}
	return ids
}

// listen makes a listener for each id; on error the ones made are
// returned too, for the caller to close.
func listen(sock func(id string) string, ids []string) (map[string]*net.UnixListener, error) {
	lns := map[string]*net.UnixListener{}
	for _, id := range ids {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock(id), Net: "unix"})
		if err != nil {
			return lns, err
		}
		lns[id] = ln
	}
	return lns, nil
}

func closeListeners(lns map[string]*net.UnixListener) {
	for _, ln := range lns {
		ln.Close()
	}
}

// machine is a running qemu and the connections it made to us.
type machine struct {
	cfg     *Config
	cmd     *exec.Cmd
	start   time.Time
	qemuOut bytes.Buffer // qemu's own stdout and stderr
	console *ringBuffer  // the console's tail, for errors
	exited  chan struct{}
	waitErr error // set before exited closes
	copies  sync.WaitGroup
	conns   map[string]chan *net.UnixConn
}

// startQEMU starts qemu; should the runner die, so does its VM.
func startQEMU(cfg *Config, qemu string, args []string) (*machine, error) {
	m := &machine{cfg: cfg, console: &ringBuffer{max: 16 << 10}, exited: make(chan struct{})}
	m.cmd = exec.Command(qemu, args...)
	m.cmd.Stdout, m.cmd.Stderr = &m.qemuOut, &m.qemuOut
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(cfg.log(), "vm: %s %s\n", qemu, strings.Join(args, " "))
	m.start = time.Now()
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	go func() { m.waitErr = m.cmd.Wait(); close(m.exited) }()
	return m, nil
}

// stop kills qemu and waits for it and for the output copies, which its
// exit ends by closing the connections.
func (m *machine) stop() {
	m.cmd.Process.Kill()
	<-m.exited
	m.copies.Wait()
}

// accept takes each listener's one connection; qemu's exit or the end of
// ctx closes the listeners, which ends what is still waiting.
func (m *machine) accept(ctx context.Context, lns map[string]*net.UnixListener) {
	m.conns = map[string]chan *net.UnixConn{}
	for id, ln := range lns {
		ch := make(chan *net.UnixConn, 1)
		m.conns[id] = ch
		go func() {
			c, err := ln.AcceptUnix()
			if err != nil {
				close(ch)
				return
			}
			ch <- c
		}()
	}
	go func() {
		select {
		case <-m.exited:
		case <-ctx.Done():
		}
		closeListeners(lns)
	}()
}

// get waits for the connection of port id; nil when qemu never made it.
func (m *machine) get(id string) *net.UnixConn {
	c, ok := <-m.conns[id]
	if !ok {
		return nil
	}
	return c
}

func (m *machine) consoleWriter() io.Writer {
	if m.cfg.Console != nil {
		return io.MultiWriter(m.console, m.cfg.Console)
	}
	return m.console
}

// copyOut copies what the guest writes to port id into w, in the
// background (stop waits for it).
func (m *machine) copyOut(id string, w io.Writer) {
	m.copies.Add(1)
	go func() {
		defer m.copies.Done()
		if c := m.get(id); c != nil {
			defer c.Close()
			_, _ = io.Copy(w, c)
		}
	}()
}

// feedStdin copies in to the command's stdin port in the background; the
// returned cleanup closes the connection if it was made.
func (m *machine) feedStdin(in io.Reader) (cleanup func()) {
	stdinConn := make(chan *net.UnixConn, 1)
	go func() {
		c := m.get("p3")
		if c == nil {
			return
		}
		stdinConn <- c
		_, _ = io.Copy(c, in)
		// Half-close only: qemu reads up to the EOF, then tells the
		// guest the port closed and the command sees EOF. Closing
		// both ways would make qemu drop what it has not read yet.
		// qemu's exit closes the rest.
		_ = c.CloseWrite()
	}()
	return func() {
		select {
		case c := <-stdinConn:
			c.Close()
		default:
		}
	}
}

// failed is ErrGuest with what qemu said and the console's tail (after
// giving qemu a moment to exit and say it).
func (m *machine) failed(what string) error {
	select {
	case <-m.exited:
	case <-time.After(2 * time.Second):
	}
	msg := fmt.Sprintf("%s\n--- qemu ---\n%s--- console tail ---\n%s", what, tail(m.qemuOut.Bytes(), 4096), m.console.String())
	return fmt.Errorf("%w: %s", ErrGuest, strings.TrimRight(msg, "\n"))
}

// converse sends the request on the control port and reads the guest's
// messages until the command's exit report.
func (m *machine) converse(ctx context.Context, ctl *net.UnixConn, req *vmproto.Request) (*vmproto.Message, error) {
	if err := vmproto.WriteJSON(ctl, req); err != nil {
		return nil, fmt.Errorf("send request: %w", err)
	}
	lines := vmproto.NewScanner(ctl)
	for lines.Scan() {
		msg, err := vmproto.ParseMessage(lines.Bytes())
		if err != nil {
			return nil, err
		}
		switch msg.Kind {
		case vmproto.KindStarted:
			fmt.Fprintf(m.cfg.log(), "vm: command started %.2fs after qemu started (guest uptime %.2fs, qemu CPU time %.2fs, load %s)\n",
				time.Since(m.start).Seconds(), msg.Uptime, procCPU(m.cmd.Process.Pid).Seconds(), loadAvg())
		case vmproto.KindError:
			return nil, m.failed("guest: " + msg.Error)
		case vmproto.KindExit:
			return msg, nil
		}
	}
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return nil, m.failed("the guest ended without reporting an exit status")
}

// awaitPowerOff gives the guest a moment to power off after the ack.
func (m *machine) awaitPowerOff(ctx context.Context) {
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
		fmt.Fprintln(m.cfg.log(), "vm: the guest did not power off; killing qemu")
	case <-ctx.Done():
	}
}
