// Package pathrules holds the lexical rules of file paths on the systems
// mcpguard runs on: which paths are absolute, how one is cleaned, when one
// lies within a root, and which forms the guard must refuse because the
// system would read them differently from how they look (Windows device
// names, alternate data streams, the \\?\ and \\.\ namespaces, trailing
// dots and spaces; case-insensitive volumes on macOS and Windows).
//
// The rules are a parameter (Flavour), not a build tag, so that the tables
// for every system run in one `go test` on Linux. Host is the flavour of the
// system the binary was built for. Nothing here touches the filesystem:
// symbolic links are the caller's business (package validate resolves them).
package pathrules

import (
	"errors"
	"fmt"
	"strings"
)

// Flavour is a family of path rules.
type Flavour int

const (
	// POSIX is Linux: "/" separates, names are bytes, case matters.
	POSIX Flavour = iota
	// Darwin is macOS: POSIX paths on a volume that by default (APFS and
	// HFS+ as shipped) ignores case.
	Darwin
	// Windows is Win32 paths: drive letters, "\" and "/" both separate,
	// UNC shares, device names, case ignored.
	Windows
)

func (f Flavour) String() string {
	switch f {
	case POSIX:
		return "posix"
	case Darwin:
		return "darwin"
	case Windows:
		return "windows"
	}
	return fmt.Sprintf("Flavour(%d)", int(f))
}

// Errors for paths the guard refuses to judge. Each names a form whose
// meaning differs from its look, so admitting it by its look is unsafe.
var (
	ErrNUL = errors.New("path contains a NUL byte")
	// ErrDevice is a Windows device name (CON, NUL, COM1, ...), in any
	// directory and with any extension, or a path in the \\.\ device
	// namespace: it opens a device, not a file below the directory.
	ErrDevice = errors.New("path names a device")
	// ErrStream is a colon after the drive: an NTFS alternate data stream
	// ("a.txt:secret", "a.txt::$DATA") or a drive letter in the middle.
	ErrStream = errors.New("path names an alternate data stream")
	// ErrNamespace is an NT object path ("\??\", "\\?\GLOBALROOT") or a
	// \\?\ path whose literal components ("..", a trailing dot) the usual
	// rules would rewrite: it would name another file than it seems to.
	ErrNamespace = errors.New("path uses a namespace prefix the guard does not admit")
	// ErrDriveRelative is "C:x" (relative to drive C's current directory,
	// which the guard cannot know) or "\x" with no drive to put it on.
	ErrDriveRelative = errors.New("path is relative to a drive's current directory")
	// ErrRelative is a relative path where an absolute one is needed.
	ErrRelative = errors.New("path is not absolute")
)

// FoldsCase reports whether the flavour's default volumes ignore case, so
// that "/ws/.ENV" is the file a rule about "/ws/.env" means.
func (f Flavour) FoldsCase() bool { return f != POSIX }

// Sep is the flavour's canonical separator.
func (f Flavour) Sep() byte {
	if f == Windows {
		return '\\'
	}
	return '/'
}

func (f Flavour) isSep(c byte) bool { return c == '/' || f == Windows && c == '\\' }

// IsAbs reports whether p names the same file whatever the current
// directory and drive: "/x" on POSIX and macOS; "C:\x", "\\server\share\x"
// or "\\?\C:\x" on Windows (where "\x" and "C:x" are not absolute).
func (f Flavour) IsAbs(p string) bool {
	if f != Windows {
		return strings.HasPrefix(p, "/")
	}
	vol, rest := f.splitVolume(p)
	return vol != "" && (strings.HasPrefix(vol, `\\`) || rest != "" && f.isSep(rest[0]))
}

// splitVolume splits a Windows path into its volume ("C:", "\\server\share",
// "\\?\C:", "\\.\X" ...) and the rest, as written.
func (f Flavour) splitVolume(p string) (vol, rest string) {
	if len(p) >= 2 && p[1] == ':' && isLetter(p[0]) {
		return p[:2], p[2:]
	}
	if len(p) < 2 || !f.isSep(p[0]) || !f.isSep(p[1]) {
		return "", p
	}
	// \\server\share\rest, \\?\..., \\.\...: the volume is the first two
	// components; without both, p names no volume.
	i := 2
	for range 2 {
		j := i
		for j < len(p) && !f.isSep(p[j]) {
			j++
		}
		if j == i {
			return "", p
		}
		i = j + 1
	}
	i--
	return p[:i], p[i:]
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// Clean returns the absolute path p in the flavour's canonical lexical
// form, or an error for a form the guard refuses. On POSIX and macOS it is
// path.Clean of an absolute path. On Windows it is what Win32 makes of the
// path before the filesystem sees it: "/" becomes "\", runs of separators
// collapse, "." and ".." are taken lexically (Win32 does so, symlinks or
// not), ".." stops at the volume root, trailing dots and spaces of each
// component are dropped, and the drive letter is upper-cased; a \\?\ path
// is unwrapped to the same form when that changes nothing, and refused
// otherwise.
func (f Flavour) Clean(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", ErrNUL
	}
	if f != Windows {
		if !f.IsAbs(p) {
			return "", fmt.Errorf("%w: %q", ErrRelative, p)
		}
		return cleanSlash(p), nil
	}
	return cleanWindows(p)
}

