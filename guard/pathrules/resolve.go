package pathrules

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// FS is what ResolveWindows reads of the filesystem.
type FS interface {
	Lstat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
}

// OSFS is the real filesystem.
type OSFS struct{}

// Lstat is os.Lstat.
func (OSFS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }

// Readlink is os.Readlink.
func (OSFS) Readlink(name string) (string, error) { return os.Readlink(name) }

// Resolution errors.
var (
	ErrTooManyLinks = errors.New("too many levels of symbolic links")
	ErrUnresolvable = errors.New("path cannot be resolved")
)

const maxLinks = 40

// ResolveWindows returns the path Windows reaches for the absolute path p:
// Win32 cleans p lexically before the filesystem sees it (so "link\.."
// is the link's directory, unlike on POSIX), then each symbolic link or
// junction on the way is replaced by its target (a relative target is
// taken from the link's directory) and the result cleaned again. Below
// the first component that does not exist nothing can redirect, so the
// rest is taken as written (creating a file through a dangling link is
// caught, since the link is followed). A reparse point that is not a link
// (a cloud placeholder, a dedup file) is an ordinary component.
func ResolveWindows(p string, fsys FS) (string, error) {
	c, err := Windows.Clean(p)
	if err != nil {
		return "", err
	}
	links := 0
	for {
		vol, rest := Windows.splitVolume(c)
		comps := strings.FieldsFunc(rest, func(r rune) bool { return r == '\\' })
		resolved := vol
		redirected := false
		for i, comp := range comps {
			next := resolved + `\` + comp
			fi, err := fsys.Lstat(next)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return c, nil
				}
				return "", fmt.Errorf("%w: %w", ErrUnresolvable, err)
			}
			mode := fi.Mode()
			if mode&(fs.ModeSymlink|fs.ModeIrregular) == 0 {
				resolved = next
				continue
			}
			target, err := fsys.Readlink(next)
			if err != nil {
				if mode&fs.ModeSymlink == 0 {
					resolved = next // a reparse point that names no other path
					continue
				}
				return "", fmt.Errorf("%w: %w", ErrUnresolvable, err)
			}
			if links++; links > maxLinks {
				return "", ErrTooManyLinks
			}
			switch tv, trest := Windows.splitVolume(target); {
			case Windows.IsAbs(target):
			case tv == "" && trest != "" && Windows.isSep(trest[0]):
				target = vol + target // rooted: the link's volume
			case tv != "":
				return "", fmt.Errorf("%w: link %s points to drive-relative %q", ErrUnresolvable, next, target)
			default:
				target = resolved + `\` + target
			}
			if i+1 < len(comps) {
				target += `\` + strings.Join(comps[i+1:], `\`)
			}
			if c, err = Windows.Clean(target); err != nil {
				return "", fmt.Errorf("link %s: %w", next, err)
			}
			redirected = true
			break
		}
		if !redirected {
			return c, nil
		}
	}
}
