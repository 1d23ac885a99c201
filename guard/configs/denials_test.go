package configs

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/audit"
)

// hostTree makes dirs under a temporary root and returns a replacer that
// moves the tests' absolute paths below it: a denial's advice depends on
// what the host has (a missing directory has no policy line).
func hostTree(t *testing.T, dirs ...string) *strings.Replacer {
	t.Helper()
	root := t.TempDir()
	var pairs []string
	for _, d := range dirs {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
		top := "/" + strings.Split(d, "/")[0] + "/"
		if !slices.Contains(pairs, top) {
			pairs = append(pairs, top, root+top)
		}
	}
	return strings.NewReplacer(pairs...)
}

func TestDenialsFromStderr(t *testing.T) {
	r := hostTree(t, "data/state", "srv/conf", "p/node_modules/@modelcontextprotocol/sdk/server")
	require.NoError(t, os.WriteFile(r.Replace("/data/state/memory.jsonl.tmp"), nil, 0o600))
	require.NoError(t, os.WriteFile(r.Replace("/p/node_modules/@modelcontextprotocol/sdk/server/mcp.js"), nil, 0o644))
	stderr := []byte(r.Replace(`node:internal/modules/esm/resolve:283
Error [ERR_MODULE_NOT_FOUND]: Cannot find module '/p/node_modules/@modelcontextprotocol/sdk/server/mcp.js' imported from /p/node_modules/@x/y/dist/index.js
Error: EACCES: permission denied, open '/data/state/memory.jsonl.tmp'
Error: EACCES: permission denied, mkdir '/data/out'
PermissionError: [Errno 13] Permission denied: '/srv/conf/settings.ini'
Error: connect EACCES 10.0.0.7:443
Error: EACCES: permission denied, open '/data/state/memory.jsonl.tmp'
`))
	ds := Denials(nil, stderr, 10)
	require.Len(t, ds, 5, "%+v", ds)
	assert.Equal(t, Denial{Kind: "open", Target: r.Replace("/p/node_modules/@modelcontextprotocol/sdk/server/mcp.js"), From: "server stderr",
		Allow: `"runtime": {"read": ["` + r.Replace("/p/node_modules/@modelcontextprotocol/sdk") + `"]}`}, ds[0])
	assert.Equal(t, "open", ds[1].Kind)
	assert.Contains(t, ds[1].Allow, r.Replace(`"filesystem": {"read": ["/data/state"]}`))
	assert.Equal(t, "write", ds[2].Kind)
	assert.Equal(t, `"filesystem": {"write": ["`+strings.TrimSuffix(r.Replace("/data/"), "/")+`"]}`, ds[2].Allow)
	assert.Equal(t, r.Replace("/srv/conf/settings.ini"), ds[3].Target)
	assert.Equal(t, Denial{Kind: "connect", Target: "10.0.0.7:443", From: "server stderr",
		Allow: `"network": {"allow": [{"host": "10.0.0.7", "ports": [443]}]}`}, ds[4])
	assert.Len(t, Denials(nil, stderr, 2), 2, "at most max")
}

func TestDenialsFromKernel(t *testing.T) {
	ev := []audit.Event{
		{Layer: "L3", Decision: audit.Deny, Rule: "exec.denied", Target: "/usr/bin/curl"},
		{Layer: "L3", Decision: audit.Deny, Rule: "file.open_denied", Target: "/home/u/.npmrc", Reason: "npm opened /home/u/.npmrc for read outside the policy's roots"},
		{Layer: "L1", Decision: audit.Deny, Rule: "path.outside_roots", Target: "/etc/passwd"},
	}
	ds := Denials(ev, []byte("Error: EACCES: permission denied, open '/home/u/.npmrc'\n"), 10)
	require.Len(t, ds, 2, "L3 kernel events only, and each target once")
	assert.Equal(t, Denial{Kind: "exec", Target: "/usr/bin/curl", From: "kernel", Allow: `"runtime": {"exec": ["/usr/bin/curl"]}`}, ds[0])
	assert.Equal(t, "kernel", ds[1].From)
	out := ExplainExit("ebpf", ds)
	assert.Contains(t, out, "under L3 (ebpf)")
	assert.Contains(t, out, `allow: "runtime": {"exec": ["/usr/bin/curl"]}`)
	assert.Contains(t, ExplainExit("landlock", nil), "No denial was observed")
}

