//go:build unix

package launch

import (
	"os"
	"syscall"
)

// ownerOf returns the owner and group of fi's file.
func ownerOf(fi os.FileInfo) (uid, gid uint32, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Uid, st.Gid, true
}
