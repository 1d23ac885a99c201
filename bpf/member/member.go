//go:build linux

// Package member lets a test or benchmark process join and leave a BPF
// session by tgid while it runs. A guarded task gets no bpf() at all (the
// bpf LSM hook), so it cannot remove its own tasks entry: an unguarded
// helper process does the map edits for it. The helper is the calling
// binary started again; this package's init serves it, so any binary that
// imports the package can be its own helper.
package member

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
)

// env turns the binary into the helper: "POLICY-ID:PID:TASKS-PIN" (the
// pin last, so that it may hold colons).
const env = "MCPGUARD_MEMBER_HELPER"

// ErrHelper is wrapped when the helper refused a request or went away.
var ErrHelper = errors.New("membership helper")

func init() {
	if v := os.Getenv(env); v != "" {
		os.Exit(serve(v, os.Stdin, os.Stdout))
	}
}

// serve runs the helper: it reads "join" or "leave" lines and adds PID to
// or removes it from the tasks map, answering "ok" or the error on one
// line.
func serve(v string, in io.Reader, out io.Writer) int {
	parts := strings.SplitN(v, ":", 3)
	if len(parts) != 3 {
		fmt.Fprintf(out, "bad %s=%q\n", env, v)
		return 2
	}
	id, err1 := strconv.ParseUint(parts[0], 10, 64)
	pid, err2 := strconv.ParseUint(parts[1], 10, 32)
	if err1 != nil || err2 != nil {
		fmt.Fprintf(out, "bad %s=%q\n", env, v)
		return 2
	}
	m, err := ebpf.LoadPinnedMap(parts[2], nil)
	if err != nil {
		fmt.Fprintln(out, oneLine(err))
		return 1
	}
	defer m.Close()
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var err error
		switch sc.Text() {
		case "join":
			err = m.Put(uint32(pid), id)
		case "leave":
			err = m.Delete(uint32(pid))
		default:
			err = fmt.Errorf("unknown request %q", sc.Text())
		}
		if err != nil {
			fmt.Fprintln(out, oneLine(err))
		} else {
			fmt.Fprintln(out, "ok")
		}
	}
	return 0
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// Helper is a running membership helper for one process.
type Helper struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// Start starts the helper for process pid and session policy, editing the
// tasks map pinned at tasksPin. Start it before pid joins: a guarded
// process cannot start it (the helper's first bpf() would be refused,
// since children of a guarded task are guarded).
func Start(tasksPin string, policy uint64, pid int) (*Helper, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("membership helper: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d:%d:%s", env, policy, pid, tasksPin))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("membership helper: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("membership helper: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("membership helper: %w", err)
	}
	return &Helper{cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

// Join puts the process into the session (its tgid into tasks).
func (h *Helper) Join() error { return h.do("join") }

// Leave takes the process out of the session again.
func (h *Helper) Leave() error { return h.do("leave") }

// Close stops the helper.
func (h *Helper) Close() error {
	h.in.Close()
	return h.cmd.Wait()
}

func (h *Helper) do(req string) error {
	if _, err := fmt.Fprintln(h.in, req); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrHelper, req, err)
	}
	if !h.out.Scan() {
		return fmt.Errorf("%w: gone before answering %s: %v", ErrHelper, req, h.out.Err())
	}
	if r := h.out.Text(); r != "ok" {
		return fmt.Errorf("%w: %s: %s", ErrHelper, req, r)
	}
	return nil
}
