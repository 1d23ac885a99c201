package launch

import (
	"os"
	"path/filepath"
)

// NewSpec is the spec for a server under a proxy with the given effective
// uid (os.Geteuid()): as root, namespaces and the user ServerUser names;
// otherwise the proxy's own user, unchanged. writeRoots are the backend's
// write grants: the only writable mounts of the server's namespace, and
// searched for entries to protect (Protect); noNetwork gives the server a
// network namespace of its own.
func NewSpec(euid int, getenv func(string) string, writeRoots []string, noNetwork bool) (Spec, error) {
	if euid != 0 {
		return Spec{}, nil
	}
	uid, gid, err := ServerUser(getenv)
	if err != nil {
		return Spec{}, err
	}
	sp := Spec{UID: uid, GID: gid, Namespaces: true, NoNetwork: noNetwork, Writable: writeRoots}
	sp.Pin, sp.ReadOnly = Protect(writeRoots)
	return sp, nil
}

// protectedFiles are the start-up files other programs run or obey, kept
// read-only where a write root holds them.
var protectedFiles = []string{
	".envrc", ".bashrc", ".bash_profile", ".bash_login", ".bash_logout",
	".profile", ".zshrc", ".zprofile", ".zshenv", ".zlogin", ".gitconfig",
	".ssh/authorized_keys", ".git/config", ".git/hooks",
}

// pinnedDirs may be written inside, but not renamed, removed or replaced:
// a repository's .git, whose hooks and config the user's next git command
// obeys.
var pinnedDirs = []string{".git"}

// Protect returns, for the entries of each write root that exist now, the
// directories to pin (bound onto themselves: a mount point cannot be
// renamed, removed or renamed over) and the files and directories to make
// read-only. The binds hold the inodes, not the names: renaming a parent
// carries the protection along. Entries created later are not covered
// here (the BPF backend also protects them by name).
func Protect(writeRoots []string) (pin, ro []string) {
	for _, root := range writeRoots {
		for _, d := range pinnedDirs {
			p := filepath.Join(root, d)
			if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
				pin = append(pin, p)
			}
		}
		for _, f := range protectedFiles {
			p := filepath.Join(root, f)
			// Lstat: a symlink is not followed; binding onto it would
			// protect whatever it points at instead.
			if fi, err := os.Lstat(p); err == nil && (fi.Mode().IsRegular() || fi.IsDir()) {
				ro = append(ro, p)
			}
		}
	}
	return pin, ro
}

// MaxWalk bounds how many entries HardLinks looks at under all roots
// together; past it the walk stops and says so.
const MaxWalk = 200000
