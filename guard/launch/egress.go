package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// egressReady is the byte the guard writes once the egress filter has set
// up the server's network namespace.
const egressReady = 'G'

// ErrEgressNotReady is stage 1's error when the guard closed the egress
// descriptor without saying the network was ready (it failed, or died):
// the server is not started.
var ErrEgressNotReady = errors.New("egress filter not ready")

// Gate is the guard's end of the egress handshake.
type Gate struct{ r, w *os.File }

// AttachEgress makes stage 1 wait, before it starts the server, until the
// gate is opened: the guard sets up the network namespace (stage 1's
// /proc/PID/ns/net) in between. Call it before Prepare, on a spec with
// Namespaces; close the gate (opened or not) once the command started or
// failed to.
func AttachEgress(cmd *exec.Cmd, spec *Spec) (*Gate, error) {
	if !spec.Namespaces {
		return nil, fmt.Errorf("%w: egress needs the launcher's namespaces", ErrBadSpec)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("egress pipe: %w", err)
	}
	spec.EgressFD = 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	return &Gate{r: r, w: w}, nil
}

// OpenAfter runs setup (the egress filter joining stage 1's network
// namespace) and, when it succeeded, opens the gate; the gate is closed
// either way, so a stage 1 whose network could not be set up never starts
// the server.
func (g *Gate) OpenAfter(setup func() error) error {
	if err := setup(); err != nil {
		g.Close()
		return err
	}
	return g.Open()
}

// Open tells the waiting stage 1 that the network is set up, and closes
// the gate.
func (g *Gate) Open() error {
	_, err := g.w.Write([]byte{egressReady})
	g.Close()
	if err != nil {
		return fmt.Errorf("egress ready: %w", err)
	}
	return nil
}

// Close closes the guard's ends: a stage 1 still waiting gives up and
// never starts the server.
func (g *Gate) Close() error {
	g.r.Close()
	return g.w.Close()
}

// awaitEgress blocks until the guard says the network is ready (fd 0:
// nothing to wait for), and closes fd.
func awaitEgress(fd int) error {
	if fd == 0 {
		return nil
	}
	f := os.NewFile(uintptr(fd), "egress")
	defer f.Close()
	var b [1]byte
	n, err := f.Read(b[:])
	if n == 1 && b[0] == egressReady {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrEgressNotReady, err)
}

// RuleProtectedName is the audit rule of a protected name refused (the
// BPF backend's file.protected_denied, for the Landlock backend's
// supervised write roots).
const RuleProtectedName = "file.protected_denied"

// RuleExecutable is the audit rule of a program refused in a write root:
// a regular file with an execute bit made, written or moved there (both
// backends; the BPF backend's file.executable_denied).
const RuleExecutable = "file.executable_denied"

// Event is one refusal stage 1 reports (AttachEvents).
type Event struct {
	Rule   string `json:"rule"`
	Target string `json:"target"`
	Op     string `json:"op"`
}

// AttachEvents gives stage 1 a pipe for its Events. The caller closes
// w once the command started (or failed to), and reads r (a JSON object
// per line) until EOF, which comes when stage 1 is gone. Call before
// Prepare.
func AttachEvents(cmd *exec.Cmd, spec *Spec) (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("events pipe: %w", err)
	}
	spec.EventsFD = 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, w)
	return r, w, nil
}
