package configs

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/egress"
	"github.com/mcpguard/mcpguard/guard/launch"
	"github.com/mcpguard/mcpguard/guard/pathrules"
	"github.com/mcpguard/mcpguard/guard/runtime"
)

// Denial is one thing L3 denied (or, where the backend cannot say, what
// the server reported as refused), with the policy line that would allow
// it.
type Denial struct {
	// Kind is "open", "write", "exec" or "connect".
	Kind string
	// Target is the path or host:port.
	Target string
	// From says where the denial was seen: "kernel" (the BPF backend's
	// ring buffer, Landlock's audit records), "egress filter" (the
	// server's one way out, package egress) or "server stderr" (what the
	// server printed; Landlock without kernel audit access tells no one).
	From string
	// Allow is the policy line that would allow it.
	Allow string
}

// Denials turns the backend's denials (events from the BPF ring buffer)
// and the server's last stderr into at most max Denials, kernel events
// first, each target once.
func Denials(events []audit.Event, stderr []byte, max int) []Denial {
	var out []Denial
	seen := map[string]bool{}
	add := func(d Denial) {
		k := d.Kind + " " + d.Target
		if seen[k] || len(out) >= max || d.Target == "" {
			return
		}
		seen[k] = true
		d.Allow = allowLine(d.Kind, d.Target)
		out = append(out, d)
	}
	for _, e := range events {
		if d, ok := eventDenial(e); ok {
			add(d)
		}
	}
	for _, d := range textDenials(stderr, "server stderr") {
		add(d)
	}
	return out
}

// eventDenial is the Denial of an L3 audit event (a kernel denial).
func eventDenial(e audit.Event) (Denial, bool) {
	if e.Layer != "L3" || e.Decision != audit.Deny {
		return Denial{}, false
	}
	kind := "open"
	switch {
	case e.Rule == launch.RuleExecutable:
		kind = "program"
	case e.Rule == launch.RuleProtectedName:
		kind = "protected"
	case e.Rule == RuleReportedUnix:
		kind = "unix"
	case strings.Contains(e.Rule, "exec"):
		kind = "exec"
	case strings.Contains(e.Rule, "net"):
		kind = "connect"
	case strings.Contains(e.Reason, "for write"), strings.Contains(e.Rule, "write"), strings.Contains(e.Rule, "protected"):
		kind = "write"
	}
	from := "kernel"
	switch {
	case egress.FromFilter(e):
		from = "egress filter"
	case strings.HasPrefix(e.Rule, "reported."):
		from = "server's own report"
	}
	return Denial{Kind: kind, Target: e.Target, From: from}, true
}

// textDenials reads the refusals a server printed or answered (stderr, a
// tool's error), each as a Denial without its allow line.
func textDenials(b []byte, from string) []Denial {
	var out []Denial
	for _, m := range stderrDenial.FindAllSubmatch(b, -1) {
		kind, target, missing := "open", "", false
		for i, name := range stderrDenial.SubexpNames() {
			if len(m[i]) == 0 {
				continue
			}
			switch name {
			case "nf", "pynf", "gonf":
				missing = true
			case "nfpath", "pynfpath", "gonfpath":
				target = string(m[i])
			case "write", "rofs", "pyrofs", "shrofs", "gowrite", "gorofs":
				kind = "write"
			case "exec":
				kind = "exec"
			case "sppath", "bipath", "expath", "pspath":
				kind, target = "exec", string(m[i])
			case "shcmd", "srccmd":
				kind = "exec"
				if p, err := exec.LookPath(string(m[i])); err == nil {
					target = p
				}
			case "conn":
				kind = "connect"
			case "unixsock":
				kind, target = "unix", "AF_UNIX socket"
			case "usock":
				kind, target = "unix", string(m[i])
			case "path", "mod", "conn_target", "epath", "spath", "rpath", "ropath", "gpath":
				target = string(m[i])
			}
		}
		if kind != "connect" && kind != "unix" && !filepath.IsAbs(target) {
			continue
		}
		src := from
		if kind == "open" && !missing && created(target) {
			kind = "write"
		}
		if kind == "write" && launch.IsProtected(target) {
			kind = "protected" // no grant lifts it (red team 5: .git/hooks)
		}
		if missing {
			var ok bool
			if kind, ok = hidden(target); !ok {
				continue
			}
			src += ", hidden from the server"
		}
		out = append(out, Denial{Kind: kind, Target: target, From: src})
	}
	return out
}

