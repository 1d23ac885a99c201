package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzStrictResolve holds the filesystem server's confinement invariant:
// whatever the argument, a path Resolve accepts is the root or below it,
// after every symlink is resolved.
func FuzzStrictResolve(f *testing.F) {
	for _, s := range []string{"a.txt", "../secret", "link/x", "/etc/passwd", "sub/../../secret", "./sub//x", "inner/../link", "\x00", ""} {
		f.Add(s)
	}
	root, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	ws := filepath.Join(root, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "secret"), []byte("x"), 0o600); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "secret"), filepath.Join(ws, "link")); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(ws, "sub"), filepath.Join(ws, "inner")); err != nil {
		f.Fatal(err)
	}
	fsys, err := NewFS([]string{ws})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := fsys.Resolve(p)
		if err != nil {
			return
		}
		if got != ws && !strings.HasPrefix(got, ws+"/") {
			t.Fatalf("Resolve(%q) = %q, outside %s", p, got, ws)
		}
		if real, err := filepath.EvalSymlinks(got); err == nil && real != ws && !strings.HasPrefix(real, ws+"/") {
			t.Fatalf("Resolve(%q) = %q, which resolves to %q outside %s", p, got, real, ws)
		}
	})
}
