//go:build !linux

package ruleset

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// errNotLinux is why Landlock is missing off Linux: it is a Linux security
// module, so no kernel here can enforce a ruleset.
var errNotLinux = errors.New("landlock is a linux security module, " + runtime.GOOS + " has none")

// init serves ExecArg as on Linux, so a wrapper started here anyway (a
// test's injected probe) refuses with WrapperExitCode and never runs the
// server unrestricted.
func init() {
	if len(os.Args) > 1 && os.Args[1] == ExecArg {
		err := Wrap(os.Args[2:], KernelABI)
		fmt.Fprintf(os.Stderr, "mcpguard landlock: %v\n", err)
		os.Exit(WrapperExitCode)
	}
}

// KernelABI always fails off Linux, so CheckABI (and the sandbox's New)
// fail closed with ErrUnavailable.
func KernelABI() (int, error) {
	return 0, fmt.Errorf("landlock_create_ruleset: %w", errNotLinux)
}

// Wrap refuses to start the server: there is no ruleset to restrict it
// with. Never reached through mcpguard, whose New fails first.
func Wrap(args []string, probe Probe) error {
	_, err := CheckABI(probe)
	if err == nil {
		err = fmt.Errorf("%w: %w", ErrUnavailable, errNotLinux)
	}
	return err
}

// RestrictThread fails closed, as Wrap does.
func RestrictThread(r *Rules, probe Probe) error {
	return Wrap(nil, probe)
}

// HasSocketFilter reports false: the seccomp socket filter is Linux's.
func HasSocketFilter() bool { return false }

// mask stands in for the kernel masks of apply.go, so that Decode checks
// the same accesses everywhere.
func mask(a Access) (Access, bool) {
	switch a {
	case Read, Write, Exec, Device:
		return a, true
	}
	return "", false
}
