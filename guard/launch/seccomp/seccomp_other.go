//go:build !linux

package seccomp

import (
	"errors"
	"fmt"
	"runtime"
)

// Install fails closed off Linux: seccomp is a Linux facility, and the
// error does not wrap ErrNoFilter, which callers on Linux take as "this
// architecture runs without the filter".
func Install(Options) error {
	return fmt.Errorf("install seccomp filter: %w on %s", errors.ErrUnsupported, runtime.GOOS)
}

// Available reports whether this build has the filter: never off Linux.
func Available() bool { return false }
