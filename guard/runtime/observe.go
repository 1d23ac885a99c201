package runtime

import (
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// ErrNoObserver is wrapped when files cannot be observed here (fanotify
// needs CAP_SYS_ADMIN).
var ErrNoObserver = errors.New("cannot observe the server's file accesses")

// Access is one file a server opened, as an observer saw it.
type Access struct {
	Path string
	Exec bool // opened for execution
}

// Learned is what learn mode proposes and reports.
type Learned struct {
	// Read and Exec are proposed for the policy's runtime section: code
	// the server loaded, and programs it ran, that neither the baseline
	// nor the resolver grants.
	Read, Exec []string
	// Data lists other files the server opened: reported for the
	// operator, never granted (data grants admit tool arguments).
	Data []string
}

// Learn sorts observed accesses into runtime proposals and data reports.
// granted says whether a path is already granted (the backends' baseline
// and the resolver's runtime).
func Learn(seen []Access, granted func(string) bool) Learned {
	var l Learned
	for _, a := range seen {
		if granted(a.Path) {
			continue
		}
		switch {
		case a.Exec:
			l.Exec = appendNew(l.Exec, a.Path)
		case IsCode(a.Path):
			l.Read = appendNew(l.Read, CodeRoot(a.Path))
		default:
			l.Data = appendNew(l.Data, a.Path)
		}
	}
	slices.Sort(l.Read)
	l.Read = compactTrees(l.Read)
	return l
}

func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

var codeExt = regexp.MustCompile(`\.(js|mjs|cjs|node|py|pyc|so|pth|wasm)$|/package\.json$|/pyvenv\.cfg$`)

// IsCode reports whether a path is code an interpreter loads (a file
// under node_modules or site-packages, a module, a shared library), as
// opposed to data.
func IsCode(p string) bool {
	return strings.Contains(p, "/node_modules/") || strings.Contains(p, "/site-packages/") ||
		strings.Contains(p, "/lib/python") || codeExt.MatchString(p)
}

// CodeRoot is the tree to grant for a code file: its package (the
// directory below node_modules or site-packages, with its scope) or its
// directory.
func CodeRoot(p string) string {
	for _, marker := range []string{"/node_modules/", "/site-packages/"} {
		if i := strings.LastIndex(p, marker); i >= 0 {
			rest := strings.SplitN(p[i+len(marker):], "/", 3)
			n := 1
			if strings.HasPrefix(rest[0], "@") && len(rest) > 1 {
				n = 2
			}
			return p[:i+len(marker)] + strings.Join(rest[:min(n, len(rest))], "/")
		}
	}
	return filepath.Dir(p)
}