// cleanSlash is path.Clean for an absolute "/" path, written out so that
// the package has one notion of components.
func cleanSlash(p string) string {
	var out []string
	for c := range strings.SplitSeq(p, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, c)
		}
	}
	return "/" + strings.Join(out, "/")
}

func cleanWindows(p string) (string, error) {
	f := Windows
	if strings.HasPrefix(p, `\??\`) || strings.HasPrefix(p, `/??/`) {
		return "", fmt.Errorf("%w: NT object path %q", ErrNamespace, p)
	}
	vol, rest := f.splitVolume(p)
	if vol == "" {
		if rest != "" && f.isSep(rest[0]) {
			return "", fmt.Errorf("%w: %q has no drive", ErrDriveRelative, p)
		}
		return "", fmt.Errorf("%w: %q", ErrRelative, p)
	}
	if len(vol) == 2 && (rest == "" || !f.isSep(rest[0])) {
		return "", fmt.Errorf("%w: %q", ErrDriveRelative, p)
	}
	if len(vol) >= 4 && f.isSep(vol[0]) && f.isSep(vol[1]) && (vol[2] == '?' || vol[2] == '.') && f.isSep(vol[3]) {
		if vol[2] == '.' {
			return "", fmt.Errorf("%w: %q is in the \\\\.\\ device namespace", ErrDevice, p)
		}
		return unwrapLiteral(p)
	}
	comps := strings.FieldsFunc(rest, func(r rune) bool { return r == '\\' || r == '/' })
	last := len(comps) - 1
	if rest != "" && f.isSep(rest[len(rest)-1]) {
		last = -1 // ends in a separator: no final segment to trim
	}
	var out []string
	for i, c := range comps {
		switch {
		case c == ".":
			continue
		case c == "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			continue
		case strings.Trim(c, ". ") == "":
			// "...", ". ": a valid name in some positions, trimmed
			// to nothing in others; refused rather than guessed.
			return "", fmt.Errorf("%w: component %q of %q", ErrNamespace, c, p)
		case i == last:
			// The final segment loses all trailing dots and spaces.
			c = strings.TrimRight(c, ". ")
		case strings.HasSuffix(c, ".") && !strings.HasSuffix(c, ".."):
			// Any other segment loses one trailing period.
			c = c[:len(c)-1]
		}
		if err := checkComponent(c); err != nil {
			return "", fmt.Errorf("%w: %q", err, p)
		}
		out = append(out, c)
	}
	if n := len(out); n > 0 && strings.TrimRight(out[n-1], ". ") != out[n-1] {
		// "C:\a \" names the directory "a " (a trailing separator keeps
		// the spaces), but no cleaned form without that separator can say
		// so: "C:\a " cleans to "C:\a". Refused rather than guessed.
		return "", fmt.Errorf("%w: final component %q of %q keeps trailing dots or spaces", ErrNamespace, out[n-1], p)
	}
	if len(vol) == 2 {
		vol = strings.ToUpper(vol[:1]) + ":"
	} else {
		vol = strings.ReplaceAll(vol, "/", `\`)
		if err := checkComponent(vol[2:]); err != nil && !errors.Is(err, ErrStream) {
			return "", fmt.Errorf("%w: %q", err, p)
		}
	}
	return vol + `\` + strings.Join(out, `\`), nil
}

// unwrapLiteral handles \\?\ paths, which Win32 passes on without any of
// Clean's rewriting: \\?\C:\x is C:\x and \\?\UNC\srv\share\x is
// \\srv\share\x when no component is one Clean would change; otherwise the
// literal name ("a." or "..") differs from the cleaned one, and the path is
// refused rather than guessed at.
func unwrapLiteral(p string) (string, error) {
	body := strings.ReplaceAll(p[4:], "/", `\`)
	var inner string
	switch {
	case len(body) >= 2 && isLetter(body[0]) && body[1] == ':':
		inner = body
	case len(body) >= 4 && strings.EqualFold(body[:4], `UNC\`):
		inner = `\\` + body[4:]
	default:
		return "", fmt.Errorf("%w: %q names no drive or share", ErrNamespace, p)
	}
	c, err := cleanWindows(inner)
	if err != nil {
		return "", err
	}
	if !strings.EqualFold(strings.TrimRight(inner, `\`), c) && !strings.EqualFold(inner, c) {
		return "", fmt.Errorf("%w: %q is literal and would not name %q", ErrNamespace, p, c)
	}
	return c, nil
}

// reserved reports whether name (upper case) is one Win32 maps to a
// device in every directory. The superscript digits count too (COM¹ is a
// serial port).
func reserved(name string) bool {
	switch name {
	case "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", "COM¹", "COM²", "COM³", "LPT¹", "LPT²", "LPT³":
		return true
	}
	return len(name) == 4 && (name[:3] == "COM" || name[:3] == "LPT") && '0' <= name[3] && name[3] <= '9'
}

// checkComponent refuses a device name (with any extension: "nul.txt" is
// NUL on most Windows versions) and a colon (a stream).
func checkComponent(c string) error {
	if strings.IndexByte(c, ':') >= 0 {
		return ErrStream
	}
	base, _, _ := strings.Cut(c, ".")
	if reserved(strings.ToUpper(strings.TrimRight(base, " "))) {
		return ErrDevice
	}
	return nil
}

// Join resolves p against the absolute directory base the way the system
// would for a process whose current directory is base, and cleans it. An
// absolute p ignores base. On Windows "\x" goes to the root of base's
// volume, and "C:x" is refused (ErrDriveRelative): it depends on a
// per-drive current directory nobody told the guard.
func (f Flavour) Join(base, p string) (string, error) {
	if f.IsAbs(p) {
		return f.Clean(p)
	}
	b, err := f.Clean(base)
	if err != nil {
		return "", fmt.Errorf("base: %w", err)
	}
	if f == Windows {
		vol, rest := f.splitVolume(p)
		switch {
		case vol != "":
			return "", fmt.Errorf("%w: %q", ErrDriveRelative, p)
		case rest != "" && f.isSep(rest[0]):
			bv, _ := f.splitVolume(b)
			return f.Clean(bv + p)
		}
	}
	return f.Clean(b + string(f.Sep()) + p)
}

// Fold maps p to the form in which two names of one file compare equal on
// the flavour's default volumes: p itself on POSIX, upper case on Windows
// (NTFS compares by a per-character upcase table), lower case on macOS.
// It does not fold Unicode normalisation (APFS does: an NFD and an NFC
// spelling of "é" are one file there): such names compare unequal, which
// refuses a path an allow rule meant, never admits one it did not.
func (f Flavour) Fold(p string) string {
	switch f {
	case Windows:
		return strings.ToUpper(p)
	case Darwin:
		return strings.ToLower(p)
	}
	return p
}

// Equal reports whether the clean paths a and b name the same file by the
// flavour's rules.
func (f Flavour) Equal(a, b string) bool {
	if f == POSIX {
		return a == b
	}
	return f.Fold(a) == f.Fold(b)
}

// Within reports whether the clean absolute path p is root or below it,
// with directory-prefix semantics ("/ws" holds "/ws/a", not "/ws-evil") and
// the flavour's case rules. Paths that are not absolute are within nothing.
func (f Flavour) Within(p, root string) bool {
	if !f.IsAbs(p) || !f.IsAbs(root) {
		return false
	}
	p, root = f.Fold(p), f.Fold(root)
	root = strings.TrimRight(root, string(f.Sep()))
	if f == Windows {
		if vol, rest := f.splitVolume(root); rest == "" && len(vol) == 2 {
			// "C:\" trimmed to "C:": the drive's root holds all of C:.
			return strings.HasPrefix(p, root+`\`) || p == root
		}
	}
	if root == "" {
		return true // "/"
	}
	return p == root || len(p) > len(root) && p[len(root)] == f.Sep() && p[:len(root)] == root
}

// Check refuses, before any other reading of p, the forms whose meaning
// differs from their look on this flavour: a NUL anywhere; on Windows also
// device names, streams, namespace prefixes and drive-relative paths
// ("C:x", and "\\x", which callers that join relative paths to a base
// would misplace), in an absolute or a relative p. It accepts everything else, relative or not.
func (f Flavour) Check(p string) error {
	if f != Windows {
		if strings.IndexByte(p, 0) >= 0 {
			return ErrNUL
		}
		return nil
	}
	var err error
	if vol, rest := f.splitVolume(p); vol == "" && rest != "" && f.isSep(rest[0]) {
		// "\x" is the root of the server's current drive, which joining
		// it to a base directory would hide.
		return fmt.Errorf("%w: %q has no drive", ErrDriveRelative, p)
	}
	if f.IsAbs(p) {
		_, err = f.Clean(p)
	} else {
		// Any absolute base will do: only p's own components can fail.
		_, err = f.Join(`C:\`, p)
	}
	return err
}
