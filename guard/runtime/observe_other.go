//go:build !linux

package runtime

import (
	"fmt"
	goruntime "runtime"
	"time"
)

// Observer records a server's file accesses; off Linux there is no
// fanotify, so none can be made (Observe fails).
type Observer struct{}

// Observe fails closed off Linux: learn mode has no way to see the files.
func Observe() (*Observer, error) {
	return nil, fmt.Errorf("%w: fanotify is Linux-only, not on %s", ErrNoObserver, goruntime.GOOS)
}

// Follow does nothing: no Observer exists off Linux.
func (o *Observer) Follow(int) {}

// Sync returns false: no Observer exists off Linux.
func (o *Observer) Sync(time.Duration) bool { return false }

// Stop returns nothing: no Observer exists off Linux.
func (o *Observer) Stop() []Access { return nil }
