package main

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/guard/runtime"
)

// argRoot is a filesystem root that a path on a server's own command line
// asks for: the server was told to work there (a filesystem server's
// directory, a database file), so it is data the server reads and writes.
type argRoot struct {
	Arg  string // the argument as written
	Root string // the directory (or file) to grant
}

// systemTrees are never data roots, whatever an argument names: the
// runtime resolver grants what a server needs of them read-only.
var systemTrees = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var/lib", "/opt"}

// argumentRoots reads a server's command line (argv[0] is the program) for
// absolute paths, "~/..." included and "--flag=/path" too, and proposes a
// root for each: a directory itself; a file's directory, since servers
// write beside their files (a SQLite journal, a temporary file renamed
// over the original), or the file alone when its directory is the home
// directory or /; for a path that does not exist yet, its directory when
// that exists. Code the server runs (scripts, packages) and system trees
// are never proposed.
func argumentRoots(argv []string, home string) []argRoot {
	var out []argRoot
	seen := map[string]bool{}
	for _, a := range argv[min(1, len(argv)):] {
		v := a
		if strings.HasPrefix(v, "-") {
			_, after, ok := strings.Cut(v, "=")
			if !ok {
				continue
			}
			v = after
		}
		if strings.HasPrefix(v, "~/") && home != "" {
			v = filepath.Join(home, v[2:])
		}
		if !filepath.IsAbs(v) {
			continue
		}
		v = filepath.Clean(v)
		root := rootFor(v, home)
		if root == "" || seen[root] {
			continue
		}
		seen[root] = true
		out = append(out, argRoot{Arg: a, Root: root})
	}
	return out
}

func rootFor(p, home string) string {
	if runtime.IsCode(p) || p == "/" || isSystem(p) {
		return ""
	}
	fi, err := os.Stat(p)
	switch {
	case err == nil && fi.IsDir():
		if p == home {
			return "" // the whole home is never proposed from an argument
		}
		return p
	case err == nil && fi.Mode().IsRegular():
		if fi.Mode()&0o111 != 0 {
			return "" // a program: runtime, not data
		}
	case err != nil:
		if d, derr := os.Stat(filepath.Dir(p)); derr != nil || !d.IsDir() {
			return ""
		}
	default:
		return ""
	}
	if d := filepath.Dir(p); d != "/" && d != home && !isSystem(d) {
		return d
	}
	return p
}

func isSystem(p string) bool {
	return slices.ContainsFunc(systemTrees, func(t string) bool { return p == t || strings.HasPrefix(p, t+"/") })
}

// argDest is a network destination a server's own command line names: a
// database's DSN, a service URL.
type argDest struct {
	Arg  string // the argument, its password removed
	Rule policy.NetRule
}

// defaultPorts are the ports of the schemes servers take DSNs in, for a
// URL that names none.
var defaultPorts = map[string]int{
	"postgres": 5432, "postgresql": 5432, "mysql": 3306, "mariadb": 3306, "redis": 6379, "rediss": 6379,
	"mongodb": 27017, "amqp": 5672, "nats": 4222, "http": 80, "https": 443, "ws": 80, "wss": 443,
}

// argumentDestinations reads a server's command line for URLs with a host
// (also "--flag=URL"): what the server was told to connect to (issue 33's
// matrix: server-postgres's DSN, reached only on the first call, was
// refused under L3 with nothing proposed). A loopback name is marked
// Private, as the operator's own statement.
func argumentDestinations(argv []string) []argDest {
	var out []argDest
	for _, a := range argv[min(1, len(argv)):] {
		v := a
		if strings.HasPrefix(v, "-") {
			if _, after, ok := strings.Cut(v, "="); ok {
				v = after
			}
		}
		u, err := url.Parse(v)
		if err != nil || u.Scheme == "" || u.Hostname() == "" || !strings.Contains(v, "://") {
			continue
		}
		port := defaultPorts[strings.ToLower(u.Scheme)]
		if p := u.Port(); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				continue
			}
			port = n
		}
		if port == 0 {
			continue
		}
		r := policy.NetRule{Host: u.Hostname(), Ports: []int{port}}
		if u.Hostname() == "localhost" {
			r.Private = true
		}
		out = append(out, argDest{Arg: u.Redacted(), Rule: r})
	}
	return out
}
