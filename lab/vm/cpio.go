//go:build linux

package vm

import (
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
)

// cpioWriter writes a cpio archive in the "newc" format, the one the kernel
// unpacks as an initramfs. Only what an initramfs needs: directories,
// regular files and symlinks, owned by root.
type cpioWriter struct {
	w   io.Writer
	n   int64 // bytes written, for padding
	ino int
	err error
}

func newCPIOWriter(w io.Writer) *cpioWriter { return &cpioWriter{w: w, ino: 1} }

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

func (c *cpioWriter) entry(name string, mode uint32, data []byte) error {
	return c.node(name, mode, data, 0, 0)
}

func (c *cpioWriter) node(name string, mode uint32, data []byte, rmajor, rminor uint32) error {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	if name == "" {
		return fmt.Errorf("cpio: empty name")
	}
	c.ino++
	nlink := 1
	if mode&cpioDir != 0 {
		nlink = 2
	}
	// magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor,
	// devminor, rdevmajor, rdevminor, namesize, check
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rmajor, rminor, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write(append([]byte(name), 0))
	c.pad()
	c.write(data)
	c.pad()
	return c.err
}

const (
	cpioDir     = 0o040000
	cpioFile    = 0o100000
	cpioSymlink = 0o120000
	cpioChar    = 0o020000
)

// CharDev adds a character device node.
func (c *cpioWriter) CharDev(name string, perm fs.FileMode, major, minor uint32) error {
	return c.node(name, cpioChar|uint32(perm.Perm()), nil, major, minor)
}

// Dir adds a directory.
func (c *cpioWriter) Dir(name string, perm fs.FileMode) error {
	return c.entry(name, cpioDir|uint32(perm.Perm()), nil)
}

// File adds a regular file.
func (c *cpioWriter) File(name string, perm fs.FileMode, data []byte) error {
	return c.entry(name, cpioFile|uint32(perm.Perm()), data)
}

// Symlink adds a symbolic link.
func (c *cpioWriter) Symlink(name, target string) error {
	return c.entry(name, cpioSymlink|0o777, []byte(target))
}

// Close writes the trailer.
func (c *cpioWriter) Close() error {
	if c.err != nil {
		return c.err
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, len("TRAILER!!!")+1, 0)
	c.write([]byte(hdr))
	c.write([]byte("TRAILER!!!\x00"))
	c.pad()
	// The kernel reads initramfs in 512-byte blocks; pad like cpio(1).
	if r := c.n % 512; r != 0 {
		c.write(make([]byte, 512-r))
	}
	return c.err
}