// hidden tells a path the server did not find, but the guard's host has,
// from one that does not exist: an existing file was hidden from an open
// ("open"), a file to create in an existing directory from a write
// ("write").
func hidden(p string) (kind string, ok bool) {
	if _, err := os.Lstat(p); err == nil {
		return "open", true
	}
	if fi, err := os.Stat(filepath.Dir(p)); err == nil && fi.IsDir() {
		return "write", true
	}
	return "", false
}

// created tells a refused open of a path that does not exist from a read:
// the kernel answers a read of a missing file ENOENT whatever the rules,
// so a permission error for one whose directory exists was a create.
func created(p string) bool {
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		return false
	}
	fi, err := os.Stat(filepath.Dir(p))
	return err == nil && fi.IsDir()
}

// stderrDenial matches the refusals interpreters print: node's "EACCES:
// permission denied, open '/x'" (and EROFS, what the launcher's read-only
// mounts answer a write outside the write roots) and "Cannot find module
// '/x'", Python's "PermissionError: [Errno 13] Permission denied: '/x'"
// (and [Errno 30] Read-only file system), a shell's "cat: /x: Permission
// denied", Go's "open /x: permission denied", a refused connect
// "connect EACCES 1.2.3.4:443".
var stderrDenial = regexp.MustCompile(
	`(?:E(?:ACCES|PERM): (?:permission denied|operation not permitted), (?:(?P<write>mkdir|rename|unlink|rmdir|copyfile|symlink|link|chmod|utime)|(?P<exec>spawn)|open|scandir|stat|lstat|access|realpath|readlink|opendir) '(?P<path>[^']+)')` +
		`|(?:(?P<rofs>EROFS): read-only file system, \w+ '(?P<rpath>[^']+)')` +
		`|(?:Cannot find (?:module|package) '(?P<mod>/[^']+)')` +
		`|(?:\[Errno (?:13|1)\] (?:Permission denied|Operation not permitted): '(?P<epath>[^']+)')` +
		`|(?:\[Errno (?P<pyrofs>30)\] Read-only file system: '(?P<ropath>[^']+)')` +
		`|(?:(?P<conn>connect) E(?:ACCES|PERM|CONNREFUSED) (?P<conn_target>[0-9a-fA-F.:\[\]]+))` +
		`|(?:: (?:cannot (?:open|create) |can't (?:open|create) )?(?P<spath>/[^:\n]+): (?:Permission denied|(?P<shrofs>Read-only file system)))` +
		`|(?:(?:open|stat|lstat|(?P<gowrite>mkdir|remove|rename|symlink|link|chmod|truncate)) (?P<gpath>/[^:\n]+): (?:permission denied|operation not permitted|(?P<gorofs>read-only file system)))` +
		// Not found: under a root proxy the launcher's mount namespace
		// hides what the policy does not grant (textDenials keeps only
		// paths that exist on the host).
		`|(?:(?P<nf>ENOENT): no such file or directory, \w+ '(?P<nfpath>/[^']+)')` +
		`|(?:\[Errno (?P<pynf>2)\] No such file or directory: '(?P<pynfpath>/[^']+)')` +
		`|(?:(?:open|stat|lstat|mkdir) (?P<gonfpath>/[^:\n]+): (?P<gonf>no such file or directory))` +
		// Programs refused: node's "spawn /bin/sh EACCES", a kernel's
		// "bad interpreter: Permission denied" for a #! line, a shell
		// script's "SCRIPT: LINE: CMD: Permission denied" (CMD looked up
		// in PATH: 13-server matrix, issue 33).
		`|(?:spawn (?P<sppath>/[^ \n]+) E(?:ACCES|PERM))` +
		`|(?:(?P<bipath>/[^: \n]+): bad interpreter: Permission denied)` +
		`|(?:: [0-9]+: (?P<shcmd>[A-Za-z0-9_.+-]+): Permission denied)` +
		// dash's "exec: /x: Permission denied" (a wrapper script's exec
		// line), a sourced file's "FILE: CMD: Permission denied" and
		// Chromium's "posix_spawn /x: Permission denied (13)".
		`|(?:exec: (?P<expath>/[^:\n]+): Permission denied)` +
		`|(?:/[^: \n]+: (?P<srccmd>[A-Za-z0-9_.+-]+): Permission denied)` +
		`|(?:posix_spawn (?P<pspath>/[^: \n]+): Permission denied)` +
		// Unix sockets, which a Landlock config's seccomp filter refuses
		// outright before ABI 9: Chromium's "socket() failed: Permission
		// denied (13)" (issue 33's matrix), node's "connect EACCES /path".
		`|(?:(?P<unixsock>socket)\(\) failed: (?:Permission denied|Operation not permitted))` +
		`|(?:connect E(?:ACCES|PERM) (?P<usock>/[^ \n]+))`)

