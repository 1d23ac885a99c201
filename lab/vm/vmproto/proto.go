// Package vmproto is the wire format between the host runner (package vm)
// and the guest's init (vm/vminit). Both sides import it, so the two can
// only disagree when one of them is stale.
//
// The host and the guest talk over named virtio-serial ports. The control
// port carries JSON lines: one Request from the host, then Messages from
// the guest, then one ack line from the host. CMD's stdout and stderr have
// a port each, so they stay apart and the kernel's console (ttyS0) never
// mixes into them.
package vmproto

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/mcpguard/mcpguard/internal/pid1"
)

// Names of the virtio-serial ports.
const (
	PortControl = "mcpguard.ctl"
	PortStdout  = "mcpguard.stdout"
	PortStderr  = "mcpguard.stderr"
	PortStdin   = "mcpguard.stdin"
)

// HostRootTag is the 9p mount tag under which the host's / is shared.
const HostRootTag = "hostroot"

// Ack is the line the host sends once it has received every byte the guest
// announced, so the guest may power off without losing output.
const Ack = "ack"

// Request is what the host asks the guest to run.
type Request struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	// Dir is the working directory of Argv, a path on the host's root.
	Dir string `json:"dir"`
	// Tmpfs are directories that get an empty tmpfs.
	Tmpfs []string `json:"tmpfs,omitempty"`
	// Overlays are host directories made writable inside the VM: an
	// overlay with the host's content below and a tmpfs on top, so writes
	// work and vanish with the VM.
	Overlays []string `json:"overlays,omitempty"`
	// Stdin says whether the stdin port carries CMD's standard input;
	// without it CMD reads /dev/null.
	Stdin bool `json:"stdin,omitempty"`
}

// Validate reports what is wrong with r.
func (r *Request) Validate() error {
	if len(r.Argv) == 0 || r.Argv[0] == "" {
		return errors.New("empty command")
	}
	if r.Dir == "" || r.Dir[0] != '/' {
		return fmt.Errorf("working directory %q is not absolute", r.Dir)
	}
	for _, d := range append(append([]string(nil), r.Tmpfs...), r.Overlays...) {
		if d == "" || d[0] != '/' {
			return fmt.Errorf("mount point %q is not absolute", d)
		}
	}
	return nil
}

// Kinds of Message.
const (
	KindStarted = "started" // CMD was started
	KindExit    = "exit"    // CMD ended
	KindError   = "error"   // the guest could not run CMD
)

// Message is a report from the guest.
type Message struct {
	Kind string `json:"kind"`
	// Status is CMD's exit status, 128+N when signal N killed it (as a shell reports it).
	Status int `json:"status,omitempty"`
	// Stdout and Stderr count the bytes the guest wrote to each port, so
	// the host knows when it has all of them.
	Stdout int64 `json:"stdout,omitempty"`
	Stderr int64 `json:"stderr,omitempty"`
	// Uptime is the guest's /proc/uptime, in seconds, when the message was sent.
	Uptime float64 `json:"uptime,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// ProcessStatus is the number a shell would report for a finished
// process: the exit code, or 128+N for death by signal N.
func ProcessStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		return pid1.ExitStatus(ws)
	}
	return ps.ExitCode()
}

// WriteJSON writes v as one JSON line.
func WriteJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// maxLine bounds one control line (a Request carries the whole environment).
const maxLine = 4 << 20

// NewScanner returns a line scanner for the control port.
func NewScanner(r io.Reader) *bufio.Scanner {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), maxLine)
	return s
}

// ReadRequest reads and checks the host's request.
func ReadRequest(s *bufio.Scanner) (*Request, error) {
	if !s.Scan() {
		if err := s.Err(); err != nil {
			return nil, fmt.Errorf("read request: %w", err)
		}
		return nil, fmt.Errorf("read request: %w", io.ErrUnexpectedEOF)
	}
	var r Request
	if err := json.Unmarshal(s.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("decode request: %w", err)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("bad request: %w", err)
	}
	return &r, nil
}

// ParseMessage decodes one line from the guest.
func ParseMessage(line []byte) (*Message, error) {
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("decode guest message: %w", err)
	}
	switch m.Kind {
	case KindStarted, KindError:
	case KindExit:
		if m.Status < 0 || m.Status > 255 || m.Stdout < 0 || m.Stderr < 0 {
			return nil, fmt.Errorf("guest message out of range: %s", line)
		}
	default:
		return nil, fmt.Errorf("unknown guest message kind %q", m.Kind)
	}
	return &m, nil
}
