package runtime

import "syscall"

// fileID is what tells a file from its successor at the same path.
type fileID struct {
	dev, ino, size uint64
	mode           uint32
	mtime, ctime   int64
}

// identify is path's fileID (not following a last link); zero: absent.
func identify(path string) fileID {
	var st syscall.Stat_t
	if syscall.Lstat(path, &st) != nil {
		return fileID{}
	}
	return fileID{
		dev: st.Dev, ino: st.Ino, size: uint64(st.Size), mode: st.Mode,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
	}
}