// allowLine is the policy line that would allow one denial. Code (what an
// interpreter loads) is a runtime grant; anything else is data, for the
// filesystem section, which L1 checks tool arguments against too.
func allowLine(kind, target string) string {
	switch kind {
	case "exec":
		return fmt.Sprintf(`"runtime": {"exec": [%q]}`, target)
	case "connect":
		host, port, err := net.SplitHostPort(target)
		if err != nil {
			return fmt.Sprintf(`"network": {"allow": [{"host": %q}]}`, target)
		}
		if ip := net.ParseIP(host); ip != nil && (ip.IsLinkLocalUnicast() || ip.IsUnspecified() || ip.IsMulticast()) {
			return fmt.Sprintf("no policy line: %s is a link-local, unspecified or multicast address (169.254.169.254 is a cloud's metadata service, which hands out the machine's credentials), never granted on a server's word", host)
		}
		line := fmt.Sprintf(`"network": {"allow": [{"host": %q, "ports": [%s]}]}`, host, port)
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			// Under L3 the server's loopback is its own: a service on the
			// host's is reached only through a rule (issue 33's matrix:
			// postgres on 127.0.0.1 failed with nothing said).
			line += "   (under L3 the server has a network namespace of its own: the host's " + host + " is reached only through this rule)"
		}
		return line
	case "unix":
		return "no policy line under a Landlock config on this kernel: its seccomp filter refuses unix sockets outright (Landlock judges them by path only from ABI 9), so a server that needs them (a browser such as Chromium) cannot run under C-landlock or C-full-landlock here; use C-app, or a BPF LSM config (C-full: a kernel with BPF LSM, or mcpguard vm)"
	case "program":
		return "no policy line: nothing the server writes may be a program (an execute bit, or on Landlock a link to one), so that nothing it leaves runs later as you; a file the policy's write list names itself may be written (docs/l3.md, \"No programs in a write root\")"
	case "protected":
		return "no policy line: a protected name, which your tools run or obey later (.git's config and hooks, .envrc, editor and agent settings: docs/l3.md); a file the policy's write list names itself may be written, never created"
	case "write":
		d := dataRoot(target)
		if missingDir(d) {
			return fmt.Sprintf("no policy line: %s does not exist on this host, and a grant of a missing directory admits nothing; if the server needs it, create it, then grant it with \"filesystem\": {\"write\": [%q]}", d, d)
		}
		if why := UnsafeRoot(d); why != "" {
			return fmt.Sprintf("no policy line: %s is %s, never granted on what a server printed; a server that needs to write there is not one to run under a guard, or needs a directory of its own", d, why)
		}
		if sharedTemp(d) {
			return fmt.Sprintf("no policy line: %s is shared by every user and job (granting it gives the server everyone's temporary files); under L3 the server's $TMPDIR is a directory of its own, made and removed with the session, so a server that writes %s by name rather than through $TMPDIR needs a directory of its own set in its configuration, granted with \"filesystem\": {\"write\": [...]}", d, d)
		}
		return fmt.Sprintf(`"filesystem": {"write": [%q]}`, d)
	}
	d := dataRoot(target)
	if runtime.IsCode(target) {
		d = runtime.CodeRoot(target)
	}
	if missingDir(d) {
		return fmt.Sprintf("no policy line: %s does not exist on this host, and a grant of a missing directory admits nothing (a server looking for an optional directory is usually fine without it)", d)
	}
	if why := UnsafeRoot(d); why != "" {
		return fmt.Sprintf("no policy line: %s is %s, never granted on what a server printed (what servers need of the system the runtime grants already); if the server really needs one file there, decide on that file yourself", d, why)
	}
	if runtime.IsCode(target) {
		return fmt.Sprintf(`"runtime": {"read": [%q]}`, d)
	}
	return fmt.Sprintf(`"filesystem": {"read": [%q]}   (or "runtime": {"read": [...]} if it is code the server loads)`, d)
}

