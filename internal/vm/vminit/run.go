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
	"github.com/mcpguard/mcpguard/internal/vm/vmproto"
)

// runCommand runs the request's command in the new root and returns its
// exit status and how many bytes of stdout and stderr went to the host.
func runCommand(req *vmproto.Request, report func(vmproto.Message)) (int, [2]int64, error) {
	var counts [2]int64
	ports := [2]string{vmproto.PortStdout, vmproto.PortStderr}
	var outs [2]*os.File
	for i, name := range ports {
		f, err := openPort(name, os.O_WRONLY)
		if err != nil {
			return 0, counts, err
		}
		defer f.Close()
		outs[i] = f
	}
	stdin, err := os.Open(os.DevNull)
	if err != nil {
		return 0, counts, err
	}
	if req.Stdin {
		stdin.Close()
		if stdin, err = openPort(vmproto.PortStdin, os.O_RDONLY); err != nil {
			return 0, counts, err
		}
	}
	defer stdin.Close()

	// The command writes into pipes that we copy to the ports, counting,
	// rather than into the ports themselves: the counts tell the host when
	// it has everything.
	var (
		copiers sync.WaitGroup
		n       [2]atomic.Int64
		readers [2]*os.File
		writers [2]*os.File
	)
	for i := range ports {
		r, w, err := os.Pipe()
		if err != nil {
			return 0, counts, err
		}
		readers[i], writers[i] = r, w
		copiers.Add(1)
		go func() {
			defer copiers.Done()
			_, _ = io.Copy(countingWriter{outs[i], &n[i]}, r)
		}()
	}

	// exec.Command resolves argv[0] with our own PATH: use the caller's.
	for _, kv := range req.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			os.Setenv("PATH", v)
		}
	}
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env = req.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, writers[0], writers[1]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := os.Chdir(req.Dir); err != nil {
		return 0, counts, fmt.Errorf("working directory: %w", err)
	}
	cmd.Dir = req.Dir
	if err := cmd.Start(); err != nil {
		for _, w := range writers {
			w.Close()
		}
		copiers.Wait()
		// As a shell would: a message on stderr and 127 (not found) or
		// 126 (found but not runnable).
		status := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			status = 127
		}
		k, _ := fmt.Fprintf(outs[1], "mcpguard vm: %v\n", err)
		return status, [2]int64{n[0].Load(), n[1].Load() + int64(k)}, nil
	}
	report(vmproto.Message{Kind: vmproto.KindStarted})
	trace("command started")
	for _, w := range writers {
		w.Close()
	}
	// exec.Cmd.Wait would race with reaping the orphans that PID 1
	// inherits for the same child.
	status, err := pid1.Reap(cmd.Process.Pid)
	if err != nil {
		return 0, counts, err
	}
	trace("command exited")

	// A background child may hold the pipes open: give the copiers a
	// moment, then cut them off.
	done := make(chan struct{})
	go func() { copiers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(drainDelay):
		for _, r := range readers {
			r.Close()
		}
		<-done
	}
	for i := range n {
		counts[i] = n[i].Load()
	}
	return status, counts, nil
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
