package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/mcpguard/mcpguard/guard/launch"
)

// Cache remembers what the confined helpers answered (an interpreter's
// search path, npm's install of an npx package) across the sessions of
// one process: the eval harness and the gateway start the same servers
// many times, and each helper is a confined launch of its own (about a
// second under emulation). An answer is reused only for the same request
// (program, arguments, environment, grants, the server's user) and only
// while every file it came from is the same file, unchanged: the helper's
// program and the chain the kernel ran to start it, the trees and files
// it was granted, and what the answer itself names (for Python: the
// search path's directories, the .pth files in them, pyvenv.cfg and the
// source and cached files of every module the interpreter imported; for
// npx: npm's .bin directory and the package's package.json). Same means
// the same device, inode, size, mode, modification and change times
// (ctime, which no user can set); a file changed from one second before
// the helper started onwards is not trusted to be the one it read, and
// its answer is not kept. A Cache is safe for concurrent use; the zero
// value is not usable, use NewCache.
//
// Resolving never depends on a stale answer for what it grants: a
// Python interpreter's answer only adds notes (the grants come from its
// location), and npx's names the package whose files are then read.
type Cache struct {
	mu sync.Mutex
	m  map[string]cached
}

// NewCache returns an empty Cache.
func NewCache() *Cache { return &Cache{m: map[string]cached{}} }

type cached struct {
	out  []byte
	seen []witness
}

// witness is a file as it was when an answer was kept; zero id: absent.
type witness struct {
	path string
	id   fileID
}

// helperKey is everything of h that its answer can depend on.
func helperKey(h launch.Helper) string {
	getenv := h.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	uid, gid, err := launch.ServerUser(getenv)
	return fmt.Sprintf("%q %q %q %q %q %q %v %v %d:%d %v", h.Argv, h.Dir, h.Env, h.Read, h.Exec, h.Write, h.TCP, h.UDP, uid, gid, err)
}

// get returns the answer kept for key if every file it came from is
// unchanged.
func (c *Cache) get(key string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	for _, w := range e.seen {
		if identify(w.path) != w.id {
			return nil, false
		}
	}
	return e.out, true
}

// put keeps out for key, witnessed by paths (and, for a symlink, what it
// resolves to), unless one of them changed since started (less a second:
// change times are as coarse as the kernel's clock tick).
func (c *Cache) put(key string, out []byte, started time.Time, paths []string) {
	if c == nil {
		return
	}
	for _, p := range slices.Clone(paths) {
		if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
			paths = append(paths, real)
		}
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	limit := started.Add(-time.Second).UnixNano()
	seen := make([]witness, 0, len(paths))
	for _, p := range paths {
		id := identify(p)
		if id.ctime >= limit || id.mtime >= limit {
			return
		}
		seen = append(seen, witness{p, id})
	}
	c.mu.Lock()
	c.m[key] = cached{out: slices.Clone(out), seen: seen}
	c.mu.Unlock()
}
