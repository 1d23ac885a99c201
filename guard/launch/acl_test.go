//go:build linux

package launch

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestACLFallback: where a file system cannot idmap (tmpfs before 6.3,
// the VM's), the server's user gets ACL entries with the owner's
// permissions on a root-owned 0700 tree, reads a 0600 file and creates
// one through them; undo removes every entry, restores the modes, and
// gives the created file back to root.
func TestACLFallback(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: chown and another user")
	}
	base, err := os.MkdirTemp("", "mcpguard-acl-*")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	root := filepath.Join(base, "ws")
	require.NoError(t, os.Mkdir(root, 0o700))
	secret := filepath.Join(root, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("only-root"), 0o600))
	asNobody := func(script string) (string, error) {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: Nobody, Gid: Nobody, Groups: []uint32{}}}
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	_, err = asNobody("cat " + secret)
	require.Error(t, err, "nobody reads root's 0600 file without the entries")

	j, err := openJournal(filepath.Join(t.TempDir(), "state"))
	require.NoError(t, err)
	undo, err := aclGrant(j, root, [2]uint32{0, 0}, Nobody, Nobody)
	if err != nil && (errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP)) {
		t.Skipf("no POSIX ACLs on this file system: %v", err)
	}
	require.NoError(t, err)
	out, err := asNobody("cat " + secret + " && echo made > " + root + "/new")
	require.NoError(t, err, out)
	assert.Equal(t, "only-root", out)
	require.NoError(t, undo())

	for _, p := range []string{root, secret, filepath.Join(root, "new")} {
		_, err := xattr(p)
		assert.ErrorIs(t, err, unix.ENODATA, "%s keeps an ACL", p)
		fi, err := os.Stat(p)
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		assert.Equal(t, [2]uint32{0, 0}, [2]uint32{st.Uid, st.Gid}, "%s owned by root", p)
	}
	assert.Equal(t, os.FileMode(0o700), modeOf(t, root))
	assert.Equal(t, os.FileMode(0o600), modeOf(t, secret))
	_, err = asNobody("cat " + secret)
	assert.Error(t, err, "the entries are gone")
}

// TestACLOverlappingGrants: two grants over one tree (a path granted to
// read and to write, a read root holding a write root) leave nothing once
// undone last first, as Launch.Close and the journal's replay do; undone
// first first, the second grant, which recorded the first's entries as
// the original state, put the server's user's entry back (red team 4: the
// owner's 0600 file stayed readable to nobody after the session).
func TestACLOverlappingGrants(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: chown and another user")
	}
	for _, order := range []string{"last first", "first first"} {
		t.Run(order, func(t *testing.T) {
			base := t.TempDir()
			require.NoError(t, os.Chmod(base, 0o755))
			root := filepath.Join(base, "ws")
			require.NoError(t, os.MkdirAll(filepath.Join(root, "state"), 0o700))
			secret := filepath.Join(root, "state", "secret")
			require.NoError(t, os.WriteFile(secret, []byte("only-root"), 0o600))
			j, err := openJournal(filepath.Join(t.TempDir(), "state"))
			require.NoError(t, err)
			inner, err := aclGrant(j, filepath.Join(root, "state"), [2]uint32{0, 0}, Nobody, Nobody)
			if err != nil && (errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP)) {
				t.Skipf("no POSIX ACLs on this file system: %v", err)
			}
			require.NoError(t, err)
			outer, err := aclGrant(j, root, [2]uint32{0, 0}, Nobody, Nobody)
			require.NoError(t, err)
			if order == "last first" {
				require.NoError(t, outer())
				require.NoError(t, inner())
				_, err := xattr(secret)
				assert.ErrorIs(t, err, unix.ENODATA, "the secret keeps an ACL")
				return
			}
			require.NoError(t, inner())
			require.NoError(t, outer())
			_, err = xattr(secret)
			assert.NoError(t, err, "baseline: undone in the order made, the outer grant puts an entry back")
		})
	}
}

func modeOf(t *testing.T, p string) os.FileMode {
	fi, err := os.Stat(p)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

func TestACLEncoding(t *testing.T) {
	es := withUser(nil, 0o640, 65534, 6)
	b := encodeACL(es)
	got, err := parseACL(b)
	require.NoError(t, err)
	assert.Equal(t, []aclEntry{{aclUserObj, 6, aclNoID}, {aclUser, 6, 65534}, {aclGroupOb, 4, aclNoID}, {aclMask, 6, aclNoID}, {aclOther, 0, aclNoID}}, got)
	// An existing mask keeps capping the others.
	es = withUser([]aclEntry{{aclUserObj, 7, aclNoID}, {aclGroupOb, 7, aclNoID}, {aclMask, 5, aclNoID}, {aclOther, 0, aclNoID}}, 0o750, 65534, 7)
	assert.Contains(t, es, aclEntry{aclMask, 7, aclNoID})
	_, err = parseACL([]byte{1, 0, 0, 0})
	assert.Error(t, err)
}

// aclTree makes a root-owned workspace for the ACL tests: base (0755)
// holding ws (0700) with sub/f (0644) and secret (0600), and outside
// (0755) holding f (0600), a file the server must never get.
func aclTree(t *testing.T) (ws, outside string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: chown and another user")
	}
	base, err := os.MkdirTemp("", "mcpguard-acl-*")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	ws, outside = filepath.Join(base, "ws"), filepath.Join(base, "outside")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "sub"), 0o700))
	require.NoError(t, os.Chmod(ws, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "sub", "f"), []byte("ws"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "secret"), []byte("s"), 0o600))
	require.NoError(t, os.Mkdir(outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "f"), []byte("host"), 0o600))
	return ws, outside
}

