package validate

import (
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// kernelResolve asks the kernel where p leads: it opens p with O_PATH (no
// read access needed, nothing is read, FIFOs do not block) and reads back
// through /proc where the descriptor points. p is not cleaned first: the
// kernel takes each ".." after the symlinks before it.
func kernelResolve(p string) (string, bool) {
	// Most paths hold no symlink at all: then p's lexical form is already
	// canonical, and one openat2 that refuses to follow any link proves it
	// without the read-back.
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	if fd, err := unix.Openat2(unix.AT_FDCWD, p, &how); err == nil {
		unix.Close(fd)
		return filepath.Clean(p), true
	}
	// Magic links (/proc/self/cwd, /proc/PID/root, fd links) would be
	// resolved for the guard's process, not the server's: refused here,
	// and walk refuses them too.
	how.Resolve = unix.RESOLVE_NO_MAGICLINKS
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &how)
	if err != nil {
		return "", false
	}
	defer unix.Close(fd)
	var buf [unix.PathMax]byte
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf[:])
	if err != nil || n == 0 || n >= len(buf) || buf[0] != '/' {
		return "", false
	}
	r := string(buf[:n])
	if strings.HasSuffix(r, " (deleted)") {
		return "", false
	}
	return r, true
}
