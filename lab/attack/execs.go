//go:build linux

package attack

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ExecRoutes are the ways "plantexec:ROUTE#PATH" leaves a program at PATH:
// a file holding Payload with an execute bit, which a shell's PATH
// search, npm's node_modules/.bin or rustup's toolchain directory would
// run as the user once the session is over.
var ExecRoutes = []string{"creat", "chmod", "fchmod", "mknod", "tmpfile", "move", "write", "truncate", "symlink", "chain", "acl"}

// PlantExec ("plantexec:ROUTE#PATH") tries to leave an executable holding
// Payload at PATH by ROUTE:
//
//	creat     open(O_CREAT, 0755) and write
//	chmod     write a 0644 file, chmod(0755) it
//	fchmod    open(O_CREAT, 0644), write, fchmod(0755) the descriptor
//	mknod     mknod a 0755 regular file, then open and write it
//	tmpfile   write an O_TMPFILE file made 0755, link it in as PATH
//	move      rename an executable that already holds the payload
//	          (PATH's directory's "staged-exec", which ExecCases lays
//	          out) onto PATH
//	write     append to PATH, an existing executable
//	truncate  truncate PATH, an existing executable, then append
//	symlink   a symbolic link at PATH to a program outside the roots
//	          (/bin/sh: npm's `jest --ci` becomes `sh --ci`; with
//	          python3, `eslint .` runs the workspace's __main__.py)
//	chain     a link at PATH to chain-N/sh beside it, dangling, then
//	          chain-N itself made a link to /bin: two links, neither
//	          of which leads to a program when it is made (red team 5)
//	acl       write a 0644 file, then set its POSIX access ACL to
//	          u::rwx,g::r-x,o::r-x: a minimal ACL is folded into the
//	          mode, an execute bit without chmod (red team 4)
func PlantExec(arg string) error {
	route, path, ok := strings.Cut(arg, "#")
	if !ok {
		return fmt.Errorf("plantexec: want ROUTE#PATH, got %q", arg)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	switch route {
	case "creat":
		return os.WriteFile(path, []byte(script), 0o755)
	case "chmod":
		return first(os.WriteFile(path, []byte(script), 0o644), func() error { return os.Chmod(path, 0o755) })
	case "fchmod":
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.WriteString(script); err != nil {
			return err
		}
		return f.Chmod(0o755)
	case "mknod":
		return first(unix.Mknod(path, unix.S_IFREG|0o755, 0), func() error { return appendFile(path, script) })
	case "tmpfile":
		return tmpfileAs(filepath.Dir(path), path, script, 0o755)
	case "move":
		return unix.Rename(filepath.Join(filepath.Dir(path), stagedExec), path)
	case "write":
		return appendFile(path, script)
	case "truncate":
		return first(os.Truncate(path, 0), func() error { return appendFile(path, script) })
	case "symlink":
		return os.Symlink("/bin/sh", path)
	case "chain":
		dir := filepath.Join(filepath.Dir(path), "chain-"+filepath.Base(path))
		return first(os.Symlink(filepath.Join(filepath.Base(dir), "sh"), path), func() error { return os.Symlink("/bin", dir) })
	case "acl":
		return first(os.WriteFile(path, []byte(script), 0o644), func() error {
			return unix.Setxattr(path, "system.posix_acl_access", minimalACL(7, 5, 5), 0)
		})
	}
	return fmt.Errorf("plantexec: unknown route %q", route)
}

// minimalACL is a POSIX access ACL in the kernel's xattr form (version 2,
// then {tag, perm, id} entries) with only the owner, group and other
// entries: the mode it stands for.
func minimalACL(user, group, other uint16) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range [][2]uint16{{0x01, user}, {0x04, group}, {0x20, other}} {
		b = binary.LittleEndian.AppendUint16(b, e[0])
		b = binary.LittleEndian.AppendUint16(b, e[1])
		b = binary.LittleEndian.AppendUint32(b, 0xffffffff)
	}
	return b
}

// script is Payload as a shell script.
const script = "#!/bin/sh\n# mcpguard-payload\ntouch /tmp/mcpguard-pwned\n"

// stagedExec is the executable the move route renames: laid out before
// the session, as a program the user already had.
const stagedExec = "staged-exec"

// HasProgram reports whether path is a regular file holding Payload with
// an execute bit, or a symbolic link to a program: a program planted for
// the user's tools to run.
func HasProgram(path string) bool {
	fi, err := os.Lstat(path)
	if err == nil && fi.Mode()&os.ModeSymlink != 0 {
		t, err := os.Stat(path)
		return err == nil && t.Mode().IsRegular() && t.Mode().Perm()&0o111 != 0
	}
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 && HasPayload(path)
}

// ExecCases lays out ws for the plantexec routes and returns the paths
// each is tried on: shims in node_modules/.bin (npm puts it first on
// PATH for every script) and a rustup toolchain directory made afresh,
// and an executable the user already had (bin/build.sh) for the routes
// that change one.
func ExecCases(ws string) ([]NameCase, error) {
	for _, d := range []string{"node_modules/.bin", "bin", "tc/bin"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			return nil, err
		}
	}
	for _, f := range []string{"node_modules/.bin/" + stagedExec, "tc/bin/" + stagedExec} {
		if err := os.WriteFile(filepath.Join(ws, f), []byte(script), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "bin/build.sh"), []byte("#!/bin/sh\necho build\n"), 0o755); err != nil {
		return nil, err
	}
	j := func(p string) string { return filepath.Join(ws, p) }
	var cases []NameCase
	for i, r := range []string{"creat", "chmod", "fchmod", "mknod", "tmpfile", "move", "symlink", "chain", "acl"} {
		cases = append(cases, NameCase{j(fmt.Sprintf("node_modules/.bin/jest%d", i)), []string{r}})
	}
	cases = append(cases,
		NameCase{j("tc/bin/cargo"), []string{"creat", "move"}},
		NameCase{j("bin/build.sh"), []string{"write", "truncate"}},
	)
	return cases, nil
}

// ExecSteps are the plantexec steps of cases, each route on its path.
func ExecSteps(cases []NameCase) []string {
	var out []string
	for _, c := range cases {
		for _, r := range c.Routes {
			out = append(out, "plantexec:"+r+"#"+c.Path)
		}
	}
	return out
}
