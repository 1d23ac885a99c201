package launch

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The server's view (issue 31): the server never runs as uid 0, so DAC
// protects root's files from it as well as L3 does; what it is granted
// must still be reachable by its unprivileged user. Under a root proxy the
// launcher builds that in the server's mount namespace, without changing
// anything on disk where the kernel allows:
//
//   - Data grants (the policy's filesystem roots) owned by another user are
//     attached again as idmapped mounts (mount_setattr MOUNT_ATTR_IDMAP)
//     whose mapping swaps their owner and group with the server's: the
//     server reads and writes them as their owner would, and what it
//     creates is owned on disk by their owner. Where the file system cannot
//     idmap (tmpfs before Linux 6.3, 9p, NFS), the proxy gives the server's
//     user POSIX ACL entries with the owner's permissions on the grant's
//     entries of that owner, and takes them back (and gives back the
//     ownership of what the server created) when the session ends.
//   - A directory above a grant that the server's user cannot search (a
//     0700 home or temporary directory) is covered, in the server's mount
//     namespace only, by a stub tree: empty directories (0755) leading to
//     the grants below it, each attached again on its stub. Nothing else of
//     that directory is visible to the server, and the directory itself
//     keeps its owner and mode.
//   - Runtime trees are never mapped: the server reads them as any user
//     (the baseline and the runtimes' own files are world-readable).
//   - Every write root is mounted noexec (with the supervised file system
//     over it, where there is one): a file there can be neither execve'd
//     nor mapped executable (mmap PROT_EXEC, which the ELF loader run
//     directly, `ld.so FILE`, and dlopen use and which Landlock's execute
//     right does not cover). What the server writes never runs. Runtime
//     trees and programs that lie inside a write root when the session
//     starts (a venv in the workspace, the server's own binary) are
//     attached again over it read-only and executable (View.Keep): they
//     run, and the server cannot change them.

// View is how the server's user reaches its grants: computed by Prepare
// (the proxy) and applied by stage 1 in the server's mount namespace.
type View struct {
	// Shadows are directories the server's user cannot search, each
	// covered by its Stub, a tree the proxy prepared.
	Shadows []Shadow `json:"shadows,omitempty"`
	// Mounts are the grants attached again, parents first.
	Mounts []ViewMount `json:"mounts,omitempty"`
	// Keep are runtime trees and programs inside a write root, attached
	// again read-only and executable over the (noexec) write roots.
	Keep []string `json:"keep,omitempty"`
}

// Shadow covers Path with Stub.
type Shadow struct {
	Path string `json:"path"`
	Stub string `json:"stub"`
}

// ViewMount attaches Path again (a recursive clone of what was there):
// writable when Write, read-only otherwise, idmapped when UserNS (the
// descriptor of the user namespace whose mapping it takes, in stage 1) is
// not 0.
type ViewMount struct {
	Path   string `json:"path"`
	Write  bool   `json:"write,omitempty"`
	UserNS int    `json:"userns,omitempty"`
}

// viewGrant is a grant the view must make reachable.
type viewGrant struct {
	path        string // as listed (symlinks kept)
	real        string // symlinks resolved
	write, data bool
	dir         bool
	owner       [2]uint32 // uid, gid of real
}

// grantsOf lists spec's grants that exist, data first.
func grantsOf(spec *Spec) []*viewGrant {
	var out []*viewGrant
	add := func(p string, write, data bool) {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return
		}
		fi, err := os.Stat(real)
		if err != nil {
			return
		}
		g := &viewGrant{path: filepath.Clean(p), real: real, write: write, data: data, dir: fi.IsDir()}
		if uid, gid, ok := ownerOf(fi); ok {
			g.owner = [2]uint32{uid, gid}
		}
		out = append(out, g)
	}
	for _, p := range spec.Writable {
		add(p, true, true)
	}
	for _, p := range spec.Readable {
		add(p, false, true)
	}
	for _, p := range spec.Reach {
		add(p, false, false)
	}
	return out
}

// keepExec lists the runtime grants (real paths) that lie strictly inside
// a write grant and hold none: what must stay executable on the noexec
// write roots. A runtime tree that is or holds a write root (a package
// root that is also the workspace) is not kept: it stays writable, and
// what it holds cannot run or be mapped executable.
func keepExec(grants []*viewGrant) []string {
	var out []string
	for _, g := range grants {
		if g.data {
			continue
		}
		inWrite, holdsWrite := false, false
		for _, w := range grants {
			if !w.write {
				continue
			}
			inWrite = inWrite || (g.real != w.real && within(g.real, w.real))
			holdsWrite = holdsWrite || within(w.real, g.real)
		}
		if inWrite && !holdsWrite {
			out = append(out, g.real)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	return slices.DeleteFunc(out, func(s string) bool {
		return slices.ContainsFunc(out, func(o string) bool { return o != s && within(s, o) })
	})
}

// searchable reports whether uid:gid (no other groups) may search the
// directory dir by its mode bits.
func searchable(dir string, uid, gid uint32) bool {
	fi, err := os.Stat(dir)
	if err != nil {
		return true // nothing to cover
	}
	owner, group, ok := ownerOf(fi)
	if !ok {
		return true
	}
	m := fi.Mode().Perm()
	switch {
	case owner == uid:
		return m&0o100 != 0
	case group == gid:
		return m&0o010 != 0
	}
	return m&0o001 != 0
}

// shadows returns the topmost directories above the grants that uid:gid
// cannot search. A directory inside a data grant is never covered (it
// would hide the grant's own content).
func shadows(grants []*viewGrant, uid, gid uint32) []string {
	var out []string
	inData := func(p string) bool {
		return slices.ContainsFunc(grants, func(g *viewGrant) bool { return g.data && within(p, g.real) })
	}
	for _, g := range grants {
		var ancestors []string
		for a := filepath.Dir(g.real); a != "/" && a != "."; a = filepath.Dir(a) {
			ancestors = append(ancestors, a)
		}
		slices.Reverse(ancestors)
		for _, a := range ancestors {
			if inData(a) {
				break
			}
			if !searchable(a, uid, gid) {
				out = append(out, a)
				break
			}
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	return slices.DeleteFunc(out, func(s string) bool {
		return slices.ContainsFunc(out, func(o string) bool { return o != s && within(s, o) })
	})
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/") || dir == "/"
}
