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
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard/pathrules"
)

// Path errors; the L1/L2 engine maps each to a rule id.
var (
	ErrNUL               = errors.New("path contains a NUL byte")
	ErrEncodedTraversal  = errors.New("path contains percent-encoded traversal")
	ErrRelative          = errors.New("relative path with no base directory")
	ErrEmptyPath         = errors.New("empty path")
	ErrTooManyLinks      = errors.New("too many levels of symbolic links")
	ErrUnresolvable      = errors.New("path cannot be resolved")
	errNotLocalFileURI   = errors.New("file URI names a remote host")
	maxSymlinks          = 40
	percentDecodeRounds  = 3
	fileURIPrefix        = "file://"
	encodedTraversalHint = "%"
)

// PathOptions says how to read a path argument before resolving it.
type PathOptions struct {
	// Base is the directory a relative path is resolved against (the
	// server's working directory). Empty: relative paths are refused.
	Base string
	// Home expands a leading "~" or "~/", as many servers do. Empty: such
	// a path is treated as relative (and refused without Base).
	Home string
}

// CanonPath turns a path argument into the absolute, symlink-free path the
// kernel would reach: an empty path is the base directory, NUL bytes and percent-encoded traversal are refused,
// "file://" URIs and "~" are unwrapped, a relative path is joined to the
// base, the result is cleaned, and symbolic links are resolved against the
// real filesystem over the longest prefix that exists (a dangling link is
// followed to where it points, so creating a file through it is caught).
// Components after the first missing one are taken lexically: nothing is
// there yet to redirect them.
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
	if strings.Contains(p, encodedTraversalHint) && encodedTraversal(p) {
		return "", ErrEncodedTraversal
	}
	if strings.HasPrefix(p, fileURIPrefix) {
		u, err := url.Parse(p)
		if err != nil {
			return "", fmt.Errorf("file uri: %w", err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return "", errNotLocalFileURI
		}
		p = u.Path
		if p == "" {
			return "", ErrEmptyPath
		}
		if strings.IndexByte(p, 0) >= 0 {
			return "", ErrNUL
		}
	}
	if o.Home != "" && (p == "~" || strings.HasPrefix(p, "~/")) {
		p = o.Home + p[1:]
	}
	if err := pathrules.Host.Check(p); err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		if o.Base == "" {
			return "", ErrRelative
		}
		p = filepath.Join(o.Base, p)
	}
	return resolve(filepath.Clean(p))
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

// resolve follows symbolic links in the clean absolute path p the way the
// kernel does; see CanonPath. When p exists the kernel itself resolves it
// (three system calls however deep p is); otherwise, or without /proc, it
// walks p component by component.
func resolve(p string) (string, error) {
	if pathrules.Host == pathrules.Windows {
		return pathrules.ResolveWindows(p, pathrules.OSFS{})
	}
	if r, ok := kernelResolve(p); ok {
		return r, nil
	}
	return walk(p)
}

// kernelResolve opens p with O_PATH (no read access needed, nothing is
// read, FIFOs do not block) and asks /proc where the descriptor points.
func kernelResolve(p string) (string, bool) {
	// Most paths hold no symlink at all: then p (clean and absolute) is
	// already canonical, and one openat2 that refuses to follow any link
	// proves it without the read-back.
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS}
	if fd, err := unix.Openat2(unix.AT_FDCWD, p, &how); err == nil {
		unix.Close(fd)
		return p, true
	}
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false
	}
	defer unix.Close(fd)
	var buf [unix.PathMax]byte
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf[:])
	if err != nil || n == 0 || n >= len(buf) || buf[0] != '/' {
		return "", false
	}
	r := string(buf[:n])
	if strings.HasSuffix(r, " (deleted)") {
		return "", false
	}
	return r, true
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
