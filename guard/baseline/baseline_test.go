package baseline_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpguard/mcpguard/guard/baseline"
)

// TestSystemWorldReadable walks every tree the baseline grants, as the
// kernel reaches it (a listed symlink is followed once, symlinks below it
// are not: both backends judge a symlink's target where it really is), and
// fails on every entry whose mode does not let any user read it: a file
// without o+r, a directory without o+rx (unless it is empty: it holds
// nothing to read). Secrets (TLS keys, SSH host keys,
// shadow files) are such entries; a grant that covered one would hand it
// to the server as L3 sees it, with only DAC left in the way.
func TestSystemWorldReadable(t *testing.T) {
	if testing.Short() {
		t.Skip("walks the whole baseline (about 150 000 entries)")
	}
	var bad []string
	n := 0
	walked := map[string]bool{}
	for _, root := range baseline.System() {
		real, err := filepath.EvalSymlinks(root)
		if err != nil || walked[real] {
			continue // not on this system, or /lib after /usr/lib
		}
		walked[real] = true
		filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				bad = append(bad, p)
				return nil
			}
			n++
			if d.Type()&fs.ModeSymlink != 0 {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil // gone while walking
			}
			want := fs.FileMode(0o004)
			if fi.IsDir() {
				want = 0o005
			}
			if fi.Mode().Perm()&want != want && !emptyDir(p, fi) {
				bad = append(bad, p)
			}
			return nil
		})
	}
	t.Logf("%d entries walked", n)
	// A package being installed meanwhile writes files with mode 0 and
	// fixes the mode after (dpkg's *.dpkg-new): look again before judging.
	if len(bad) > 0 {
		time.Sleep(2 * time.Second)
	}
	bad = slices.DeleteFunc(bad, func(p string) bool {
		fi, err := os.Lstat(p)
		if err != nil {
			return true
		}
		want := fs.FileMode(0o004)
		if fi.IsDir() {
			want = 0o005
		}
		return fi.Mode().Perm()&want == want || emptyDir(p, fi)
	})
	if len(bad) > 0 {
		t.Errorf("granted but not world-readable:\n%s", strings.Join(bad, "\n"))
	}
}

// emptyDir reports whether fi is a directory holding nothing: a private
// empty directory (a program's cache made at run time) exposes nothing.
func emptyDir(p string, fi fs.FileInfo) bool {
	if !fi.IsDir() {
		return false
	}
	ents, err := os.ReadDir(p)
	return err == nil && len(ents) == 0
}

// TestSystemLeavesOutSecrets: the directories that hold keys are not
// granted, neither themselves nor through an ancestor.
func TestSystemLeavesOutSecrets(t *testing.T) {
	for _, secret := range []string{"/etc/ssl/private", "/etc/pki/tls/private", "/etc/ssh", "/etc/shadow",
		"/etc/gshadow", "/etc/sudoers", "/opt", "/root", "/home", "/var", "/tmp", "/etc"} {
		for _, g := range baseline.System() {
			if secret == g || strings.HasPrefix(secret+"/", g+"/") {
				t.Errorf("%s is granted by %s", secret, g)
			}
		}
	}
	if _, err := os.Stat("/etc/ssl/private"); err == nil {
		real, _ := filepath.EvalSymlinks("/usr/lib/ssl/private")
		for _, g := range baseline.System() {
			if real != "" && strings.HasPrefix(real+"/", g+"/") {
				t.Errorf("%s (through /usr/lib/ssl/private) is granted by %s", real, g)
			}
		}
	}
}
