package configs

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mcpguard/mcpguard/guard/audit"
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
	// ring buffer) or "server stderr" (what the server printed; Landlock
	// without kernel audit access tells no one).
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
		if e.Layer != "L3" || e.Decision != audit.Deny {
			continue
		}
		kind := "open"
		switch {
		case strings.Contains(e.Rule, "exec"):
			kind = "exec"
		case strings.Contains(e.Rule, "net"):
			kind = "connect"
		case strings.Contains(e.Reason, "for write"), strings.Contains(e.Rule, "write"), strings.Contains(e.Rule, "protected"):
			kind = "write"
		}
		add(Denial{Kind: kind, Target: e.Target, From: "kernel"})
	}
	for _, m := range stderrDenial.FindAllSubmatch(stderr, -1) {
		kind, target := "open", ""
		for i, name := range stderrDenial.SubexpNames() {
			if len(m[i]) == 0 {
				continue
			}
			switch name {
			case "write":
				kind = "write"
			case "exec":
				kind = "exec"
			case "conn":
				kind = "connect"
			case "path", "mod", "conn_target", "epath", "spath":
				target = string(m[i])
			}
		}
		if kind != "connect" && !filepath.IsAbs(target) {
			continue
		}
		add(Denial{Kind: kind, Target: target, From: "server stderr"})
	}
	return out
}

// stderrDenial matches the refusals interpreters print: node's "EACCES:
// permission denied, open '/x'" and "Cannot find module '/x'", Python's
// "PermissionError: [Errno 13] Permission denied: '/x'", a shell's
// "cat: /x: Permission denied", a refused connect "connect EACCES 1.2.3.4:443".
var stderrDenial = regexp.MustCompile(
	`(?:E(?:ACCES|PERM): (?:permission denied|operation not permitted), (?:(?P<write>mkdir|rename|unlink|rmdir|copyfile)|(?P<exec>spawn)|open|scandir|stat|lstat|access|realpath|readlink|opendir) '(?P<path>[^']+)')` +
		`|(?:Cannot find (?:module|package) '(?P<mod>/[^']+)')` +
		`|(?:\[Errno (?:13|1)\] (?:Permission denied|Operation not permitted): '(?P<epath>[^']+)')` +
		`|(?:(?P<conn>connect) E(?:ACCES|PERM|CONNREFUSED) (?P<conn_target>[0-9a-fA-F.:\[\]]+))` +
		`|(?:: (?:cannot (?:open|create) |can't (?:open|create) )?(?P<spath>/[^:\n]+): Permission denied)`)

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
		return fmt.Sprintf(`"network": {"allow": [{"host": %q, "ports": [%s]}]}`, host, port)
	case "write":
		return fmt.Sprintf(`"filesystem": {"write": [%q]}`, dataRoot(target))
	}
	if runtime.IsCode(target) {
		return fmt.Sprintf(`"runtime": {"read": [%q]}`, runtime.CodeRoot(target))
	}
	return fmt.Sprintf(`"filesystem": {"read": [%q]}   (or "runtime": {"read": [...]} if it is code the server loads)`, dataRoot(target))
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
