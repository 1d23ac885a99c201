//go:build unix

package launch

import (
	"io/fs"
	"path/filepath"
	"syscall"
)

// HardLinks lists the regular files under roots that have more than one
// name, except those that are roots themselves (named by the policy). A
// backend that judges the path opened (Landlock) would let another name of
// such a file, planted in a readable root, reach a secret whose own name
// is denied. complete is false when the walk stopped at MaxWalk.
func HardLinks(roots []string) (files []string, complete bool) {
	named := map[string]bool{}
	for _, r := range roots {
		named[filepath.Clean(r)] = true
	}
	seen := 0
	complete = true
	for _, root := range roots {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable: the server cannot read it either
			}
			if seen++; seen > MaxWalk {
				complete = false
				return filepath.SkipAll
			}
			if !d.Type().IsRegular() || named[p] {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				files = append(files, p)
			}
			return nil
		})
		if !complete {
			break
		}
	}
	return files, complete
}
