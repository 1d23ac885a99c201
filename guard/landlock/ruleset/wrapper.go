package ruleset

import (
	"errors"
	"fmt"
)

// ExecArg is the hidden first argument that turns any binary linking this
// package (mcpguard, a test binary) into the re-exec wrapper:
//
//	BINARY __landlock-exec RULES-JSON PROGRAM ARGV0 ARGS...
//
// The wrapper restricts itself with RULES-JSON and execve()s PROGRAM with
// ARGV0 ARGS... and its own environment. On any failure it exits with
// status 126 and a message on stderr, without running PROGRAM.
const ExecArg = "__landlock-exec"

// WrapperExitCode is the wrapper's exit status when it refused to start
// the server.
const WrapperExitCode = 126

// ErrUnavailable is wrapped when the kernel has no Landlock, or none that
// can enforce the rules. The parent package adds guard.ErrKernelRefused.
var ErrUnavailable = errors.New("landlock unavailable")

// CheckABI fails closed: Landlock absent or disabled is an error wrapping
// ErrUnavailable, never a silent run without enforcement (which is what
// go-landlock's best-effort mode would do on such a kernel). It returns
// the ABI capped at MaxABI.
func CheckABI(probe Probe) (int, error) {
	abi, err := probe()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if abi < 1 {
		return 0, fmt.Errorf("%w: kernel reports ABI %d", ErrUnavailable, abi)
	}
	return min(abi, MaxABI), nil
}

// Probe reports the running kernel's Landlock ABI version (0 or an error:
// no Landlock). The sandbox takes it as a parameter so that tests can
// stand in for a kernel without Landlock.
type Probe func() (int, error)

// MaxABI is the newest ABI this build knows (go-landlock v0.11.2). A newer
// kernel is used at this level.
const MaxABI = 11
