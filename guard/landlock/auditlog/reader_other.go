//go:build !linux

package auditlog

import (
	"fmt"
	"runtime"
)

// Watch is Linux's: Landlock and its audit records are.
func Watch(pid int, fn func(Denial)) (stop func(), err error) {
	return nil, fmt.Errorf("%w: Landlock is Linux's, this is %s", ErrUnavailable, runtime.GOOS)
}

// Reader is Linux's.
type Reader struct{}

// Open is Linux's: Landlock and its audit records are.
func Open() (*Reader, error) {
	return nil, fmt.Errorf("%w: Landlock is Linux's, this is %s", ErrUnavailable, runtime.GOOS)
}

// Close does nothing here.
func (r *Reader) Close() error { return nil }
