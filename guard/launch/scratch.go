package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpguard/mcpguard/guard/pathrules"
)

// Scratch is a server's own temporary directory, its TMPDIR: under L3 the
// system's /tmp is not writable (it is shared with every other user and
// job), yet most runtimes put their temporary files there (node's
// os.tmpdir(), Python's tempfile, Go's os.TempDir) and the usual advice,
// granting /tmp, would give the server everyone's temporary files. The
// directory is empty at the start, belongs to the server's user alone,
// is a write root of the server's sandbox (not part of any workspace, so
// not watched by the session change report) and is removed with
// everything in it when the session ends.
type Scratch struct {
	Dir string
}

// NewScratch makes the scratch directory of a server launched with sp and
// the environment env, under the proxy's own temporary directory, mode
// 0700, owned by the server's user when the launcher switches to one. It
// returns nil when env's TMPDIR already lies in one of sp's write roots:
// the policy gave the server that directory on purpose.
func NewScratch(sp Spec, env []string) (*Scratch, error) {
	if env == nil {
		env = os.Environ()
	}
	for _, kv := range env {
		if dir, ok := strings.CutPrefix(kv, "TMPDIR="); ok && filepath.IsAbs(dir) &&
			slices.ContainsFunc(sp.Writable, func(root string) bool { return pathrules.Host.Within(dir, root) }) {
			return nil, nil
		}
	}
	dir, err := os.MkdirTemp("", "mcpguard-tmp-")
	if err != nil {
		return nil, fmt.Errorf("server scratch: %w", err)
	}
	if sp.Namespaces {
		if err := os.Chown(dir, int(sp.UID), int(sp.GID)); err != nil {
			os.Remove(dir)
			return nil, fmt.Errorf("server scratch: %w", err)
		}
	}
	return &Scratch{Dir: dir}, nil
}

// scratchVars are the variables runtimes read for their temporary
// directory (TMPDIR on Unix; Python also looks at TEMP and TMP).
var scratchVars = []string{"TMPDIR", "TEMP", "TMP"}

// Env returns env (unchanged on nil) (os.Environ() when nil, as exec.Cmd reads it) with
// TMPDIR, TEMP and TMP naming the scratch directory, whatever they were.
func (s *Scratch) Env(env []string) []string {
	if s == nil {
		return env
	}
	if env == nil {
		env = os.Environ()
	}
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(scratchVars, name)
	})
	for _, v := range scratchVars {
		env = append(env, v+"="+s.Dir)
	}
	return env
}

// Close removes the directory and everything the server left in it. It
// comes after the server's processes are gone; os.RemoveAll does not
// follow symbolic links the server may have left there. Safe on nil.
func (s *Scratch) Close() error {
	if s == nil {
		return nil
	}
	if err := os.RemoveAll(s.Dir); err != nil {
		return fmt.Errorf("remove server scratch: %w", err)
	}
	return nil
}
