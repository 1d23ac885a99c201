package servers

import (
	"os"

	"golang.org/x/sys/windows"
)

// lockFile takes an exclusive lock on f (LockFileEx over the whole file),
// so that two test binaries do not build the servers into one directory
// at once.
func lockFile(f *os.File) (unlock func(), err error) {
	h := windows.Handle(f.Fd())
	ol := new(windows.Overlapped)
	if err := windows.LockFileEx(h, windows.LOCKFILE_EXCLUSIVE_LOCK, 0, ^uint32(0), ^uint32(0), ol); err != nil {
		return nil, err
	}
	return func() { windows.UnlockFileEx(h, 0, ^uint32(0), ^uint32(0), ol) }, nil
}
