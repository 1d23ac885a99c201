//go:build !linux && !darwin

package changes

import "io/fs"

// inoCtime is fi's modification time where the system gives no inode
// number or change time here.
func inoCtime(fi fs.FileInfo) (ino, ctime int64) { return 0, fi.ModTime().UnixNano() }
