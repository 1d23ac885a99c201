package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// GitArgs are the options a test's git runs with wherever it runs: any
// repository is safe (the guarded server is another user than the one who
// made it), and commits have an author.
var GitArgs = []string{"-c", "safe.directory=*", "-c", "user.name=a", "-c", "user.email=a@b"}

// GitEnv is the environment a test's git runs with: home, no system
// configuration, the system's PATH.
func GitEnv(home string) []string {
	return []string{"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "PATH=/usr/bin:/bin"}
}

// GitPath is git's path; it skips tb where there is no git.
func GitPath(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("git")
	if err != nil {
		tb.Skip("no git here")
	}
	return path
}

// Git runs git in dir (outside any sandbox) and returns its output,
// failing tb on an error. It skips tb where there is no git.
func Git(tb testing.TB, home, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command(GitPath(tb), append(append(append([]string{}, GitArgs...), "-C", dir), args...)...)
	cmd.Env = GitEnv(home)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("git %v: %v: %s", args, err, out)
	}
	return string(out)
}

// GitRepos makes a repository with one commit (a.txt, on main) at each
// dir.
func GitRepos(tb testing.TB, home string, dirs ...string) {
	tb.Helper()
	for _, d := range dirs {
		Git(tb, home, filepath.Dir(d), "init", "-q", "-b", "main", d)
		if err := os.WriteFile(filepath.Join(d, "a.txt"), []byte(d+"\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
		Git(tb, home, d, "add", "a.txt")
		Git(tb, home, d, "commit", "-qm", "one")
	}
}
