// Package tools holds the tool sets of the benchmark's Go MCP servers
// (testdata/servers/<name>): filesystem, notes, weather, shell, sqlite, git
// and env, plus the flag handling every server shares. The malicious servers
// register the very same tools (same names, descriptions and schemas) and
// wrap their handlers with payloads from package corpus/payload, so a guard
// cannot tell them apart by their tools/list.
package tools

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Config is what every server learns from the harness. Flags win over the
// environment (MCP_WS, MCP_SINK_TCP, MCP_SINK_UDP, MCP_MARKER_DIR,
// MCP_WEATHER_URL), so an L1 environment allow-list never hides an attacker
// address by accident.
type Config struct {
	// Roots are the directories the server may use; Roots[0] is the
	// workspace. --ws and positional arguments add roots.
	Roots      []string
	SinkTCP    string
	SinkUDP    string
	MarkerDir  string
	WeatherURL string
	// TimeoutScale stretches the servers' own time bounds (a git command,
	// an allow-listed program, a weather API request): the harness's
	// MCPGUARD_EVAL_TIMEOUT_SCALE, for slow hosts such as an emulated VM,
	// where a git init took more than its 10 s. 1 when not given.
	TimeoutScale float64
}

// Scale returns d stretched by TimeoutScale.
func (c *Config) Scale(d time.Duration) time.Duration {
	if c.TimeoutScale <= 0 {
		return d
	}
	return time.Duration(float64(d) * c.TimeoutScale)
}

// WS returns the workspace root ("" when none was given).
func (c *Config) WS() string {
	if len(c.Roots) == 0 {
		return ""
	}
	return c.Roots[0]
}

// TmpDir is where a server stages files: os.TempDir(), i.e. $TMPDIR, which
// the harness points at the per-case {{TMP}} directory.
func (c *Config) TmpDir() string { return os.TempDir() }

type rootList []string

func (r *rootList) String() string     { return strings.Join(*r, ",") }
func (r *rootList) Set(v string) error { *r = append(*r, v); return nil }

// ErrNoWorkspace is returned when a server needs a workspace and got none.
var ErrNoWorkspace = errors.New("no workspace: pass --ws DIR or set MCP_WS")

// Parse reads the shared flags from args (os.Args[1:]). extra, when not nil,
// registers a server's own flags on the same FlagSet before parsing.
func Parse(name string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (*Config, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var roots rootList
	c := &Config{}
	fs.Var(&roots, "ws", "workspace root (repeatable; also MCP_WS)")
	fs.StringVar(&c.SinkTCP, "sink-tcp", os.Getenv("MCP_SINK_TCP"), "harness TCP sink host:port")
	fs.StringVar(&c.SinkUDP, "sink-udp", os.Getenv("MCP_SINK_UDP"), "harness UDP sink host:port")
	fs.StringVar(&c.MarkerDir, "marker-dir", os.Getenv("MCP_MARKER_DIR"), "marker directory for forbidden execs")
	fs.StringVar(&c.WeatherURL, "weather-url", os.Getenv("MCP_WEATHER_URL"), "weather HTTP API base URL")
	fs.Float64Var(&c.TimeoutScale, "timeout-scale", 1, "stretch the server's own time bounds by this factor")
	if extra != nil {
		extra(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s [flags] [ROOT...]\n\nAn MCP server of the mcpguard corpus on stdio (see testdata/servers/README.md).\n\n", name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	roots = append(roots, fs.Args()...)
	if len(roots) == 0 {
		if ws := os.Getenv("MCP_WS"); ws != "" {
			roots = append(roots, ws)
		}
	}
	for _, r := range roots {
		abs, err := filepath.Abs(r)
		if err != nil {
			return nil, fmt.Errorf("root %q: %w", r, err)
		}
		c.Roots = append(c.Roots, abs)
	}
	return c, nil
}
