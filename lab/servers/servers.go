// Package servers is the registry of the benchmark's MCP servers: for each
// name, how to start it. Go servers (testdata/servers/<name>) are built with
// `go build` into a caller-chosen directory; Python servers
// (testdata/servers/py/<name>/server.py) run under python3 and JavaScript
// servers (testdata/servers/js/<name>/server.js) under node.
//
// Every server is started with the same flags, so a server never depends on
// an environment variable that an L1 environment allow-list could strip
// (which would "block" an attack by accident):
//
//	--ws DIR            workspace root
//	--sink-tcp H:P      the harness's TCP sink (attacker endpoint, 127.0.0.1)
//	--sink-udp H:P      the harness's UDP sink (attacker endpoint, 127.0.0.1)
//	--marker-dir DIR    where a forbidden exec leaves its marker
//	--weather-url URL   the weather HTTP API (a legitimate endpoint, 127.0.0.2)
//	--timeout-scale F   stretches the server's own time bounds (only when not 1)
//
// The same values are also in the environment (MCP_WS, MCP_SINK_TCP,
// MCP_SINK_UDP, MCP_MARKER_DIR, MCP_WEATHER_URL); see testdata/servers/README.md.
package servers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpguard/mcpguard/lab/corpus/tools"
)

// Lang is the language a server is written in.
type Lang string

// Languages of the corpus.
const (
	Go     Lang = "go"
	Python Lang = "python"
	JS     Lang = "js"
)

// Server is one row of the registry.
type Server struct {
	Name string
	Lang Lang
	// Path is relative to the repository root: the Go package directory,
	// or the Python / JavaScript script.
	Path string
	// Malicious is documentation only: the harness never trusts it, oracles decide.
	Malicious bool
	// Fixture, when set, prepares the workspace before the server starts,
	// as the harness (outside any sandbox): what a user would have there
	// already (the git servers' repository; a server may not create a
	// .git under L3).
	Fixture func(ctx context.Context, ws string) error
}

// gitFixture makes the git servers' demo repository in ws.
func gitFixture(ctx context.Context, ws string) error {
	g, err := tools.NewGit(ws)
	if err != nil {
		return err
	}
	// The case's own deadline (ctx) bounds it; a commit under emulation
	// with other cases running can take longer than a server's 10 s.
	g.Timeout = 2 * time.Minute
	return g.InitFixture(ctx)
}

// registry is the table of servers. Keep it sorted by language, then name.
// The Go-servers helper adds Go rows; the harness owner adds py/js rows.
func registry() []Server {
	return []Server{
		// Go servers (mcp-go), testdata/servers/<name>/.
		{Name: "careless", Lang: Go, Path: "testdata/servers/careless", Malicious: true},
		{Name: "env", Lang: Go, Path: "testdata/servers/env"},
		{Name: "env-trojan", Lang: Go, Path: "testdata/servers/env-trojan", Malicious: true},
		{Name: "filesystem", Lang: Go, Path: "testdata/servers/filesystem"},
		{Name: "fs-exfil", Lang: Go, Path: "testdata/servers/fs-exfil", Malicious: true},
		{Name: "fs-naive", Lang: Go, Path: "testdata/servers/fs-naive"},
		{Name: "fs-trojan", Lang: Go, Path: "testdata/servers/fs-trojan", Malicious: true},
		{Name: "git", Lang: Go, Path: "testdata/servers/git", Fixture: gitFixture},
		{Name: "git-trojan", Lang: Go, Path: "testdata/servers/git-trojan", Malicious: true, Fixture: gitFixture},
		{Name: "netx", Lang: Go, Path: "testdata/servers/netx", Malicious: true},
		{Name: "notes", Lang: Go, Path: "testdata/servers/notes"},
		{Name: "notes-trojan", Lang: Go, Path: "testdata/servers/notes-trojan", Malicious: true},
		{Name: "shell", Lang: Go, Path: "testdata/servers/shell"},
		{Name: "shell-trojan", Lang: Go, Path: "testdata/servers/shell-trojan", Malicious: true},
		{Name: "sqlite", Lang: Go, Path: "testdata/servers/sqlite"},
		{Name: "sqlite-startup", Lang: Go, Path: "testdata/servers/sqlite-startup", Malicious: true},
		{Name: "weather", Lang: Go, Path: "testdata/servers/weather"},
		{Name: "weather-daemon", Lang: Go, Path: "testdata/servers/weather-daemon", Malicious: true},
		{Name: "evasion", Lang: Go, Path: "testdata/servers/evasion", Malicious: true},
		{Name: "jobs", Lang: Go, Path: "testdata/servers/jobs"},
		{Name: "jobs-trojan", Lang: Go, Path: "testdata/servers/jobs-trojan", Malicious: true},

		// Python servers (standard library only), testdata/servers/py/<name>/server.py.
		{Name: "py-notes", Lang: Python, Path: "testdata/servers/py/notes/server.py"},
		{Name: "py-reader-trojan", Lang: Python, Path: "testdata/servers/py/reader-trojan/server.py", Malicious: true},
		{Name: "py-spawner", Lang: Python, Path: "testdata/servers/py/spawner/server.py", Malicious: true},

		// JavaScript servers (plain node, no npm deps), testdata/servers/js/<name>/server.js.
		{Name: "js-workspace", Lang: JS, Path: "testdata/servers/js/workspace/server.js"},
		{Name: "js-env-leak", Lang: JS, Path: "testdata/servers/js/env-leak/server.js", Malicious: true},
		{Name: "js-shell-trojan", Lang: JS, Path: "testdata/servers/js/shell-trojan/server.js", Malicious: true},
		{Name: "js-fetch-exfil", Lang: JS, Path: "testdata/servers/js/fetch-exfil/server.js", Malicious: true},
		{Name: "js-keys-trojan", Lang: JS, Path: "testdata/servers/js/keys-trojan/server.js", Malicious: true},
		{Name: "js-protocol", Lang: JS, Path: "testdata/servers/js/protocol/server.js", Malicious: true},
	}
}

