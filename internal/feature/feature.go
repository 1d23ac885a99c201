// Package feature holds what every floor of the module says about a kernel
// feature it needs: the guard's L3 backends wrap ErrKernelRefused when the
// kernel lacks or refuses one, and the tests' skip helpers (internal/testenv)
// look for it, without the low floor importing the guard.
package feature

import "errors"

// ErrKernelRefused is what an L3 backend wraps when the kernel lacks or
// refuses a feature it needs (guard.ErrKernelRefused is this error).
var ErrKernelRefused = errors.New("kernel refused the feature")
