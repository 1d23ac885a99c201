package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/mcpguard/mcpguard/guard/landlock/ruleset"
)

// ErrHelperSandbox is wrapped when a helper cannot be confined here (no
// Landlock, not Linux): it is then not run at all.
var ErrHelperSandbox = errors.New("cannot confine a helper program")

// Helper is a program the guard runs to learn about a server before the
// server starts: an interpreter asked for its search path, npm asked to
// fetch a package, a version manager asked which program its shim runs.
// What these run can be the server's own code (a module planted in its
// workspace, a package's install script), so a helper is launched exactly
// like a server, through the launcher (namespaces, the server's
// unprivileged identity, no capabilities, seccomp) under a Landlock
// ruleset of its own: the system baseline plus Read (read-only), Exec
// (read and execute) and Write, TCP connect only to the TCP ports, UDP
// only when UDP is set, and nothing else.
type Helper struct {
	// Argv is the program (an absolute path: no PATH lookup) and its
	// arguments.
	Argv []string
	// Dir is the working directory. Empty: a fresh empty directory,
	// read-only to the helper and removed afterwards, so that nothing a
	// server left in its own working directory is found there.
	Dir string
	// Env is the helper's whole environment (nil is empty, never the
	// guard's).
	Env []string
	// Read, Exec and Write are granted besides the baseline; paths that
	// do not exist are skipped.
	Read, Exec, Write []string
	// TCP lists the ports it may connect to (none: no network). UDP
	// admits UDP sockets (DNS for a package fetch).
	TCP []uint16
	UDP bool
	// Self is the launcher binary (os.Executable() if empty).
	Self string
	// Getenv reads the guard's own settings (MCPGUARD_SERVER_USER);
	// os.Getenv if nil.
	Getenv func(string) string
}

// Output runs the helper confined and returns its standard output. Its
// standard error is part of the error, shortened.
func (h Helper) Output(ctx context.Context) ([]byte, error) {
	if len(h.Argv) == 0 || !strings.HasPrefix(h.Argv[0], "/") {
		return nil, fmt.Errorf("helper: %q is not an absolute program path", h.Argv)
	}
	if _, err := ruleset.CheckABI(ruleset.KernelABI); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHelperSandbox, err)
	}
	dir := h.Dir
	if dir == "" {
		// Empty and read-only to the helper (root's, 0755): nothing
		// needs a mapped mount to reach it, and nobody else can plant
		// anything in it while the helper runs.
		tmp, err := os.MkdirTemp("", "mcpguard-helper-*")
		if err != nil {
			return nil, fmt.Errorf("helper: %w", err)
		}
		defer os.RemoveAll(tmp)
		if err := os.Chmod(tmp, 0o755); err != nil {
			return nil, fmt.Errorf("helper: %w", err)
		}
		dir = tmp
		h.Read = append(h.Read, tmp)
	}
	getenv := h.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	rules := h.rules()
	spec, err := NewSpec(os.Geteuid(), getenv, h.Write)
	if err != nil {
		return nil, fmt.Errorf("helper: %w", err)
	}
	// A helper that fetches packages keeps the host's network, by port
	// only (Landlock); every other launch gets a namespace of its own.
	spec.SharedNetwork = spec.Namespaces && !rules.NoNetwork()
	spec.Landlock = rules
	spec.Reach = append(append(slices.Clone(h.Read), h.Exec...), h.Argv[0])
	cmd := exec.CommandContext(ctx, h.Argv[0], h.Argv[1:]...)
	cmd.Dir = dir
	cmd.Env = h.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.WaitDelay = time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if spec.Namespaces {
		lim, err := NewLimiter(Limits{})
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrHelperSandbox, err)
		}
		defer lim.Close()
		lim.Attach(cmd, &spec)
	}
	l, err := Prepare(cmd, spec, Options{Self: h.Self})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHelperSandbox, err)
	}
	defer l.Close()
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 600 {
			msg = "..." + msg[len(msg)-600:]
		}
		if msg != "" {
			return out, fmt.Errorf("%s: %w: %s", strings.Join(h.Argv, " "), err, msg)
		}
		return out, fmt.Errorf("%s: %w", strings.Join(h.Argv, " "), err)
	}
	return out, nil
}

// rules is the helper's Landlock ruleset.
func (h Helper) rules() *ruleset.Rules {
	r := &ruleset.Rules{Paths: ruleset.Runtime(), ConnectTCP: h.TCP, AllowUDP: h.UDP}
	add := func(a ruleset.Access, why string, paths []string) {
		for _, p := range paths {
			r.Paths = append(r.Paths, ruleset.PathRule{Path: p, Access: a, Optional: true, Why: why})
		}
	}
	add(ruleset.Read, "helper read", h.Read)
	add(ruleset.Exec, "helper exec", append([]string{h.Argv[0]}, h.Exec...))
	add(ruleset.Write, "helper write", h.Write)
	return r
}
