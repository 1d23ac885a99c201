// Package validate is layer L2: checks on the content of tool-call arguments
// (path canonicalisation, URL destinations, command injection, environment
// exfiltration, secrets) and on what servers send back (prompt injection,
// hidden Unicode, secrets in responses, poisoned or changed tool
// descriptions). The functions here are pure apart from the filesystem and
// resolver look-ups they are given; the middleware lives in response.go.
package validate

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/mcpguard/mcpguard/guard/pathrules"
)

// Path errors; the L1/L2 engine maps each to a rule id.
var (
	ErrNUL              = errors.New("path contains a NUL byte")
	ErrEncodedTraversal = errors.New("path contains percent-encoded traversal")
	ErrRelative         = errors.New("relative path with no base directory")
	ErrEmptyPath        = errors.New("empty path")
	ErrTooManyLinks     = errors.New("too many levels of symbolic links")
	ErrUnresolvable     = errors.New("path cannot be resolved")
	// ErrHome is a "~" path with no home configured, or a "~user" path:
	// the server would expand it to a directory the guard cannot know.
	ErrHome = errors.New("path starts with ~ and no home is configured (~user is never admitted)")
	// ErrFileURI is a file: URI that names a remote host or cannot be read.
	ErrFileURI = errors.New("file URI is malformed or names a remote host")
)

const (
	maxSymlinks          = 40
	percentDecodeRounds  = 3
	encodedTraversalHint = "%"
)

// PathOptions says how to read a path argument before resolving it.
type PathOptions struct {
	// Base is the directory a relative path is resolved against (the
	// server's working directory). Empty: relative paths are refused.
	Base string
	// Home expands a leading "~" or "~/", as many servers do. Empty: such
	// a path is refused (ErrHome), as is "~user" always.
	Home string
}

// CanonPath turns a path argument into the absolute, symlink-free path the
// kernel would reach: an empty path is the base directory, NUL bytes and
// percent-encoded traversal are refused, "file:" URIs (any case, any of
// the forms file:/x, file:///x, file://localhost/x, percent-encoded) are
// unwrapped, "~" and "~/" expand to Home (refused without one; "~user" is
// always refused), a relative path is joined to the base, and the result is
// resolved the way the kernel resolves it: component by component from the
// root, a ".." taking the parent of where the symlinks so far led, not a
// lexical step back (filepath.Clean before resolving would turn
// "link/.." into "." while the kernel goes to the link target's parent).
// A dangling link is followed to where it points, so creating a file
// through it is caught. Components after the first missing one are taken
// lexically: nothing is there yet to redirect them.
func CanonPath(p string, o PathOptions) (string, error) {
	if p == "" {
		// Servers read an empty path as their working directory.
		if o.Base == "" {
			return "", ErrEmptyPath
		}
		p = "."
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", ErrNUL
	}
	if IsFileURI(p) {
		up, err := FileURIPath(p)
		if err != nil {
			return "", err
		}
		p = up
	} else if strings.Contains(p, encodedTraversalHint) && encodedTraversal(p) {
		return "", ErrEncodedTraversal
	}
	if strings.HasPrefix(p, "~") {
		if o.Home == "" || !(p == "~" || strings.HasPrefix(p, "~/")) {
			return "", ErrHome
		}
		p = o.Home + "/" + p[1:]
	}
	if err := pathrules.Host.Check(p); err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		if o.Base == "" {
			return "", ErrRelative
		}
		p = o.Base + "/" + p
	}
	return resolve(p)
}

// IsFileURI reports whether s starts with the scheme "file:" in any case.
func IsFileURI(s string) bool {
	return len(s) >= 5 && strings.EqualFold(s[:5], "file:")
}

