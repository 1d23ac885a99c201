//go:build unix

package servers

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on f, so that two test binaries do not
// build the servers into one directory at once.
func lockFile(f *os.File) (unlock func(), err error) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }, nil
}