// TestDenialsWithoutAGrant: refusals no policy line can lift say so,
// rather than propose a grant that does not help (a program or a
// protected name in a write root) or one that should never be given
// (a system directory, which a server can name on its stderr: red team;
// the shared /tmp).
func TestDenialsWithoutAGrant(t *testing.T) {
	ev := []audit.Event{
		{Layer: "L3", Decision: audit.Deny, Rule: "file.executable_denied", Target: "/ws/node_modules/.bin/jest"},
		{Layer: "L3", Decision: audit.Deny, Rule: "file.protected_denied", Target: "/ws/.git/hooks/pre-commit"},
	}
	r := hostTree(t, "srv/data")
	ds := Denials(ev, []byte("PermissionError: [Errno 13] Permission denied: '/etc/cron.d/backup'\nError: EACCES: permission denied, mkdir '"+r.Replace("/srv/data/x")+"'\n"+
		"Error: EROFS: read-only file system, open '/tmp/tmp.js'\n"), 10)
	require.Len(t, ds, 5, "%+v", ds)
	assert.Contains(t, ds[4].Allow, "no policy line: /tmp is shared by every user and job", "the shared /tmp is not proposed (issue 33: servers given it were killed; $TMPDIR is theirs)")
	assert.Equal(t, "program", ds[0].Kind)
	assert.Contains(t, ds[0].Allow, "no policy line")
	assert.Equal(t, "protected", ds[1].Kind)
	assert.Contains(t, ds[1].Allow, "no policy line")
	assert.Contains(t, ds[2].Allow, "/etc/cron.d is a system directory")
	assert.NotContains(t, ds[2].Allow, `"write"`)
	assert.Equal(t, r.Replace(`"filesystem": {"write": ["/srv/data"]}`), ds[3].Allow, "other directories as before")
}

// TestDenialsOfWrappers: what a browser's wrapper script and launcher
// print when a program is refused (issue 33's matrix, run 2), and a
// directory the host lacks, which no grant can help.
func TestDenialsOfWrappers(t *testing.T) {
	sh, err := exec.LookPath("uname")
	require.NoError(t, err)
	ds := Denials(nil, []byte("/usr/bin/chromium: 9: exec: /usr/lib/chromium/chromium: Permission denied\n"+
		"/etc/chromium.d/dev-shm: uname: Permission denied\n"+
		"[1:1:ERROR:launch.cc(1)] posix_spawn /usr/lib/chromium/chrome_crashpad_handler: Permission denied (13)\n"+
		"Error: EACCES: permission denied, mkdir '/nonexistent-mcpguard/Downloads/x'\n"), 10)
	require.Len(t, ds, 4, "%+v", ds)
	assert.Equal(t, Denial{Kind: "exec", Target: "/usr/lib/chromium/chromium", From: "server stderr", Allow: `"runtime": {"exec": ["/usr/lib/chromium/chromium"]}`}, ds[0])
	assert.Equal(t, sh, ds[1].Target)
	assert.Equal(t, "exec", ds[1].Kind)
	assert.Equal(t, "/usr/lib/chromium/chrome_crashpad_handler", ds[2].Target)
	assert.Contains(t, ds[3].Allow, "no policy line: /nonexistent-mcpguard/Downloads does not exist on this host")
}