// credentialDirs hold keys and tokens, whoever's home they are in.
var credentialDirs = []string{".ssh", ".gnupg", ".aws", ".kube", ".docker", ".password-store", ".pki", ".azure", ".gcloud", ".git-credentials", ".netrc"}

// UnsafeRoot says why d may never be proposed as a grant (a policy line in
// advice, policy init's --data), or "" when it may: a system directory,
// the root, the home directory or a directory above it, the home's shared
// settings roots (~/.config, ~/.local, ~/.cache: every program's settings,
// mcpguard's policies among them), or a credential store, judged on the
// path as given and as its links resolve (a server names what it likes on
// its stderr: red team 5).
func UnsafeRoot(d string) string {
	home, _ := os.UserHomeDir()
	for _, p := range []string{filepath.Clean(d), realPath(d)} {
		if p == "" {
			continue
		}
		switch {
		case system(p):
			return "a system directory"
		case home == "":
		case p == filepath.Clean(home) || pathrules.Host.Within(home, p):
			return "the home directory (mcpguard's own policies and audit log are there)"
		}
		if home != "" {
			for _, r := range []string{".config", ".local", ".local/share", ".local/state", ".cache"} {
				if p == filepath.Join(home, r) {
					return "a settings root of the home directory, which holds every program's settings"
				}
			}
		}
		for _, c := range strings.Split(p, "/") {
			if slices.Contains(credentialDirs, c) {
				return "a store of keys and tokens"
			}
		}
	}
	return ""
}

// realPath is p with its links resolved, "" when that fails.
func realPath(p string) string {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	return r
}

// missingDir reports whether d does not exist on this host.
func missingDir(d string) bool {
	_, err := os.Stat(d)
	return errors.Is(err, os.ErrNotExist)
}

// system reports whether d is, or is below, a directory of the system
// (what a server's stderr may name to get a grant proposed: red team).
func system(d string) bool {
	for _, s := range []string{"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/boot", "/root", "/var/lib", "/var/spool", "/proc", "/sys", "/dev"} {
		if d == s || strings.HasPrefix(d, s+"/") {
			return true
		}
	}
	return d == "/"
}

// sharedTemp reports whether d is one of the system's shared temporary
// directories (or the proxy's own TMPDIR, where servers' scratches live).
func sharedTemp(d string) bool {
	return d == "/tmp" || d == "/var/tmp" || d == "/dev/shm" || d == filepath.Clean(os.TempDir())
}

// dataRoot is the directory to grant for a data path.
func dataRoot(p string) string {
	d := filepath.Dir(p)
	if d == "/" {
		return p
	}
	return d
}

// ExplainExit is what `run` prints when a server under L3 exits on its
// own: the backend, the first denials seen and the policy line for each,
// or, when none was seen, what to try.
func ExplainExit(backend string, ds []Denial) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mcpguard: the server exited under L3 (%s).", backend)
	if len(ds) == 0 {
		b.WriteString(" No denial was observed")
		if backend == "landlock" {
			b.WriteString(" (Landlock reports denials to no one but the server, as EACCES; mcpguard reads them from the server's stderr)")
		}
		b.WriteString(". If it runs under C0 or C-app, run it with --config C-app to rule out L3, and see docs/policy.md (runtime).\n")
		return b.String()
	}
	b.WriteString(" First denials, and the policy line that would allow each:\n")
	for _, d := range ds {
		fmt.Fprintf(&b, "  %-7s %s  [%s]\n          allow: %s\n", d.Kind, d.Target, d.From, d.Allow)
	}
	b.WriteString("  Runtime grants are read/execute-only and never admit tool arguments; data grants do (docs/policy.md).\n")
	return b.String()
}
