package changes

import (
	"io/fs"
	"syscall"
)

// inoCtime is fi's inode number and change time (nanoseconds).
func inoCtime(fi fs.FileInfo) (ino, ctime int64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Ino), st.Ctim.Nano()
	}
	return 0, fi.ModTime().UnixNano()
}
