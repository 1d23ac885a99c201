package clients

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Transports.
const (
	Stdio = "stdio"
	HTTP  = "http"
	SSE   = "sse"
)

// Server is one entry of a configuration file.
type Server struct {
	Name string
	// Scope is the file's scope, or "local <project>" for Claude Code's
	// per-project entries in ~/.claude.json.
	Scope string
	// Key is the path of keys from the document's root to the entry.
	Key       []string
	Transport string
	Command   string
	Args      []string
	Env       map[string]string
	// EnvFile is a file of NAME=VALUE lines the client loads into the
	// server's environment (VS Code's and Cursor's envFile), as written.
	EnvFile  string
	Cwd      string
	URL      string
	Disabled bool
	// Guarded is set when the command is `mcpguard run ... -- CMD`; Inner is
	// then CMD with its arguments.
	Guarded bool
	Inner   []string
	// Problem is why mcpguard cannot wrap this entry, "" when it can.
	Problem string

	loc entryLoc
}

// span is a byte range [start, end) of a document.
type span struct{ start, end int }

// entryLoc is where one entry's command and args are in its document.
type entryLoc struct {
	command  span
	args     span
	hasArgs  bool
	elems    []span // the args array's elements
	insertAt int    // without args: where the args member goes ...
	insertFn func(array string) string
	// dup is set when the entry names command or args twice: what a
	// client would read is then not clear, and mcpguard leaves it alone.
	dup string
}

// region is the part of the document an edit of this entry changes:
// from the first of its command and args to the last.
func (l entryLoc) region() span {
	r := l.command
	if l.hasArgs {
		r.start, r.end = min(r.start, l.args.start), max(r.end, l.args.end)
	} else {
		r.start, r.end = min(r.start, l.insertAt), max(r.end, l.insertAt)
	}
	return r
}

// fill sets the Server's fields from the entry's decoded value m, as the
// client reads them.
func (s *Server) fill(client string, m map[string]any) {
	str := func(k string) string { v, _ := m[k].(string); return v }
	s.Command, s.Cwd, s.EnvFile = str("command"), str("cwd"), str("envFile")
	typ := strings.ToLower(str("type"))
	if b, ok := m["disabled"].(bool); ok {
		s.Disabled = b
	}
	if b, ok := m["enabled"].(bool); ok && !b {
		s.Disabled = true
	}
	switch {
	case str("httpUrl") != "": // Gemini CLI's Streamable HTTP
		s.Transport, s.URL = HTTP, str("httpUrl")
	case str("serverUrl") != "": // Windsurf
		s.Transport, s.URL = HTTP, str("serverUrl")
	case str("url") != "":
		s.Transport, s.URL = HTTP, str("url")
		if typ == SSE || client == Gemini && typ == "" {
			s.Transport = SSE
		}
	case typ != "" && typ != Stdio && s.Command == "":
		s.Transport = typ
	default:
		s.Transport = Stdio
	}
	if args, ok := m["args"]; ok {
		list, ok := args.([]any)
		for _, a := range list {
			if v, isStr := a.(string); isStr {
				s.Args = append(s.Args, v)
			} else {
				ok = false
			}
		}
		if !ok {
			s.Problem = "its args are not a list of strings"
		}
	}
	if env, ok := m["env"].(map[string]any); ok {
		s.Env = map[string]string{}
		for k, v := range env {
			s.Env[k] = fmt.Sprint(v)
		}
	}
	s.Guarded, s.Inner = guardedCommand(s.Command, s.Args)
	if s.Problem == "" {
		s.Problem = s.problem()
	}
}

func (s *Server) problem() string {
	switch {
	case s.loc.dup != "":
		return "it names " + s.loc.dup + " twice"
	case s.Transport != Stdio:
		return fmt.Sprintf("a %s server: mcpguard wraps stdio servers (serve HTTP ones through `mcpguard gateway`, docs/gateway.md)", s.Transport)
	case s.Command == "":
		return "no command"
	}
	return ""
}

// guardedCommand reports whether command args is `mcpguard run ... -- CMD`
// (a binary whose name starts with mcpguard: mcpguard.exe, a build named
// for its version), and returns CMD with its arguments.
func guardedCommand(command string, args []string) (bool, []string) {
	base := filepath.Base(filepath.ToSlash(command))
	if !strings.HasPrefix(base, "mcpguard") || len(args) == 0 || args[0] != "run" {
		return false, nil
	}
	i := slices.Index(args, "--")
	if i < 0 {
		return true, nil
	}
	return true, slices.Clone(args[i+1:])
}

// Argv is the server's command line: Command, then Args.
func (s Server) Argv() []string {
	return append([]string{s.Command}, s.Args...)
}

// quote renders s as a string both JSON and TOML read back as s: JSON's
// escapes, with every control character (DEL too, which TOML refuses
// bare) as \u00XX.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
