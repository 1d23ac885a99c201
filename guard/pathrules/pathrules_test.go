package pathrules

import (
	"path"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHost(t *testing.T) {
	want := map[string]Flavour{"windows": Windows, "darwin": Darwin, "linux": POSIX}[runtime.GOOS]
	assert.Equal(t, want, Host)
	assert.Equal(t, "windows", Windows.String())
}

func TestIsAbs(t *testing.T) {
	for _, c := range []struct {
		f    Flavour
		p    string
		want bool
	}{
		{POSIX, "/ws", true},
		{POSIX, "ws", false},
		{POSIX, `C:\ws`, false},
		{Darwin, "/Users/me", true},
		{Windows, `C:\ws`, true},
		{Windows, `c:/ws`, true},
		{Windows, `C:`, false},
		{Windows, `C:ws`, false},
		{Windows, `\ws`, false},
		{Windows, `/ws`, false},
		{Windows, `\\srv\share\x`, true},
		{Windows, `\\srv\share`, true},
		{Windows, `//srv/share/x`, true},
		{Windows, `\\?\C:\x`, true},
		{Windows, `ws\x`, false},
	} {
		assert.Equal(t, c.want, c.f.IsAbs(c.p), "%v IsAbs(%q)", c.f, c.p)
	}
}

func TestClean(t *testing.T) {
	for _, c := range []struct {
		f    Flavour
		p    string
		want string
		err  error
	}{
		{POSIX, "/ws/./a//b/../c", "/ws/a/c", nil},
		{POSIX, "/../..", "/", nil},
		{POSIX, "/ws/a.", "/ws/a.", nil},
		{POSIX, "ws", "", ErrRelative},
		{POSIX, "/ws/\x00", "", ErrNUL},
		{Darwin, "/Users/Me/WS/../x", "/Users/Me/x", nil},

		{Windows, `c:\ws\a`, `C:\ws\a`, nil},
		{Windows, `C:/ws/a/`, `C:\ws\a`, nil},
		{Windows, `C:\ws\\a\.\b\..\c`, `C:\ws\a\c`, nil},
		{Windows, `C:\..\..\x`, `C:\x`, nil},
		{Windows, `C:\`, `C:\`, nil},
		// Win32 drops the final segment's trailing dots and spaces, and
		// one trailing period of any other segment.
		{Windows, `C:\ws\secret.txt. . `, `C:\ws\secret.txt`, nil},
		{Windows, `C:\ws.\a`, `C:\ws\a`, nil},
		{Windows, `C:\ws\...`, "", ErrNamespace},
		// A trailing separator keeps a final name's spaces and dots, which
		// no separator-less cleaned form can express (found by FuzzClean).
		{Windows, `A:\0  \`, "", ErrNamespace},
		{Windows, `C:\ws\a.. \`, "", ErrNamespace},
		{Windows, `C:\ws\a \b\..`, "", ErrNamespace},
		{Windows, `C:\ws\a \b`, `C:\ws\a \b`, nil},
		{Windows, `\\srv\share\a\..\b`, `\\srv\share\b`, nil},
		{Windows, `\\srv\share\..\..\x`, `\\srv\share\x`, nil},
		{Windows, `//srv/share/x`, `\\srv\share\x`, nil},
		{Windows, `\\?\C:\ws\a`, `C:\ws\a`, nil},
		{Windows, `\\?\UNC\srv\share\a`, `\\srv\share\a`, nil},
		{Windows, `\\?\C:\ws\..\secret`, "", ErrNamespace},
		{Windows, `\\?\C:\ws\secret.`, "", ErrNamespace},
		{Windows, `\\?\GLOBALROOT\Device\HarddiskVolume1\x`, "", ErrNamespace},
		{Windows, `\??\C:\x`, "", ErrNamespace},
		{Windows, `\\.\C:\ws\a`, "", ErrDevice},
		{Windows, `\\.\PhysicalDrive0`, "", ErrDevice},
		{Windows, `\\.\pipe\x`, "", ErrDevice},
		{Windows, `C:\ws\NUL`, "", ErrDevice},
		{Windows, `C:\ws\nul.txt`, "", ErrDevice},
		{Windows, `C:\ws\con `, "", ErrDevice},
		{Windows, `C:\ws\COM1.log`, "", ErrDevice},
		{Windows, `C:\ws\lpt0`, "", ErrDevice},
		{Windows, `C:\ws\com10`, `C:\ws\com10`, nil},
		{Windows, `C:\ws\COM¹`, "", ErrDevice},
		{Windows, `C:\ws\conin$`, "", ErrDevice},
		{Windows, `C:\ws\console.txt`, `C:\ws\console.txt`, nil},
		{Windows, `C:\ws\a.txt:secret`, "", ErrStream},
		{Windows, `C:\ws\a.txt::$DATA`, "", ErrStream},
		{Windows, `C:ws\a`, "", ErrDriveRelative},
		{Windows, `\ws\a`, "", ErrDriveRelative},
		{Windows, `ws\a`, "", ErrRelative},
		{Windows, "C:\\ws\x00", "", ErrNUL},
	} {
		got, err := c.f.Clean(c.p)
		if c.err != nil {
			assert.ErrorIs(t, err, c.err, "%v Clean(%q) = %q", c.f, c.p, got)
			continue
		}
		if assert.NoError(t, err, "%v Clean(%q)", c.f, c.p) {
			assert.Equal(t, c.want, got, "%v Clean(%q)", c.f, c.p)
		}
	}
}

// On POSIX, Clean is path.Clean of an absolute path.
func TestCleanMatchesPathClean(t *testing.T) {
	for _, p := range []string{"/", "/a/b/../../..", "//a//b/", "/a/./b/.", "/a/.../b", "/ a /b. "} {
		got, err := POSIX.Clean(p)
		require.NoError(t, err)
		assert.Equal(t, path.Clean(p), got, p)
	}
}

func TestJoin(t *testing.T) {
	for _, c := range []struct {
		f       Flavour
		base, p string
		want    string
		err     error
	}{
		{POSIX, "/ws", "a/../b", "/ws/b", nil},
		{POSIX, "/ws", "../etc/passwd", "/etc/passwd", nil},
		{POSIX, "/ws", "/etc", "/etc", nil},
		{POSIX, "ws", "a", "", ErrRelative},
		{Windows, `C:\ws`, `a\b`, `C:\ws\a\b`, nil},
		{Windows, `C:\ws`, `a/../..\x`, `C:\x`, nil},
		{Windows, `C:\ws`, `\x`, `C:\x`, nil},
		{Windows, `\\srv\share\ws`, `\x`, `\\srv\share\x`, nil},
		{Windows, `C:\ws`, `D:\x`, `D:\x`, nil},
		{Windows, `C:\ws`, `C:x`, "", ErrDriveRelative},
		{Windows, `C:\ws`, `D:x`, "", ErrDriveRelative},
		{Windows, `C:\ws`, `nul`, "", ErrDevice},
	} {
		got, err := c.f.Join(c.base, c.p)
		if c.err != nil {
			assert.ErrorIs(t, err, c.err, "%v Join(%q, %q) = %q", c.f, c.base, c.p, got)
			continue
		}
		if assert.NoError(t, err, "%v Join(%q, %q)", c.f, c.base, c.p) {
			assert.Equal(t, c.want, got, "%v Join(%q, %q)", c.f, c.base, c.p)
		}
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		f       Flavour
		p, root string
		want    bool
	}{
		{POSIX, "/ws", "/ws", true},
		{POSIX, "/ws/a", "/ws", true},
		{POSIX, "/ws-evil", "/ws", false},
		{POSIX, "/WS/a", "/ws", false},
		{POSIX, "/x", "/", true},
		{POSIX, "x", "/", false},
		{POSIX, "/ws/a", "/ws/", true},
		// macOS volumes ignore case by default: /ws/.ENV is /ws/.env.
		{Darwin, "/Users/Me/WS/a", "/Users/me/ws", true},
		{Darwin, "/Users/me/ws-evil", "/Users/me/ws", false},
		{Windows, `C:\WS\a`, `c:\ws`, true},
		{Windows, `C:\ws`, `C:\ws`, true},
		{Windows, `C:\ws-evil`, `C:\ws`, false},
		{Windows, `D:\ws\a`, `C:\ws`, false},
		{Windows, `C:\x`, `C:\`, true},
		{Windows, `D:\x`, `C:\`, false},
		{Windows, `\\srv\share\a`, `\\SRV\Share`, true},
		{Windows, `\\srv\share2\a`, `\\srv\share`, false},
		{Windows, `\ws\a`, `\ws`, false},
	} {
		assert.Equal(t, c.want, c.f.Within(c.p, c.root), "%v Within(%q, %q)", c.f, c.p, c.root)
	}
}

func TestEqualFold(t *testing.T) {
	assert.True(t, Windows.Equal(`C:\WS\.ENV`, `c:\ws\.env`))
	assert.True(t, Darwin.Equal("/ws/.ENV", "/ws/.env"))
	assert.False(t, POSIX.Equal("/ws/.ENV", "/ws/.env"))
	assert.False(t, POSIX.FoldsCase())
	assert.True(t, Darwin.FoldsCase())
}

// Clean never panics, is idempotent, and its result is absolute and within
// itself, for any flavour and input.
func FuzzClean(f *testing.F) {
	for _, s := range []string{`C:\ws\a`, `\\srv\share\x`, `\\?\C:\a`, "/ws/../x", `C:\ws\nul.txt`, `\\.\pipe\x`, `C:\a.\b. `} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		for _, fl := range []Flavour{POSIX, Darwin, Windows} {
			c, err := fl.Clean(p)
			if err != nil {
				continue
			}
			require.True(t, fl.IsAbs(c), "%v Clean(%q) = %q is not absolute", fl, p, c)
			require.True(t, fl.Within(c, c), "%v Clean(%q) = %q", fl, p, c)
			c2, err := fl.Clean(c)
			require.NoError(t, err, "%v Clean(Clean(%q)) = Clean(%q)", fl, p, c)
			require.Equal(t, c, c2, "%v Clean not idempotent on %q", fl, p)
		}
	})
}

func TestCheck(t *testing.T) {
	assert.NoError(t, POSIX.Check("ws/nul"))
	assert.NoError(t, Darwin.Check("/ws/CON"))
	assert.ErrorIs(t, POSIX.Check("/ws/\x00"), ErrNUL)
	assert.NoError(t, Windows.Check(`ws\a.txt`))
	assert.ErrorIs(t, Windows.Check(`\ws\a.txt`), ErrDriveRelative)
	assert.ErrorIs(t, Windows.Check(`/ws/a.txt`), ErrDriveRelative)
	assert.NoError(t, Windows.Check(`C:\ws\a.txt`))
	assert.ErrorIs(t, Windows.Check(`ws\nul`), ErrDevice)
	assert.ErrorIs(t, Windows.Check(`a.txt:hidden`), ErrStream)
	assert.ErrorIs(t, Windows.Check(`C:a.txt`), ErrDriveRelative)
	assert.ErrorIs(t, Windows.Check(`\\.\pipe\x`), ErrDevice)
}
