//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpguard/mcpguard/internal/pid1"
	"github.com/mcpguard/mcpguard/lab/vm/vmproto"
)

// runCommand runs the request's command in the new root and returns its
// exit status and how many bytes of stdout and stderr went to the host.
func runCommand(req *vmproto.Request, report func(vmproto.Message)) (int, [2]int64, error) {
	var counts [2]int64
	outs, err := openOutputs()
	defer closeFiles(outs[:])
	if err != nil {
		return 0, counts, err
	}
	stdin, err := openStdin(req)
	if err != nil {
		return 0, counts, err
	}
	defer stdin.Close()
	r, err := newRelay(outs)
	if err != nil {
		return 0, counts, err
	}
	cmd, err := command(req, stdin, r.writers)
	if err != nil {
		return 0, counts, err
	}
	if err := cmd.Start(); err != nil {
		status, counts := notRunnable(err, r)
		return status, counts, nil
	}
	report(vmproto.Message{Kind: vmproto.KindStarted})
	trace("command started")
	r.closeWriters()
	// exec.Cmd.Wait would race with reaping the orphans that PID 1
	// inherits for the same child.
	status, err := pid1.Reap(cmd.Process.Pid)
	if err != nil {
		return 0, counts, err
	}
	trace("command exited")
	return status, r.drain(drainDelay), nil
}

// openOutputs opens the stdout and stderr ports; on error the ones
// opened are returned too, for the caller to close.
func openOutputs() ([2]*os.File, error) {
	var outs [2]*os.File
	for i, name := range [2]string{vmproto.PortStdout, vmproto.PortStderr} {
		f, err := openPort(name, os.O_WRONLY)
		if err != nil {
			return outs, err
		}
		outs[i] = f
	}
	return outs, nil
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// openStdin is the stdin port when the command reads it, else /dev/null.
func openStdin(req *vmproto.Request) (*os.File, error) {
	if req.Stdin {
		return openPort(vmproto.PortStdin, os.O_RDONLY)
	}
	return os.Open(os.DevNull)
}

// relay copies the command's stdout and stderr to the ports, counting.
// The command writes into pipes that we copy to the ports rather than
// into the ports themselves: the counts tell the host when it has
// everything.
type relay struct {
	outs             [2]*os.File
	readers, writers [2]*os.File
	n                [2]atomic.Int64
	copiers          sync.WaitGroup
}

func newRelay(outs [2]*os.File) (*relay, error) {
	r := &relay{outs: outs}
	for i := range outs {
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		r.readers[i], r.writers[i] = pr, pw
		r.copiers.Add(1)
		go func() {
			defer r.copiers.Done()
			_, _ = io.Copy(countingWriter{outs[i], &r.n[i]}, pr)
		}()
	}
	return r, nil
}

// closeWriters closes our ends of the pipes the command writes to (it
// holds its own).
func (r *relay) closeWriters() {
	for _, w := range r.writers {
		w.Close()
	}
}

// drain waits for the copies to end; a background child may hold the
// pipes open, so after delay they are cut off. It returns the counts.
func (r *relay) drain(delay time.Duration) [2]int64 {
	done := make(chan struct{})
	go func() { r.copiers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(delay):
		for _, rd := range r.readers {
			rd.Close()
		}
		<-done
	}
	return r.counts()
}

func (r *relay) counts() [2]int64 { return [2]int64{r.n[0].Load(), r.n[1].Load()} }

// command is the request's command: its argv resolved with the caller's
// PATH, its environment, a session of its own, in its working directory
// (which becomes ours too).
func command(req *vmproto.Request, stdin *os.File, out [2]*os.File) (*exec.Cmd, error) {
	// exec.Command resolves argv[0] with our own PATH: use the caller's.
	for _, kv := range req.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			os.Setenv("PATH", v)
		}
	}
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env = req.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, out[0], out[1]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := os.Chdir(req.Dir); err != nil {
		return nil, fmt.Errorf("working directory: %w", err)
	}
	cmd.Dir = req.Dir
	return cmd, nil
}

// notRunnable answers a command that did not start as a shell would: a
// message on stderr and 127 (not found) or 126 (found but not runnable).
func notRunnable(err error, r *relay) (int, [2]int64) {
	r.closeWriters()
	r.copiers.Wait()
	status := 126
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		status = 127
	}
	k, _ := fmt.Fprintf(r.outs[1], "mcpguard vm: %v\n", err)
	c := r.counts()
	c[1] += int64(k)
	return status, c
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}