func grantOrSkip(t *testing.T, j *journal, ws string) func() error {
	t.Helper()
	undo, err := aclGrant(j, ws, [2]uint32{0, 0}, Nobody, Nobody)
	if err != nil && (errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP)) {
		t.Skipf("no POSIX ACLs on this file system: %v", err)
	}
	require.NoError(t, err)
	return undo
}

func asNobody(t *testing.T, script string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: Nobody, Gid: Nobody, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// TestACLUndoSymlinkSwap: the server owns the lent directories for the
// session, so it can rename one away and put a symbolic link to another
// directory in its place, holding a file of the same name as one of the
// workspace's. Putting the modes back must not follow the link: on main
// before this change, the proxy (root) chmodded outside/f to the saved
// mode of ws/sub/f (0644), giving every user a file only root could read.
func TestACLUndoSymlinkSwap(t *testing.T) {
	ws, outside := aclTree(t)
	j, err := openJournal(filepath.Join(t.TempDir(), "state"))
	require.NoError(t, err)
	undo := grantOrSkip(t, j, ws)
	asNobody(t, "mv "+ws+"/sub "+ws+"/moved && ln -s "+outside+" "+ws+"/sub")
	require.NoError(t, undo())

	assert.Equal(t, os.FileMode(0o600), modeOf(t, filepath.Join(outside, "f")), "the link was followed")
	_, err = xattr(filepath.Join(outside, "f"))
	assert.ErrorIs(t, err, unix.ENODATA)
	// What was renamed is put back all the same (the inode is the one
	// walked), and the link is root's.
	assert.Equal(t, os.FileMode(0o644), modeOf(t, filepath.Join(ws, "moved", "f")))
	for _, p := range []string{ws, filepath.Join(ws, "moved"), filepath.Join(ws, "sub")} {
		var st unix.Stat_t
		require.NoError(t, unix.Lstat(p, &st))
		assert.Equal(t, uint32(0), st.Uid, "%s owned by root", p)
	}
}

// TestACLReap: a proxy killed with SIGKILL under the ACL fallback never
// runs Close; the next start finds its journal unlocked and puts the
// entries, modes and owners back. The child (this test binary again)
// grants, says so and waits to be killed.
func TestACLReap(t *testing.T) {
	if dir := os.Getenv("MCPGUARD_TEST_ACL_CHILD"); dir != "" {
		state, ws, _ := strings.Cut(dir, "\n")
		j, err := openJournal(state)
		require.NoError(t, err)
		grantOrSkip(t, j, ws)
		os.Stdout.WriteString("granted\n")
		time.Sleep(time.Minute)
		return
	}
	ws, _ := aclTree(t)
	state := filepath.Join(t.TempDir(), "state")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestACLReap$")
	cmd.Env = append(os.Environ(), "MCPGUARD_TEST_ACL_CHILD="+state+"\n"+ws)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.Contains(line, "SKIP") || strings.Contains(line, "no POSIX ACLs") {
		cmd.Wait()
		t.Skip(line)
	}
	require.Equal(t, "granted\n", line)
	var st unix.Stat_t
	require.NoError(t, unix.Stat(ws, &st))
	require.Equal(t, uint32(Nobody), st.Uid, "ws is lent while the child lives")

	n, err := reapJournals(state)
	require.NoError(t, err)
	assert.Zero(t, n, "a live proxy's journal is not reaped")

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	n, err = reapJournals(state)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	for _, p := range []string{ws, filepath.Join(ws, "sub"), filepath.Join(ws, "sub", "f"), filepath.Join(ws, "secret")} {
		_, err := xattr(p)
		assert.ErrorIs(t, err, unix.ENODATA, "%s keeps an ACL", p)
		require.NoError(t, unix.Stat(p, &st))
		assert.Equal(t, [2]uint32{0, 0}, [2]uint32{st.Uid, st.Gid}, "%s owned by root", p)
	}
	assert.Equal(t, os.FileMode(0o700), modeOf(t, ws))
	assert.Equal(t, os.FileMode(0o600), modeOf(t, filepath.Join(ws, "secret")))
	ents, err := os.ReadDir(state)
	require.NoError(t, err)
	assert.Empty(t, ents, "the journal is removed")
}
