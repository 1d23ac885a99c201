package validate

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

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
		if IsFileURI(raw) {
			raw = got
		}
		if raw == "~" || strings.HasPrefix(raw, "~/") {
			raw = o.Home + "/" + raw[1:]
		}
		if !filepath.IsAbs(raw) {
			// Not filepath.Join: that would clean "link/.." lexically,
			// which is the very mistake under test.
			raw = ws + "/" + raw
		}
		if real, ok := kernelPath(raw); ok && !roots.Contains(real) {
			t.Fatalf("CanonPath(%q) = %q is inside the root, but the kernel reaches %q", in, got, real)
		}
	})
}

// kernelPath asks the kernel where p leads: the longest prefix of p's
// components (taken as written, not cleaned) that the kernel opens, read
// back through /proc/self/fd, with the missing rest appended lexically (a
// server that creates those directories gets there). A dangling symlink is
// followed by hand: the kernel would create its target.
func kernelPath(p string) (string, bool) {
	return kernelPathDepth(p, 0)
}

func kernelPathDepth(p string, depth int) (string, bool) {
	if depth > 40 {
		return "", false
	}
	comps := strings.Split(p, "/")
	for n := len(comps); n >= 1; n-- {
		prefix := strings.Join(comps[:n], "/")
		if prefix == "" {
			prefix = "/"
		}
		rest := strings.Join(comps[n:], "/")
		fd, err := unix.Open(prefix, unix.O_PATH|unix.O_CLOEXEC, 0)
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
		if errors.Is(err, syscall.ENOENT) {
			if target, lerr := os.Readlink(prefix); lerr == nil {
				if !filepath.IsAbs(target) {
					target = strings.Join(comps[:n-1], "/") + "/" + target
				}
				return kernelPathDepth(target+"/"+rest, depth+1)
			}
		}
	}
	return "", false
}
