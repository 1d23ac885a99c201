//go:build !linux

package runtime

import "os"

// fileID is what tells a file from its successor at the same path
// (helpers never run off Linux: nothing is cached there).
type fileID struct {
	size         int64
	mode         os.FileMode
	mtime, ctime int64
}

func identify(path string) fileID {
	fi, err := os.Lstat(path)
	if err != nil {
		return fileID{}
	}
	return fileID{size: fi.Size(), mode: fi.Mode(), mtime: fi.ModTime().UnixNano()}
}
