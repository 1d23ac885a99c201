// Package clients reads and edits the MCP server configurations of the
// clients people already use (Claude Desktop, Claude Code, Cursor, VS Code,
// Windsurf, Gemini CLI, Codex): where each keeps them, the servers they
// list, and the one edit mcpguard makes to them, putting `mcpguard run` in
// front of a stdio server's command and taking it away again.
//
// Each format is read with a parser made for it (JSON with comments:
// tailscale/hujson; TOML: go-toml's unstable parser, which gives byte
// ranges), and every edit is a splice of the bytes of one server's command
// and args: comments, key order, whitespace and the rest of the file stay
// as they were, byte for byte.
package clients

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
)

// Format is how a configuration file is written.
type Format int

// Formats.
const (
	// JSON is JSON, with comments and trailing commas where the client
	// allows them (comments: VS Code, Cursor, Gemini CLI; trailing commas:
	// VS Code, not Gemini CLI); an edit adds neither.
	JSON Format = iota
	// TOML is Codex's config.toml.
	TOML
)

func (f Format) String() string {
	if f == TOML {
		return "toml"
	}
	return "json"
}

// Client names.
const (
	ClaudeDesktop = "claude-desktop"
	ClaudeCode    = "claude-code"
	Cursor        = "cursor"
	VSCode        = "vscode"
	Windsurf      = "windsurf"
	Gemini        = "gemini"
	Codex         = "codex"
)

// Names lists the clients this package knows, in the order they are shown.
func Names() []string {
	return []string{ClaudeDesktop, ClaudeCode, Cursor, VSCode, Windsurf, Gemini, Codex}
}

// File is one configuration file of one client.
type File struct {
	Client string
	// Scope is "user" or "project" (the file's own scope; Claude Code's
	// ~/.claude.json also holds per-project "local" servers, whose Server.Scope
	// says so).
	Scope  string
	Path   string
	Format Format
	// Containers are the key paths from the document's root to the objects
	// (tables) that hold one entry per server; "*" matches any key.
	Containers [][]string
}

// Env is where the configurations are looked for: the user's home, the
// project directory, the operating system, and the variables that move
// them (XDG_CONFIG_HOME, APPDATA, CLAUDE_CONFIG_DIR, CODEX_HOME).
type Env struct {
	Home, Project, GOOS string
	Getenv              func(string) string
}

// HostEnv is Env for this process: $HOME, the working directory, this
// system.
func HostEnv() (Env, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return Env{}, err
	}
	wd, err := os.Getwd()
	if err != nil {
		return Env{}, err
	}
	return Env{Home: home, Project: wd, GOOS: runtime.GOOS, Getenv: os.Getenv}, nil
}

func (e Env) getenv(k string) string {
	if e.Getenv == nil {
		return ""
	}
	return e.Getenv(k)
}

// userConfig is the platform's per-user configuration directory (what
// os.UserConfigDir says on that system), computed for e.
func (e Env) userConfig() string {
	switch e.GOOS {
	case "windows":
		if d := e.getenv("APPDATA"); d != "" {
			return d
		}
		return filepath.Join(e.Home, "AppData", "Roaming")
	case "darwin", "ios":
		return filepath.Join(e.Home, "Library", "Application Support")
	}
	if d := e.getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return d
	}
	return filepath.Join(e.Home, ".config")
}

var (
	mcpServers = [][]string{{"mcpServers"}}
	vsServers  = [][]string{{"servers"}}
)

// Files lists every configuration file each client may read, for env,
// whether or not it exists. The project's files come after the user's.
func Files(e Env) []File {
	cfg := e.userConfig()
	claudeJSON := filepath.Join(e.Home, ".claude.json")
	if d := e.getenv("CLAUDE_CONFIG_DIR"); d != "" {
		claudeJSON = filepath.Join(d, ".claude.json")
	}
	codexHome := filepath.Join(e.Home, ".codex")
	if d := e.getenv("CODEX_HOME"); d != "" {
		codexHome = d
	}
	vsUser := filepath.Join(cfg, "Code", "User")
	fs := []File{
		{ClaudeDesktop, "user", filepath.Join(cfg, "Claude", "claude_desktop_config.json"), JSON, mcpServers},
		{ClaudeCode, "user", claudeJSON, JSON, [][]string{{"mcpServers"}, {"projects", "*", "mcpServers"}}},
		{Cursor, "user", filepath.Join(e.Home, ".cursor", "mcp.json"), JSON, mcpServers},
		{VSCode, "user", filepath.Join(vsUser, "mcp.json"), JSON, vsServers},
		{VSCode, "user", filepath.Join(vsUser, "settings.json"), JSON, [][]string{{"mcp", "servers"}}},
		{Windsurf, "user", filepath.Join(e.Home, ".codeium", "windsurf", "mcp_config.json"), JSON, mcpServers},
		{Gemini, "user", filepath.Join(e.Home, ".gemini", "settings.json"), JSON, mcpServers},
		{Codex, "user", filepath.Join(codexHome, "config.toml"), TOML, [][]string{{"mcp_servers"}}},
	}
	if e.Project == "" {
		return fs
	}
	p := e.Project
	return append(fs,
		File{ClaudeCode, "project", filepath.Join(p, ".mcp.json"), JSON, mcpServers},
		File{Cursor, "project", filepath.Join(p, ".cursor", "mcp.json"), JSON, mcpServers},
		File{VSCode, "project", filepath.Join(p, ".vscode", "mcp.json"), JSON, vsServers},
		File{Gemini, "project", filepath.Join(p, ".gemini", "settings.json"), JSON, mcpServers},
		File{Codex, "project", filepath.Join(p, ".codex", "config.toml"), TOML, [][]string{{"mcp_servers"}}},
	)
}

// Found is a configuration file that exists, with what it holds.
type Found struct {
	File
	Data    []byte
	Servers []Server
	// Err is why the file could not be read or parsed; the others are
	// still listed.
	Err error
}

// Discover reads every file of Files(e) that exists. A file that cannot be
// parsed is returned with its error, never dropped.
func Discover(e Env) []Found {
	var out []Found
	seen := map[string]bool{}
	for _, f := range Files(e) {
		if seen[f.Path] {
			continue // the project is the home directory
		}
		b, err := os.ReadFile(f.Path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		seen[f.Path] = true
		fd := Found{File: f, Data: b, Err: err}
		if err == nil {
			fd.Servers, fd.Err = Parse(f, b)
		}
		out = append(out, fd)
	}
	return out
}
