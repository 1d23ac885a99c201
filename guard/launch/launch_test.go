//go:build linux

package launch_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/landlock/ruleset"
	"github.com/mcpguard/mcpguard/guard/launch"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestServerUser(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		uid, gid uint32
		err      error
	}{
		{"configured", map[string]string{launch.UserEnv: "1000:1001", "SUDO_UID": "2000", "SUDO_GID": "2000"}, 1000, 1001, nil},
		{"sudo caller", map[string]string{"SUDO_UID": "1000", "SUDO_GID": "100"}, 1000, 100, nil},
		{"sudo by root is nobody", map[string]string{"SUDO_UID": "0", "SUDO_GID": "0"}, launch.Nobody, launch.Nobody, nil},
		{"nothing: nobody, never root", nil, launch.Nobody, launch.Nobody, nil},
		{"configured root refused", map[string]string{launch.UserEnv: "0:0"}, 0, 0, launch.ErrRootServer},
		{"configured garbage", map[string]string{launch.UserEnv: "nobody"}, 0, 0, launch.ErrBadSpec},
		{"configured overflow", map[string]string{launch.UserEnv: "4294967295:1"}, 0, 0, launch.ErrBadSpec},
		{"sudo garbage is an error, not root", map[string]string{"SUDO_UID": "bob", "SUDO_GID": "100"}, 0, 0, launch.ErrBadSpec},
		{"sudo half set", map[string]string{"SUDO_UID": "1000"}, 0, 0, launch.ErrBadSpec},
		{"sudo caller with gid 0", map[string]string{"SUDO_UID": "1000", "SUDO_GID": "0"}, 0, 0, launch.ErrRootServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uid, gid, err := launch.ServerUser(env(tc.env))
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []uint32{tc.uid, tc.gid}, []uint32{uid, gid})
		})
	}
}

func TestNewSpec(t *testing.T) {
	ws := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".git", "config"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".envrc"), nil, 0o644))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(ws, ".bashrc")))

	sp, err := launch.NewSpec(1000, env(nil), []string{ws})
	require.NoError(t, err)
	assert.Equal(t, launch.Spec{}, sp, "a non-root proxy has nothing to drop")

	sp, err = launch.NewSpec(0, env(map[string]string{launch.UserEnv: "65534:65534"}), []string{ws})
	require.NoError(t, err)
	assert.True(t, sp.Namespaces)
	assert.Equal(t, uint32(65534), sp.UID)
	assert.Equal(t, []string{filepath.Join(ws, ".git")}, sp.Pin)
	assert.ElementsMatch(t, []string{filepath.Join(ws, ".envrc"), filepath.Join(ws, ".git", "config"), filepath.Join(ws, ".git", "hooks")}, sp.ReadOnly,
		"a symlinked start-up file is not followed")
}

// TestProtectNested: repositories and start-up files below the top of a
// write root are protected too (a write root holding several projects),
// symlinks are not followed, and nothing inside .git but its config and
// hooks is bound.
func TestProtectNested(t *testing.T) {
	ws := t.TempDir()
	mk := func(p string) string {
		p = filepath.Join(ws, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, nil, 0o644))
		return p
	}
	cfgA := mk("a/.git/config")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "a", ".git", "hooks"), 0o755))
	mk("a/.git/objects/ab/cdef")
	mk("a/.git/modules/sub/.envrc") // inside .git: not walked
	cfgB := mk("deep/x/y/b/.git/config")
	gitfile := mk("a/sub/.git") // a submodule's gitdir: pointer
	envrc := mk("deep/x/.envrc")
	keys := mk("home/.ssh/authorized_keys")
	mk("other/authorized_keys") // not under .ssh
	mk("a/src/main.go")
	require.NoError(t, os.Symlink(filepath.Join(ws, "a", ".git"), filepath.Join(ws, "link-git")))
	// Submodules' git directories (a name with a slash, a nested one) and
	// a linked worktree's config.worktree: git obeys them as it does the
	// top .git's; read-only with modules and worktrees as a whole.
	for _, sub := range []string{"a/.git/modules/sub", "a/.git/modules/libs/foo", "a/.git/modules/sub/modules/inner"} {
		mk(sub + "/HEAD")
		mk(sub + "/config")
		require.NoError(t, os.MkdirAll(filepath.Join(ws, sub, "hooks"), 0o755))
	}
	mk("a/.git/modules/libs/README") // a name level, not a git directory
	mk("a/.git/worktrees/feature/config.worktree")
	mk("a/.git/worktrees/feature/HEAD")
	// Everything else in a .git but git's data: info, description, the
	// object store's alternates (not its packs list or its objects).
	exclude := mk("a/.git/info/exclude")
	desc := mk("a/.git/description")
	alt := mk("a/.git/objects/info/alternates")
	mk("a/.git/objects/info/packs")
	mk("a/.git/HEAD")
	mk("a/.git/refs/heads/main")
	mk("a/.git/index")
	require.NoError(t, os.Symlink("/tmp", filepath.Join(ws, "a", ".git", "commondir"))) // a symlink: not bound

	pin, ro, complete := launch.Protect([]string{ws})
	assert.True(t, complete)
	assert.ElementsMatch(t, []string{filepath.Join(ws, "a", ".git"), filepath.Join(ws, "deep/x/y/b/.git")}, pin)
	git := filepath.Join(ws, "a", ".git")
	assert.ElementsMatch(t, []string{cfgA, filepath.Join(git, "hooks"), filepath.Join(git, "modules"), filepath.Join(git, "worktrees"),
		filepath.Dir(exclude), desc, alt, cfgB, gitfile, envrc, keys}, ro)
}

