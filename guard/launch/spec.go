package launch

import (
	"fmt"
	"io/fs"
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
	var complete bool
	sp.Pin, sp.ReadOnly, complete = Protect(writeRoots)
	sp.ProtectIncomplete = !complete
	return sp, nil
}

// protectedNames are the start-up files other programs run or obey (direnv
// runs the .envrc of any directory the user enters; shells, git and ssh
// read the others from a home), kept read-only wherever a write root holds
// them, at any depth.
var protectedNames = map[string]bool{
	".envrc": true, ".bashrc": true, ".bash_profile": true, ".bash_login": true, ".bash_logout": true,
	".profile": true, ".zshrc": true, ".zprofile": true, ".zshenv": true, ".zlogin": true, ".gitconfig": true,
}

// gitProtected are the entries of a git directory that the user's next
// git command runs or obeys (hooks; core.hooksPath, core.fsmonitor and
// aliases in config and, with extensions.worktreeConfig, config.worktree),
// kept read-only.
var gitProtected = []string{"config", "config.worktree", "hooks"}

// Protect walks each write root (every depth, at most MaxWalk entries in
// all, symlinks not followed) for the entries other programs will run or
// obey, and returns the directories to pin and the files and directories
// to make read-only:
//
//   - each repository's .git directory is pinned (bound onto itself: a
//     mount point cannot be renamed, removed or renamed over), and its
//     config and hooks made read-only; so are its submodules' git
//     directories under .git/modules and its worktrees' config.worktree
//     (protectGitDir); a .git file (a worktree's or submodule's "gitdir:"
//     pointer) is made read-only;
//   - start-up files (protectedNames) and .ssh/authorized_keys are made
//     read-only.
//
// The binds hold the inodes, not the names: renaming a parent (the
// repository's directory, or .git itself where it is not a mount point)
// carries the protection along. Entries created later are not covered
// here (the BPF backend also protects them by name). complete is false
// when the walk stopped at MaxWalk: entries further on are not protected.
func Protect(writeRoots []string) (pin, ro []string, complete bool) {
	seen := 0
	complete = true
	for _, root := range writeRoots {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable: the server cannot write it either
			}
			if seen++; seen > MaxWalk {
				complete = false
				return filepath.SkipAll
			}
			name := d.Name()
			switch {
			case name == ".git" && d.IsDir():
				gp, gro, ok := protectGitDir(p, &seen)
				pin, ro = append(pin, gp...), append(ro, gro...)
				if !ok {
					complete = false
					return filepath.SkipAll
				}
				return filepath.SkipDir // git's own data: nothing else to find
			case name == ".git" && d.Type().IsRegular(),
				protectedNames[name] && d.Type().IsRegular(),
				name == "authorized_keys" && d.Type().IsRegular() && filepath.Base(filepath.Dir(p)) == ".ssh":
				ro = append(ro, p)
			}
			return nil
		})
		if !complete {
			break
		}
	}
	return pin, ro, complete
}

// protectGitDir returns what to pin and make read-only for the git
// directory dir: dir itself is pinned and its gitProtected entries made
// read-only; the same holds for every submodule's git directory under
// dir/modules (at any depth: a submodule named "a/b" lives in modules/a/b,
// nested submodules in modules/x/modules/y), which git runs hooks from and
// reads config from just as from the top one; and a linked worktree's
// config.worktree under dir/worktrees (it can set core.hooksPath too).
// The directories it looks at count toward seen; ok is false when they
// passed MaxWalk.
func protectGitDir(dir string, seen *int) (pin, ro []string, ok bool) {
	pin = append(pin, dir)
	for _, e := range gitProtected {
		q := filepath.Join(dir, e)
		// Lstat: a symlink is not followed; binding onto it would
		// protect whatever it points at instead.
		if fi, err := os.Lstat(q); err == nil && (fi.Mode().IsRegular() || fi.IsDir()) {
			ro = append(ro, q)
		}
	}
	ok = true
	if wts, err := os.ReadDir(filepath.Join(dir, "worktrees")); err == nil {
		for _, wt := range wts {
			if *seen++; *seen > MaxWalk {
				return pin, ro, false
			}
			q := filepath.Join(dir, "worktrees", wt.Name(), "config.worktree")
			if fi, err := os.Lstat(q); err == nil && fi.Mode().IsRegular() {
				ro = append(ro, q)
			}
		}
	}
	filepath.WalkDir(filepath.Join(dir, "modules"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == filepath.Join(dir, "modules") {
			return nil
		}
		if *seen++; *seen > MaxWalk {
			ok = false
			return filepath.SkipAll
		}
		// A git directory has a HEAD file; anything else here is a
		// directory level of a submodule's name.
		if fi, err := os.Lstat(filepath.Join(p, "HEAD")); err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		sp, sro, sok := protectGitDir(p, seen)
		pin, ro = append(pin, sp...), append(ro, sro...)
		if !sok {
			ok = false
			return filepath.SkipAll
		}
		return filepath.SkipDir
	})
	return pin, ro, ok
}

// MaxWalk bounds how many entries HardLinks looks at under all roots
// together; past it the walk stops and says so.
const MaxWalk = 200000

// RuleProtectWalk is the audit rule both L3 backends log when NewSpec's
// Protect walk stopped at MaxWalk (Spec.ProtectIncomplete): a repository or
// start-up file further on is protected by name only, so the user learns
// that the workspace is too large for protection by identity.
const RuleProtectWalk = "contain.protect_walk_incomplete"

// ProtectWalkReason is the audit reason that goes with RuleProtectWalk.
func ProtectWalkReason() string {
	return fmt.Sprintf("stopped after %d entries under the write roots: repositories and start-up files further on are protected by name only", MaxWalk)
}
