package validate

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

// tree builds a workspace with symlinks that stay inside and that escape:
//
//	base/ws/a.txt
//	base/ws/sub/b.txt
//	base/ws/in -> sub            (inside)
//	base/ws/out -> ../secret     (escapes)
//	base/ws/abs -> base/secret   (escapes, absolute)
//	base/ws/dangling -> ../secret/new.txt (escapes, target missing)
//	base/ws/loop -> loop
//	base/ws-evil/x               (sibling with a shared prefix)
//	base/secret/key
func tree(tb testing.TB) (base, ws string) {
	tb.Helper()
	base, err := filepath.EvalSymlinks(tb.TempDir())
	require.NoError(tb, err)
	ws = filepath.Join(base, "ws")
	for _, d := range []string{"ws/sub", "ws-evil", "secret"} {
		require.NoError(tb, os.MkdirAll(filepath.Join(base, d), 0o755))
	}
	for _, f := range []string{"ws/a.txt", "ws/sub/b.txt", "ws-evil/x", "secret/key"} {
		require.NoError(tb, os.WriteFile(filepath.Join(base, f), []byte("x"), 0o644))
	}
	links := map[string]string{
		"ws/in":       "sub",
		"ws/out":      "../secret",
		"ws/abs":      filepath.Join(base, "secret"),
		"ws/dangling": "../secret/new.txt",
		"ws/loop":     "loop",
	}
	for l, t := range links {
		require.NoError(tb, os.Symlink(t, filepath.Join(base, l)))
	}
	return base, ws
}

func TestCanonPath(t *testing.T) {
	base, ws := tree(t)
	o := PathOptions{Base: ws, Home: filepath.Join(base, "secret")}
	cases := []struct {
		in   string
		want string
		err  error
	}{
		{in: ws + "/a.txt", want: ws + "/a.txt"},
		{in: "a.txt", want: ws + "/a.txt"},
		{in: "./sub/../a.txt", want: ws + "/a.txt"},
		{in: ws + "/in/b.txt", want: ws + "/sub/b.txt"},
		{in: ws + "/out/key", want: base + "/secret/key"},
		{in: ws + "/abs/key", want: base + "/secret/key"},
		{in: ws + "/dangling", want: base + "/secret/new.txt"},
		{in: ws + "/new/deeper/file", want: ws + "/new/deeper/file"},
		{in: ws + "/../secret/key", want: base + "/secret/key"},
		{in: ws + "/a.txt/x", want: ws + "/a.txt/x"},
		{in: "~/key", want: base + "/secret/key"},
		{in: "file://" + ws + "/a.txt", want: ws + "/a.txt"},
		{in: ws + "/a\x00.txt", err: ErrNUL},
		{in: ws + "/%2e%2e/secret/key", err: ErrEncodedTraversal},
		{in: ws + "/%252e%252e/secret/key", err: ErrEncodedTraversal},
		{in: ws + "/..%2fsecret", err: ErrEncodedTraversal},
		{in: ws + "/loop/x", err: ErrTooManyLinks},
		{in: "", want: ws},
		{in: ws + "/100%.txt", want: ws + "/100%.txt"},
		{in: ws + "/a%20b.txt", want: ws + "/a%20b.txt"},
	}
	for _, c := range cases {
		got, err := CanonPath(c.in, o)
		if c.err != nil {
			assert.ErrorIs(t, err, c.err, "input %q", c.in)
			continue
		}
		if assert.NoError(t, err, "input %q", c.in) {
			assert.Equal(t, c.want, got, "input %q", c.in)
		}
	}
	_, err := CanonPath("rel.txt", PathOptions{})
	assert.ErrorIs(t, err, ErrRelative)
	_, err = CanonPath("", PathOptions{})
	assert.ErrorIs(t, err, ErrEmptyPath)
}

func TestRootsPrefixSemantics(t *testing.T) {
	base, ws := tree(t)
	roots, err := NewRoots(ws)
	require.NoError(t, err)
	assert.True(t, roots.Contains(ws))
	assert.True(t, roots.Contains(ws+"/a.txt"))
	assert.False(t, roots.Contains(base+"/ws-evil/x"))
	assert.False(t, roots.Contains(base+"/ws-evil"))
	assert.False(t, roots.Contains(base))
	assert.False(t, roots.Contains("/"))
	all, err := NewRoots("/")
	require.NoError(t, err)
	assert.True(t, all.Contains("/etc/passwd"))
	_, err = NewRoots("relative")
	assert.Error(t, err)
}

// FuzzCanonPath: whatever the input, CanonPath does not panic, and a path
// it places inside the workspace is inside it as the kernel sees it: the
// kernel's own resolution (an O_PATH open, read back through
// /proc/self/fd) of the path, or of its deepest existing ancestor, lands
// in the workspace.
func FuzzCanonPath(f *testing.F) {
	for _, s := range []string{"a.txt", "out/key", "in/b.txt", "../ws-evil/x", "dangling", "loop", "%2e%2e/secret",
		"sub/../../secret/key", "abs", "./in/../out", "~/key", "file:///etc/passwd", "a\x00b", "..%252f..", "in/../../ws/a.txt"} {
		f.Add(s)
	}
	base, ws := tree(f)
	roots, err := NewRoots(ws)
	require.NoError(f, err)
	o := PathOptions{Base: ws, Home: filepath.Join(base, "secret")}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := CanonPath(in, o)
		if err != nil {
			return
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got {
			t.Fatalf("CanonPath(%q) = %q: not clean and absolute", in, got)
		}
		if !roots.Contains(got) {
			return
		}
		// What the kernel reaches for the raw input (as a server would
		// open it: relative to ws, "~" expanded, file:// unwrapped).
		raw := in
		if strings.HasPrefix(raw, "file://") {
			raw = got // the URI form was unwrapped; judge the unwrapped path
		}
		if raw == "~" || strings.HasPrefix(raw, "~/") {
			raw = o.Home + raw[1:]
		}
		if !filepath.IsAbs(raw) {
			raw = filepath.Join(ws, raw)
		}
		if real, ok := kernelPath(raw); ok && !roots.Contains(real) {
			t.Fatalf("CanonPath(%q) = %q is inside the root, but the kernel reaches %q", in, got, real)
		}
	})
}

// kernelPath asks the kernel where p (or, when p does not exist, its
// deepest existing ancestor with the missing rest appended) leads.
func kernelPath(p string) (string, bool) {
	rest := ""
	for {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err == nil {
			real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
			unix.Close(fd)
			if err != nil {
				return "", false
			}
			return filepath.Join(real, rest), true
		}
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENAMETOOLONG) || errors.Is(err, syscall.EINVAL) {
			return "", false
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", false
		}
		if errors.Is(err, syscall.ENOENT) {
			// A dangling symlink as the last component: the kernel
			// would create its target, so follow the link by hand.
			if target, lerr := os.Readlink(p); lerr == nil {
				if !filepath.IsAbs(target) {
					target = filepath.Join(parent, target)
				}
				p = filepath.Join(target, rest)
				rest = ""
				continue
			}
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}