// FileURIPath unwraps a file: URI to the local path it names, the way
// servers' URI libraries do (Node's fileURLToPath, Python's urllib): the
// scheme in any case; "file:/x", "file:///x" and "file://localhost/x";
// the path percent-decoded. A remote host, an opaque form ("file:x"), an
// empty path or a NUL in the decoded path is an error.
func FileURIPath(s string) (string, error) {
	if !IsFileURI(s) {
		return "", fmt.Errorf("%w: %q has no file: scheme", ErrFileURI, s)
	}
	u, err := url.Parse("file:" + s[5:])
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrFileURI, err)
	}
	if u.Opaque != "" {
		return "", fmt.Errorf("%w: %q is not absolute", ErrFileURI, s)
	}
	if h := strings.ToLower(u.Host); h != "" && h != "localhost" {
		return "", fmt.Errorf("%w: host %q", ErrFileURI, u.Host)
	}
	if u.Path == "" {
		return "", ErrEmptyPath
	}
	if strings.IndexByte(u.Path, 0) >= 0 {
		return "", ErrNUL
	}
	if strings.Contains(u.Path, encodedTraversalHint) && encodedTraversal(u.Path) {
		// Decoded once by the URI parser; a second encoding layer is
		// traversal a server that decodes again would take.
		return "", ErrEncodedTraversal
	}
	return u.Path, nil
}

// encodedTraversal reports whether percent-decoding p (up to a few rounds,
// to catch %252e) reveals a "..", a separator or a NUL that the raw string
// did not show: a server that decodes its input would walk somewhere else
// than the guard checked.
func encodedTraversal(p string) bool {
	cur := p
	for range percentDecodeRounds {
		dec, err := url.PathUnescape(cur)
		if err != nil || dec == cur {
			return false
		}
		if strings.IndexByte(dec, 0) >= 0 || hasDotDot(dec) ||
			strings.Count(dec, "/") != strings.Count(p, "/") || strings.Contains(dec, `\`) {
			return true
		}
		cur = dec
	}
	return false
}

// hasDotDot reports whether p has a ".." segment.
func hasDotDot(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

// resolve follows symbolic links in the absolute path p (not cleaned:
// ".." is taken after the links before it) the way the kernel does; see
// CanonPath. Where the kernel can be asked (Linux), it resolves p itself
// when p exists; otherwise resolve walks p component by component.
func resolve(p string) (string, error) {
	if pathrules.Host == pathrules.Windows {
		return pathrules.ResolveWindows(p, pathrules.OSFS{})
	}
	if r, ok := kernelResolve(p); ok {
		return r, nil
	}
	return walk(p)
}

// walk is resolve done by hand, component by component.
func walk(p string) (string, error) {
	resolved := "/"
	rest := p
	links := 0
	for rest != "" {
		var comp string
		comp, rest, _ = strings.Cut(rest, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, comp)
		fi, err := os.Lstat(next)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				// Nothing below here exists: the rest cannot redirect.
				return filepath.Join(next, rest), nil
			}
			return "", fmt.Errorf("%w: %w", ErrUnresolvable, err)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if Within(next, "/proc") {
			// A /proc link resolves for whoever looks (the guard's cwd is
			// not the server's): no answer here is the server's.
			return "", fmt.Errorf("%w: %s is a /proc link", ErrUnresolvable, next)
		}
		links++
		if links > maxSymlinks {
			return "", ErrTooManyLinks
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrUnresolvable, err)
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		if rest == "" {
			rest = target
		} else {
			rest = target + "/" + rest
		}
	}
	return resolved, nil
}

// Roots is a set of canonical directory roots. A root admits itself and
// what is below it, with real directory-prefix semantics: "/ws" admits
// "/ws" and "/ws/a" but not "/ws-evil".
type Roots []string

// NewRoots canonicalises each root (so a root given through a symlink, such
// as /tmp on some systems, matches the resolved paths it is compared with).
func NewRoots(roots ...string) (Roots, error) {
	out := make(Roots, 0, len(roots))
	for _, r := range roots {
		if r == "" {
			continue
		}
		if !filepath.IsAbs(r) {
			return nil, fmt.Errorf("root %q is not absolute", r)
		}
		c, err := resolve(filepath.Clean(r))
		if err != nil {
			return nil, fmt.Errorf("root %q: %w", r, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// Contains reports whether the canonical path p is at or below a root.
func (rs Roots) Contains(p string) bool {
	for _, r := range rs {
		if Within(p, r) {
			return true
		}
	}
	return false
}

// Within reports whether the clean absolute path p is root or below it,
// by the running system's rules (case ignored on macOS and Windows).
func Within(p, root string) bool {
	return pathrules.Host.Within(p, root)
}
