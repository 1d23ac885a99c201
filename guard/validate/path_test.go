package validate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		{in: "~", want: base + "/secret"},
		{in: "~root/.ssh/id_rsa", err: ErrHome},
		{in: "~" + "nobody", err: ErrHome},
		{in: "file://" + ws + "/a.txt", want: ws + "/a.txt"},
		{in: "FILE://" + ws + "/a.txt", want: ws + "/a.txt"},
		{in: "File://localhost" + ws + "/a.txt", want: ws + "/a.txt"},
		{in: "file:" + ws + "/out/key", want: base + "/secret/key"},
		{in: "file://LOCALHOST" + ws + "/a.txt", want: ws + "/a.txt"},
		{in: "file://" + ws + "/%2e%2e/secret/key", want: base + "/secret/key"},
		{in: "file://" + ws + "/a%2etxt", want: ws + "/a.txt"},
		{in: "file://evil.example" + ws + "/a.txt", err: ErrFileURI},
		{in: "file:a.txt", err: ErrFileURI},
		{in: "file://" + ws + "/%252e%252e/secret", err: ErrEncodedTraversal},
		// ".." after a symlink is the parent of the link's target, as the
		// kernel takes it, not a lexical step back.
		{in: ws + "/out/../secret/key", want: base + "/secret/key"},
		{in: "in/../a.txt", want: ws + "/a.txt"},
		{in: "out/../ws/a.txt", want: ws + "/a.txt"},
		{in: "abs/../../" + filepath.Base(base) + "/secret/key", want: base + "/secret/key"},
		{in: "/proc/self/cwd/x", err: ErrUnresolvable},
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

func TestCanonPathNoHome(t *testing.T) {
	_, ws := tree(t)
	for _, in := range []string{"~", "~/a.txt", "~root", "~root/x"} {
		_, err := CanonPath(in, PathOptions{Base: ws})
		assert.ErrorIs(t, err, ErrHome, "input %q", in)
	}
}

func TestFileURIPath(t *testing.T) {
	for in, want := range map[string]string{
		"file:///etc/passwd":          "/etc/passwd",
		"FILE:///etc/passwd":          "/etc/passwd",
		"file:/etc/passwd":            "/etc/passwd",
		"file://localhost/etc/passwd": "/etc/passwd",
		"fIlE:///a%20b":               "/a b",
	} {
		got, err := FileURIPath(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{"file://host/x", "file:x", "http://x/", "file://"} {
		_, err := FileURIPath(in)
		assert.Error(t, err, in)
	}
}
