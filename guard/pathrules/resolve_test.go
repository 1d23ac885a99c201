package pathrules

import (
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// fakeFS is a Windows volume in a map: each key is a clean path that
// exists; a value other than "" is a link target (mode says which kind).
type fakeFS map[string]fakeEntry

type fakeEntry struct {
	target string
	mode   fs.FileMode
}

type fakeInfo struct{ mode fs.FileMode }

func (i fakeInfo) Name() string       { return "" }
func (i fakeInfo) Size() int64        { return 0 }
func (i fakeInfo) Mode() fs.FileMode  { return i.mode }
func (i fakeInfo) ModTime() time.Time { return time.Time{} }
func (i fakeInfo) IsDir() bool        { return i.mode.IsDir() }
func (i fakeInfo) Sys() any           { return nil }

// Names compare case-insensitively, as on NTFS.
func (f fakeFS) get(name string) (fakeEntry, bool) {
	for k, v := range f {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return fakeEntry{}, false
}

func (f fakeFS) Lstat(name string) (fs.FileInfo, error) {
	e, ok := f.get(name)
	if !ok {
		return nil, fs.ErrNotExist
	}
	return fakeInfo{e.mode}, nil
}

func (f fakeFS) Readlink(name string) (string, error) {
	e, ok := f.get(name)
	if !ok || e.target == "" {
		return "", fs.ErrInvalid
	}
	return e.target, nil
}

func TestResolveWindows(t *testing.T) {
	dir := fakeEntry{mode: fs.ModeDir}
	vol := fakeFS{
		`C:\ws`:            dir,
		`C:\ws\a.txt`:      {},
		`C:\ws\out`:        {target: `C:\secrets`, mode: fs.ModeSymlink},
		`C:\ws\junction`:   {target: `C:\Windows`, mode: fs.ModeIrregular},
		`C:\ws\rel`:        {target: `..\secrets`, mode: fs.ModeSymlink},
		`C:\ws\rooted`:     {target: `\secrets`, mode: fs.ModeSymlink},
		`C:\ws\drel`:       {target: `D:x`, mode: fs.ModeSymlink},
		`C:\ws\loop`:       {target: `C:\ws\loop`, mode: fs.ModeSymlink},
		`C:\ws\cloud`:      {mode: fs.ModeIrregular},
		`C:\ws\dangling`:   {target: `C:\elsewhere\new.txt`, mode: fs.ModeSymlink},
		`C:\ws\broken`:     {mode: fs.ModeSymlink},
		`C:\secrets`:       dir,
		`C:\Windows`:       dir,
		`C:\ws\cloud\f`:    {},
		`C:\ws\inner`:      {target: `C:\ws\sub`, mode: fs.ModeSymlink},
		`C:\ws\sub`:        dir,
		`\\srv\share\link`: {target: `\top`, mode: fs.ModeSymlink},
	}
	for _, c := range []struct {
		p, want string
		err     error
	}{
		{`C:\ws\a.txt`, `C:\ws\a.txt`, nil},
		{`c:/WS/new/deeper`, `C:\WS\new\deeper`, nil},
		{`C:\ws\out\key`, `C:\secrets\key`, nil},
		{`C:\ws\junction\System32`, `C:\Windows\System32`, nil},
		{`C:\ws\rel\key`, `C:\secrets\key`, nil},
		{`C:\ws\rooted\key`, `C:\secrets\key`, nil},
		{`\\srv\share\link\x`, `\\srv\share\top\x`, nil},
		{`C:\ws\inner\x`, `C:\ws\sub\x`, nil},
		{`C:\ws\cloud\f`, `C:\ws\cloud\f`, nil},
		{`C:\ws\dangling`, `C:\elsewhere\new.txt`, nil},
		// Win32 takes ".." before the filesystem: out\.. is C:\ws.
		{`C:\ws\out\..\a.txt`, `C:\ws\a.txt`, nil},
		{`C:\ws\loop`, "", ErrTooManyLinks},
		{`C:\ws\broken\x`, "", ErrUnresolvable},
		{`C:\ws\drel`, "", ErrUnresolvable},
		{`C:\ws\nul`, "", ErrDevice},
	} {
		got, err := ResolveWindows(c.p, vol)
		if c.err != nil {
			assert.ErrorIs(t, err, c.err, "ResolveWindows(%q) = %q", c.p, got)
			continue
		}
		if assert.NoError(t, err, c.p) {
			assert.Equal(t, c.want, got, c.p)
		}
	}
}
