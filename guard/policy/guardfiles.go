package policy

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/mcpguard/mcpguard/guard/validate"
)

// ErrGuardFileWritable is returned when a policy's write roots reach one of
// the guard's own files: the policy, its overrides directory, the audit
// log. One allowed write_file there would rewrite the guard's rules for
// the next session (an override admitting ~/.ssh) or erase its record.
var ErrGuardFileWritable = errors.New("a write root reaches the guard's own files")

// GuardFile is one of the guard's own files and what it is.
type GuardFile struct {
	Path, What string
}

// GuardFiles lists the guard's own files for a policy file and an audit
// log (either may be empty): the policy, the overrides directory beside
// it, the audit log.
func GuardFiles(policyFile, auditFile string) []GuardFile {
	var out []GuardFile
	if policyFile != "" {
		out = append(out, GuardFile{policyFile, "the policy file"},
			GuardFile{filepath.Join(filepath.Dir(policyFile), OverridesDir), "its overrides directory"})
	}
	if auditFile != "" && auditFile != "-" {
		out = append(out, GuardFile{auditFile, "the audit log"})
	}
	return out
}

// CheckGuardFiles refuses p when a write root (server-wide or a tool's)
// is, or is above, one of files, with the reason and the fix. Paths are
// compared as the kernel resolves them (symlinks followed), so a root
// reached through a link counts.
func CheckGuardFiles(p *Policy, files []GuardFile) error {
	var roots []string
	roots = append(roots, p.Filesystem.Write...)
	for _, name := range slices.Sorted(maps.Keys(p.Tools)) {
		roots = append(roots, p.Tools[name].Write...)
	}
	for _, f := range files {
		abs, err := filepath.Abs(f.Path)
		if err != nil {
			return fmt.Errorf("%s %s: %w", f.What, f.Path, err)
		}
		canon := abs
		if c, err := validate.CanonPath(abs, validate.PathOptions{}); err == nil {
			canon = c
		}
		for _, r := range roots {
			rc, err := validate.NewRoots(r)
			if err != nil || len(rc) == 0 {
				continue
			}
			if rc.Contains(canon) || rc.Contains(abs) {
				return fmt.Errorf("%w: filesystem write root %s contains %s (%s): a server allowed to write there could rewrite the guard's rules or its record; keep the policy and the audit log outside every write root (e.g. in ~/.config/mcpguard), or narrow the root", ErrGuardFileWritable, r, abs, f.What)
			}
		}
	}
	return nil
}
