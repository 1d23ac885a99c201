//go:build unix

package clients

import (
	"os"
	"syscall"
)

// owner is the file's user and group, -1 where the system does not say.
func owner(fi os.FileInfo) (uid, gid int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return -1, -1
}