func TestPrepareAndDecode(t *testing.T) {
	cmd := exec.Command("/usr/bin/env", "A=1")
	spec := launch.Spec{UID: 1000, GID: 1000, Namespaces: true, EgressFD: 4,
		Landlock: &ruleset.Rules{Paths: []ruleset.PathRule{{Path: "/usr", Access: ruleset.Read}}}}
	l, err := launch.Prepare(cmd, spec, launch.Options{Self: "/opt/mcpguard"})
	require.NoError(t, err)
	defer l.Close()
	assert.Equal(t, "/opt/mcpguard", cmd.Path)
	assert.Equal(t, []string{"/opt/mcpguard", launch.StageArg}, cmd.Args[:2])
	assert.Equal(t, []string{"/usr/bin/env", "/usr/bin/env", "A=1"}, cmd.Args[3:])
	assert.NotZero(t, cmd.SysProcAttr.Cloneflags)
	got, err := launch.DecodeSpec(cmd.Args[2])
	require.NoError(t, err)
	wd, err := os.Getwd()
	require.NoError(t, err)
	assert.Contains(t, got.Reach, wd, "the server's working directory is reached")
	got.Reach, got.View = nil, nil
	assert.Equal(t, spec, *got)

	for _, bad := range []string{``, `{`, `{"uid":1,"extra":1}`, `{} {}`,
		`{"landlock":{"paths":[{"path":"relative","access":"read"}]}}`} {
		_, err := launch.DecodeSpec(bad)
		assert.ErrorIs(t, err, launch.ErrBadSpec, bad)
	}
}

// TestLauncherFailsClosed: a spec the launcher cannot decode starts
// nothing: exit status ExitCode, the program never ran.
func TestLauncherFailsClosed(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command(os.Args[0], launch.ExecArg, `{"bogus":1}`, "-", "/usr/bin/touch", "touch", marker)
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, launch.ExitCode, ee.ExitCode())
	assert.NoFileExists(t, marker)
}

func TestHardLinks(t *testing.T) {
	root, other := t.TempDir(), t.TempDir()
	secret := filepath.Join(other, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("s"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "single"), []byte("x"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "a", "b"), 0o755))
	require.NoError(t, os.Link(secret, filepath.Join(root, "a", "b", "link")))
	named := filepath.Join(root, "named")
	require.NoError(t, os.Link(secret, named))
	files, complete := launch.HardLinks([]string{root, named})
	assert.True(t, complete)
	assert.Equal(t, []string{filepath.Join(root, "a", "b", "link")}, files, "a root itself is named by the policy")
}

func FuzzDecodeSpec(f *testing.F) {
	f.Add(`{"uid":1000,"gid":1000,"namespaces":true,"seccomp":{}}`)
	f.Add(`{"landlock":{"paths":[{"path":"/usr","access":"read"}]},"seccomp":{"deny_unix":true}}`)
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := launch.DecodeSpec(s)
		if err != nil {
			assert.ErrorIs(t, err, launch.ErrBadSpec)
			return
		}
		require.NotNil(t, sp)
	})
}

// TestProtectSeparateGitDir: a checkout whose .git is a file pointing at a
// git directory of another name inside the write root (git clone
// --separate-git-dir) gets that directory protected as a .git: pinned, its
// config and hooks read-only (red team: core.fsmonitor in its config ran
// on the user's git status). One pointing outside every write root is left
// alone (the server cannot write there).
func TestProtectSeparateGitDir(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	mk := func(p string) string {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("x\n"), 0o644))
		return p
	}
	repo := filepath.Join(ws, "store", "app.git")
	cfg := mk(filepath.Join(repo, "config"))
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "hooks"), 0o755))
	mk(filepath.Join(repo, "HEAD"))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "app"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "app", ".git"), []byte("gitdir: ../store/app.git\n"), 0o644))
	mk(filepath.Join(outside, "o.git", "config"))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "o"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "o", ".git"), []byte("gitdir: "+filepath.Join(outside, "o.git")+"\n"), 0o644))

	pin, ro, complete := launch.Protect([]string{ws})
	assert.True(t, complete)
	real, err := filepath.EvalSymlinks(repo)
	require.NoError(t, err)
	assert.Contains(t, pin, real)
	realCfg, _ := filepath.EvalSymlinks(cfg)
	assert.Contains(t, ro, realCfg)
	assert.Contains(t, ro, filepath.Join(real, "hooks"))
	assert.NotContains(t, ro, filepath.Join(real, "HEAD"), "git's data stays writable")
	for _, p := range append(pin, ro...) {
		assert.NotContains(t, p, outside)
	}
}