// ErrUnknown is returned for a name that is not in the registry.
var ErrUnknown = errors.New("unknown server")

// Names lists every registered server, in registry order.
func Names() []string {
	var names []string
	for _, s := range registry() {
		names = append(names, s.Name)
	}
	return names
}

// Lookup returns the registry row for name.
func Lookup(name string) (Server, error) {
	for _, s := range registry() {
		if s.Name == name {
			return s, nil
		}
	}
	return Server{}, fmt.Errorf("%w %q", ErrUnknown, name)
}

// Command returns the argv that starts server name, without the per-case
// flags (see Flags). Go servers are built into binDir when their binary is
// not there yet; call Build first to build them all in one go build.
func Command(ctx context.Context, name, binDir string) ([]string, error) {
	s, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	root, err := Root()
	if err != nil {
		return nil, err
	}
	switch s.Lang {
	case Go:
		bin := filepath.Join(binDir, s.Name)
		if _, err := os.Stat(bin); err != nil {
			if err := Build(ctx, binDir, s.Name); err != nil {
				return nil, err
			}
		}
		return []string{bin}, nil
	case Python:
		py, err := python()
		if err != nil {
			return nil, err
		}
		// -B: no __pycache__ written into the repository.
		return []string{py, "-B", "-u", filepath.Join(root, s.Path)}, nil
	case JS:
		node, err := exec.LookPath("node")
		if err != nil {
			return nil, fmt.Errorf("server %s needs node: %w", name, err)
		}
		return []string{node, filepath.Join(root, s.Path)}, nil
	}
	return nil, fmt.Errorf("server %s: unknown language %q", name, s.Lang)
}

// Addrs are the per-case values every server is started with.
type Addrs struct {
	WS, SinkTCP, SinkUDP, MarkerDir, WeatherURL string
	// TimeoutScale stretches the server's own time bounds (a git command,
	// a program it runs, an HTTP request) as the harness's are; 0 or 1:
	// as written.
	TimeoutScale float64
}

// Flags returns the flags every server gets (appended to Command's argv).
func Flags(a Addrs) []string {
	f := []string{
		"--ws", a.WS,
		"--sink-tcp", a.SinkTCP,
		"--sink-udp", a.SinkUDP,
		"--marker-dir", a.MarkerDir,
		"--weather-url", a.WeatherURL,
	}
	if a.TimeoutScale > 0 && a.TimeoutScale != 1 {
		f = append(f, "--timeout-scale", strconv.FormatFloat(a.TimeoutScale, 'g', -1, 64))
	}
	return f
}

// Env returns the same values as environment variables.
func Env(a Addrs) []string {
	return []string{
		"MCP_WS=" + a.WS,
		"MCP_SINK_TCP=" + a.SinkTCP,
		"MCP_SINK_UDP=" + a.SinkUDP,
		"MCP_MARKER_DIR=" + a.MarkerDir,
		"MCP_WEATHER_URL=" + a.WeatherURL,
	}
}

// Build compiles the named Go servers (all Go servers when names is empty)
// into binDir with one `go build`, so the build cache and both cores are
// used once. Non-Go names are ignored. It holds a lock file in binDir, so
// concurrent callers (parallel tests) build once and then see the binaries.
func Build(ctx context.Context, binDir string, names ...string) error {
	root, err := Root()
	if err != nil {
		return err
	}
	var pkgs []string
	for _, s := range registry() {
		if s.Lang != Go || (len(names) > 0 && !slices.Contains(names, s.Name)) {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, s.Path)); err != nil {
			return fmt.Errorf("build server %s: %w", s.Name, err)
		}
		pkgs = append(pkgs, "./"+filepath.ToSlash(s.Path))
	}
	if len(pkgs) == 0 {
		return nil
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return fmt.Errorf("build servers: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(binDir, ".build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("build servers: %w", err)
	}
	defer lock.Close()
	unlock, err := lockFile(lock)
	if err != nil {
		return fmt.Errorf("build servers: lock: %w", err)
	}
	defer unlock()

	abs, err := filepath.Abs(binDir)
	if err != nil {
		return fmt.Errorf("build servers: %w", err)
	}
	// go build -o DIR/ with several main packages writes one binary per
	// package, named after its directory: the registry name must match.
	args := append([]string{"build", "-o", abs + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build servers: %w\n%s", err, out)
	}
	return nil
}

// Root returns the repository root: $MCPGUARD_ROOT when set, else the first
// directory upward from the working directory holding this module's go.mod.
func Root() (string, error) {
	if r := os.Getenv("MCPGUARD_ROOT"); r != "" {
		return r, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/mcpguard/mcpguard\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find repository root: no mcpguard go.mod above the working directory (set MCPGUARD_ROOT)")
		}
		dir = parent
	}
}

// python returns the interpreter for Python servers. The system python3 is
// preferred over a PATH shim (pyenv's shims are shell scripts, which would
// make an exec allow-list see bash instead of python).
func python() (string, error) {
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		return "", fmt.Errorf("python servers need python3: %w", err)
	}
	return p, nil
}
