package launch

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/mcpguard/mcpguard/guard/pathrules"
)

// NewSpec is the spec for a server under a proxy with the given effective
// uid (os.Geteuid()): as root, namespaces and the user ServerUser names;
// otherwise the proxy's own user, unchanged. writeRoots are the backend's
// write grants: the only writable mounts of the server's namespace, and
// searched for entries to protect (Protect). The server always gets a
// network namespace of its own; AttachEgress connects it to the guard's
// egress filter when the policy grants network.
func NewSpec(euid int, getenv func(string) string, writeRoots []string) (Spec, error) {
	if euid != 0 {
		return Spec{}, nil
	}
	uid, gid, err := ServerUser(getenv)
	if err != nil {
		return Spec{}, err
	}
	sp := Spec{UID: uid, GID: gid, Namespaces: true, Writable: writeRoots}
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
			case name == ".git" && d.Type().IsRegular():
				ro = append(ro, p)
				// The repository it points at ("gitdir: PATH", git
				// clone --separate-git-dir) is a git directory under
				// another name: protected as one when the server could
				// write it (red team: its config's core.fsmonitor ran
				// on the user's git status).
				if dir, ok := gitDirOf(p, writeRoots); ok {
					gp, gro, ok := protectGitDir(dir, &seen)
					pin, ro = append(pin, gp...), append(ro, gro...)
					if !ok {
						complete = false
						return filepath.SkipAll
					}
				}
			case protectedNames[name] && d.Type().IsRegular(),
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

// gitDirOf reads the .git file p ("gitdir: PATH", relative to p's
// directory or absolute) and returns the directory it points at, when that
// is a directory inside one of roots not named .git (a .git directory is
// protected where the walk meets it). Links in the path are resolved: the
// server could write what they lead to.
func gitDirOf(p string, roots []string) (string, bool) {
	f, err := os.Open(p)
	if err != nil {
		return "", false
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 4096))
	line, _, _ := strings.Cut(string(b), "\n")
	target, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok {
		return "", false
	}
	target = strings.TrimSpace(target)
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(p), target)
	}
	real, err := filepath.EvalSymlinks(target)
	if err != nil {
		return "", false
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() || filepath.Base(real) == ".git" {
		return "", false
	}
	for _, r := range roots {
		if rr, err := filepath.EvalSymlinks(r); err == nil {
			if pathrules.Host.Within(real, rr) {
				return real, true
			}
		}
	}
	return "", false
}

// protectGitDir returns what to pin and make read-only for the git
// directory dir: dir itself is pinned, and every entry in it that the name
// model protects (IsProtected: all but git's data) is made read-only,
// config, hooks, info, worktrees and modules (each submodule's git
// directory whole) among them. The fixed directories the model lists data
// below (objects, objects/info) are looked into instead, so that git
// still writes its objects and commit-graph there while alternates stays
// read-only. The entries it looks at count toward seen; ok is false when
// they passed MaxWalk.
func protectGitDir(dir string, seen *int) (pin, ro []string, ok bool) {
	pin = append(pin, dir)
	ok = protectGitEntries(dir, "", &ro, seen)
	return pin, ro, ok
}

// protectGitEntries adds to ro the protected entries of dir/rel.
func protectGitEntries(dir, rel string, ro *[]string, seen *int) bool {
	ents, err := os.ReadDir(filepath.Join(dir, rel))
	if err != nil {
		return true // unreadable: the server cannot write it either
	}
	for _, e := range ents {
		if *seen++; *seen > MaxWalk {
			return false
		}
		r := path.Join(rel, e.Name())
		switch {
		case !IsProtected(".git/" + r):
		case e.IsDir() && gitListsBelow(r):
			if !protectGitEntries(dir, r, ro, seen) {
				return false
			}
		// A symlink is not bound: binding onto it would protect
		// whatever it points at instead (its name is refused by the
		// kernel's name rules).
		case e.Type().IsRegular() || e.IsDir():
			*ro = append(*ro, filepath.Join(dir, r))
		}
	}
	return true
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
