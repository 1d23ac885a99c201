//go:build linux

package namefs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard/launch"
	"github.com/mcpguard/mcpguard/guard/namefs"
	"github.com/mcpguard/mcpguard/lab/attack"
)

func mount(t *testing.T, dir string) (*namefs.Server, func() []string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE needs root")
	}
	return mountB(t, dir)
}

// mountB mounts the supervised view over dir (tests and benchmarks).
func mountB(t testing.TB, dir string) (*namefs.Server, func() []string) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no FUSE here: %v", err)
	}
	var mu sync.Mutex
	var denied []string
	s, err := namefs.Mount(dir, namefs.Options{Protected: launch.IsProtected, Denied: func(_ namefs.Refusal, p, op string) {
		mu.Lock()
		denied = append(denied, op+" "+p)
		mu.Unlock()
	}})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), denied...)
	}
}

// TestNames: every route to every protected entry is refused through the
// mount; the evidence is the real directory after unmounting.
func TestNames(t *testing.T) {
	ws := t.TempDir()
	cases, err := attack.NameCases(ws)
	require.NoError(t, err)
	s, denied := mount(t, ws)
	step := attack.Steps()["name"]
	for _, st := range attack.NameSteps(cases) {
		_, arg, _ := strings.Cut(st, ":")
		err := step(arg)
		assert.Error(t, err, st)
	}
	assert.NotEmpty(t, denied())
	require.NoError(t, s.Close())
	for _, c := range cases {
		assert.False(t, attack.HasPayload(c.Path), "payload at %s", c.Path)
	}
}

// TestBenign: what a server does in its workspace works through the mount:
// files made, written, appended, renamed over, truncated, chmodded,
// linked symbolically, removed; directories made and removed; a git
// commit in an existing repository (objects, refs, the index, all by
// rename); new entries belong to the caller.
func TestBenign(t *testing.T) {
	ws := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "src"), 0o755))
	git, gitErr := exec.LookPath("git")
	if gitErr == nil {
		out, err := exec.Command(git, "init", "-q", filepath.Join(ws, "repo")).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	mount(t, ws)
	p := func(s string) string { return filepath.Join(ws, s) }
	require.NoError(t, os.WriteFile(p("src/a.txt"), []byte("one\n"), 0o644))
	f, err := os.OpenFile(p("src/a.txt"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("two\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.WriteFile(p("src/.a.txt.tmp"), []byte("atomic\n"), 0o600))
	require.NoError(t, os.Rename(p("src/.a.txt.tmp"), p("src/a.txt")))
	require.NoError(t, os.Truncate(p("src/a.txt"), 3))
	require.NoError(t, os.Chmod(p("src/a.txt"), 0o640))
	require.NoError(t, os.Symlink("a.txt", p("src/link")))
	b, err := os.ReadFile(p("src/link"))
	require.NoError(t, err)
	assert.Equal(t, "ato", string(b))
	require.NoError(t, os.MkdirAll(p("build/x/y"), 0o755))
	require.NoError(t, os.RemoveAll(p("build")))
	ents, err := os.ReadDir(p("src"))
	require.NoError(t, err)
	assert.Len(t, ents, 2)
	fi, err := os.Stat(p("src/a.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
	require.NoError(t, os.Chmod(p("src/a.txt"), 0o640|os.ModeSetuid))
	fi, err = os.Stat(p("src/a.txt"))
	require.NoError(t, err)
	assert.Zero(t, fi.Mode()&os.ModeSetuid, "set-id bits are stripped")
	if gitErr == nil {
		repo := p("repo")
		require.NoError(t, os.WriteFile(filepath.Join(repo, "f.txt"), []byte("x\n"), 0o644))
		for _, args := range [][]string{{"add", "f.txt"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"}, {"log", "--oneline"}} {
			cmd := exec.Command(git, append([]string{"-C", repo}, args...)...)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "git %v: %s", args, out)
		}
	}
	var st unix.Stat_t
	require.NoError(t, unix.Stat(p("src/a.txt"), &st))
	assert.Equal(t, uint32(os.Getuid()), st.Uid)
}

// TestExecutables: no route leaves a program (a regular file with an
// execute bit, holding the payload) in the write root: made executable,
// chmodded, fchmodded, mknodded, an O_TMPFILE linked in, an existing one
// moved onto a shim's name, an existing one written or truncated. The
// evidence is the real directory after unmounting; unguarded, every
// route leaves one (the baseline).
func TestExecutables(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE needs root")
	}
	step := attack.Steps()["plantexec"]
	t.Run("baseline", func(t *testing.T) {
		ws := t.TempDir()
		cases, err := attack.ExecCases(ws)
		require.NoError(t, err)
		for _, c := range cases {
			// one route per fresh case: the write routes share a file
			_, arg, _ := strings.Cut(attack.ExecSteps([]attack.NameCase{{Path: c.Path, Routes: c.Routes[:1]}})[0], ":")
			require.NoError(t, step(arg))
			assert.True(t, attack.HasProgram(c.Path), "unguarded, %s", arg)
		}
	})
	ws := t.TempDir()
	cases, err := attack.ExecCases(ws)
	require.NoError(t, err)
	s, denied := mount(t, ws)
	steps := attack.ExecSteps(cases)
	for _, st := range steps {
		_, arg, _ := strings.Cut(st, ":")
		assert.Error(t, step(arg), st)
	}
	// Data beside them is still written, and a program may lose its bit.
	require.NoError(t, os.WriteFile(filepath.Join(ws, "bin", "notes.txt"), []byte("x\n"), 0o644))
	require.NoError(t, os.Chmod(filepath.Join(ws, "bin", "build.sh"), 0o644))
	assert.NotEmpty(t, denied(), "refusals reported")
	require.NoError(t, s.Close())
	for _, c := range cases {
		assert.False(t, attack.HasProgram(c.Path), "program at %s", c.Path)
	}
}