// TestDenialsNeverProposeSecrets: what a server prints cannot make the
// advice grant the home, a system directory, the home's settings roots or
// a key store, however the path is spelled or linked (red team 5: the
// proposed "read": ["/root"] and ["/etc"] let it read 0600 files).
func TestDenialsNeverProposeSecrets(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, d := range []string{".config/app", ".ssh", "proj"} {
		require.NoError(t, os.MkdirAll(filepath.Join(home, d), 0o755))
	}
	link := filepath.Join(t.TempDir(), "etc-link")
	require.NoError(t, os.Symlink("/etc", link))
	for _, line := range []string{
		"Error: EACCES: permission denied, open '" + home + "/.bashrc'",
		"Error: EACCES: permission denied, open '/etc/app.conf'",
		"Error: EACCES: permission denied, open '//etc/ssl/private/x.key'",
		"Error: EACCES: permission denied, open '/./etc/x'",
		"Error: EACCES: permission denied, open '" + link + "/shadow'",
		"Error: EACCES: permission denied, open '" + home + "/.config/settings.json'",
		"Error: EACCES: permission denied, open '" + home + "/.ssh/id_rsa'",
		"Error: EACCES: permission denied, open '" + home + "/.ssh/evil.py'",
		"Error: EROFS: read-only file system, open '" + home + "/.config/x.json'",
	} {
		ds := Denials(nil, []byte(line+"\n"), 1)
		require.Len(t, ds, 1, line)
		assert.True(t, strings.HasPrefix(ds[0].Allow, "no policy line"), "%s: %s", line, ds[0].Allow)
	}
	ws := filepath.Join(home, "proj")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755))
	for _, line := range []string{
		"Error: EROFS: read-only file system, open '" + ws + "/.git/hooks/pre-commit'",
		"Error: connect EACCES 169.254.169.254:80",
	} {
		ds := Denials(nil, []byte(line+"\n"), 1)
		require.Len(t, ds, 1, line)
		assert.True(t, strings.HasPrefix(ds[0].Allow, "no policy line"), "%s: %s", line, ds[0].Allow)
	}
	ds := Denials(nil, []byte("Error: EACCES: permission denied, open '"+home+"/.config/app/settings.json'\n"), 1)
	require.Len(t, ds, 1)
	assert.Equal(t, `"filesystem": {"write": ["`+home+`/.config/app"]}`, ds[0].Allow,
		"a program's own settings directory is fine")
}

// TestDenialsOfUnixSockets: Chromium's refused socket() and node's refused
// connect to a socket path say that no policy line helps under Landlock
// (issue 33's matrix: playwright failed with nothing said).
func TestDenialsOfUnixSockets(t *testing.T) {
	ds := Denials(nil, []byte("[123:123:FATAL:platform_channel.cc(52)] Check failed: . socket() failed: Permission denied (13)\n"+
		"Error: connect EACCES /run/postgresql/.s.PGSQL.5432\n"), 10)
	require.Len(t, ds, 2, "%+v", ds)
	assert.Equal(t, Denial{Kind: "unix", Target: "AF_UNIX socket", From: "server stderr", Allow: allowLine("unix", "")}, ds[0])
	assert.Equal(t, "/run/postgresql/.s.PGSQL.5432", ds[1].Target)
	assert.Contains(t, ds[0].Allow, "cannot run under C-landlock or C-full-landlock here; use C-app, or a BPF LSM config")
}

// TestDenialsOfPrograms: the ways real servers report a program they could
// not start, and a refused connect to loopback, from issue 33's matrix.
func TestDenialsOfPrograms(t *testing.T) {
	ds := Denials(nil, []byte("Error: spawn /bin/sh EACCES\n"+
		"bash: ./run.py: /usr/bin/python3: bad interpreter: Permission denied\n"+
		"/usr/bin/chromium: 1: sh: Permission denied\n"+
		"Error: connect ECONNREFUSED 127.0.0.1:5432\n"), 10)
	require.Len(t, ds, 4, "%+v", ds)
	assert.Equal(t, `"runtime": {"exec": ["/bin/sh"]}`, ds[0].Allow)
	assert.Equal(t, `"runtime": {"exec": ["/usr/bin/python3"]}`, ds[1].Allow)
	assert.Equal(t, "exec", ds[2].Kind)
	assert.True(t, filepath.IsAbs(ds[2].Target), "sh looked up in PATH: %q", ds[2].Target)
	assert.Contains(t, ds[3].Allow, `"network": {"allow": [{"host": "127.0.0.1", "ports": [5432]}]}`)
	assert.Contains(t, ds[3].Allow, "namespace of its own")
}

func FuzzDenials(f *testing.F) {
	f.Add([]byte("Error: EACCES: permission denied, open '/x/y'\nconnect EPERM [::1]:80"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, d := range Denials(nil, b, 5) {
			if d.Target == "" || d.Allow == "" {
				t.Fatalf("empty denial %+v", d)
			}
		}
	})
}
