//go:build !linux

package eval

import (
	"errors"
	"runtime"
)

// ErrNoReadWatch is NewReadWatch's error off Linux: the file_read oracle
// needs inotify's IN_OPEN (an open the kernel allowed), which macOS and
// Windows have no equivalent of for a single file. Such cases then fail
// with this error instead of getting a verdict nobody observed.
var ErrNoReadWatch = errors.New("file_read oracle needs inotify (linux), not available on " + runtime.GOOS)

// ReadWatch is inert off Linux; NewReadWatch never returns one.
type ReadWatch struct{}

// NewReadWatch fails off Linux: see ErrNoReadWatch.
func NewReadWatch(paths []string) (*ReadWatch, error) { return nil, ErrNoReadWatch }

// Stop returns nothing seen.
func (w *ReadWatch) Stop() map[string]bool { return nil }
