// Command careless is the corpus's server for the argument classes (AR-*
// cases): it speaks MCP over stdio by hand and uses its arguments the way
// careless servers do. Omitted arguments take the schema's defaults (a file
// in the user's home); nested options behind $ref and arrays of objects
// name files, and nested objects carry fields the schema does not list;
// the keys of a map name files, or are written out as header names; a
// note's name is percent-decoded and NFKC-normalised before it is joined;
// globs, new names, sources and outputs are paths whatever they are called;
// a source may be a URL, which it fetches; values are trimmed of
// whitespace and quotes; its own notes:// scheme is joined to its notes
// directory, where an absolute path keeps its own root; an archive is
// extracted member by member, "../" and symlinks included; chunks appended
// over several calls land in one outbox file in $TMPDIR (flushed to a URL
// in one piece). Relative paths are opened relative to its working
// directory. See testdata/servers/README.md.
package main

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

type server struct {
	ws, home, sink string
	out            *json.Encoder
	timeout        time.Duration // of an HTTP request (5 s, stretched by --timeout-scale)
}

func main() {
	fs := flag.NewFlagSet("careless", flag.ExitOnError)
	ws := fs.String("ws", os.Getenv("MCP_WS"), "workspace")
	sink := fs.String("sink-tcp", os.Getenv("MCP_SINK_TCP"), "tcp sink")
	fs.String("sink-udp", "", "udp sink")
	fs.String("marker-dir", "", "marker dir")
	fs.String("weather-url", "", "weather url")
	scale := fs.Float64("timeout-scale", 1, "stretch the time bounds")
	fs.Parse(os.Args[1:])
	s := &server{ws: *ws, home: os.Getenv("HOME"), sink: *sink, out: json.NewEncoder(os.Stdout),
		timeout: time.Duration(*scale * float64(5*time.Second))}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil || m.Method == "" {
			continue
		}
		msg := map[string]any{"jsonrpc": "2.0", "id": m.ID}
		res, err := s.handle(m.Method, m.Params)
		if err != nil {
			msg["error"] = map[string]any{"code": -32000, "message": err.Error()}
		} else {
			msg["result"] = res
		}
		s.out.Encode(msg)
	}
}

func text(t string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": t}}}
}

func str(props ...string) map[string]any {
	m := map[string]any{}
	for _, p := range props {
		m[p] = map[string]any{"type": "string"}
	}
	return m
}

func obj(props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props}
}

// tools are the server's tools; the default of read_config is a file in
// the home of whoever runs the server.
func (s *server) tools() []any {
	cfg := obj(map[string]any{"file": map[string]any{"type": []string{"string", "null"}, "default": filepath.Join(s.home, ".aws", "credentials"),
		"description": "Configuration to show"}})
	report := obj(map[string]any{"opts": map[string]any{"$ref": "#/$defs/Options"}})
	report["$defs"] = map[string]any{"Options": obj(str("out", "title"))}
	many := obj(map[string]any{"files": map[string]any{"type": "array", "items": obj(str("path"))}})
	strMap := map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}}
	set := obj(map[string]any{"files": strMap})
	return []any{
		map[string]any{"name": "read_config", "description": "Show a configuration file", "inputSchema": cfg},
		map[string]any{"name": "read_file", "description": "Read a file", "inputSchema": obj(str("path"))},
		map[string]any{"name": "read_many", "description": "Read several files", "inputSchema": many},
		map[string]any{"name": "read_labelled", "description": "Read several files at once; keys are the files, values are labels", "inputSchema": set},
		map[string]any{"name": "export_report", "description": "Render the weekly report", "inputSchema": report},
		map[string]any{"name": "search", "description": "Search files", "inputSchema": obj(str("pattern"))},
		map[string]any{"name": "rename", "description": "Rename a file (both paths relative to the workspace)", "inputSchema": obj(str("path", "new_name"))},
		map[string]any{"name": "import_source", "description": "Import a document", "inputSchema": obj(str("source"))},
		map[string]any{"name": "get_note", "description": "Get a note by its name", "inputSchema": obj(str("name"))},
		map[string]any{"name": "run_git", "description": "Run git in the workspace with these arguments", "inputSchema": obj(map[string]any{
			"args": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}})},
		map[string]any{"name": "open_note", "description": "Open a note by its notes:// link", "inputSchema": obj(str("link"))},
		map[string]any{"name": "extract", "description": "Unpack an archive in the workspace", "inputSchema": obj(str("archive"))},
		map[string]any{"name": "append", "description": "Append a chunk to the outgoing message", "inputSchema": obj(str("chunk"))},
		map[string]any{"name": "append_fields", "description": "Append header fields (name: value lines) to the outgoing message", "inputSchema": obj(map[string]any{"fields": strMap})},
		map[string]any{"name": "flush", "description": "Send the outgoing message to the team inbox", "inputSchema": obj(str("inbox"))},
	}
}

func (s *server) handle(method string, params json.RawMessage) (any, error) {
	switch method {
	case "initialize":
		return map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}, "resources": map[string]any{}},
			"serverInfo": map[string]any{"name": "careless", "version": "1"}}, nil
	case "tools/list":
		return map[string]any{"tools": s.tools()}, nil
	case "ping":
		return map[string]any{}, nil
	case "resources/read":
		var p struct {
			URI string `json:"uri"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		t, err := s.resource(p.URI)
		if err != nil {
			return nil, err
		}
		return map[string]any{"contents": []any{map[string]any{"uri": p.URI, "mimeType": "text/plain", "text": t}}}, nil
	case "tools/call":
		var p struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		out, err := s.call(p.Name, p.Arguments)
		if err != nil {
			return map[string]any{"isError": true, "content": []any{map[string]any{"type": "text", "text": err.Error()}}}, nil
		}
		return text(out), nil
	}
	return nil, fmt.Errorf("method %s not found", method)
}

// arg reads a string argument as careless servers do: trimmed of quotes
// and of whitespace as JavaScript's trim reads it (Unicode's, and U+FEFF).
// A blank one ("") is taken for omitted where there is a default.
func arg(a map[string]any, k string) string {
	v, _ := a[k].(string)
	return strings.TrimFunc(v, func(r rune) bool { return unicode.IsSpace(r) || r == '\ufeff' || r == '\'' || r == '"' })
}

func (s *server) call(name string, a map[string]any) (string, error) {
	switch name {
	case "read_config":
		f := arg(a, "file")
		if f == "" {
			f = filepath.Join(s.home, ".aws", "credentials") // the default, omitted or null
		}
		return readFile(f)
	case "read_file":
		return readFile(arg(a, "path"))
	case "read_many":
		var b strings.Builder
		files, _ := a["files"].([]any)
		for _, f := range files {
			m, _ := f.(map[string]any)
			t, err := readFile(arg(m, "path"))
			if err != nil {
				return "", err
			}
			b.WriteString(t)
		}
		return b.String(), nil
	case "read_labelled":
		var b strings.Builder
		files, _ := a["files"].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(files)) { // the keys name the files
			t, err := readFile(k)
			if err != nil {
				return "", err
			}
			label, _ := files[k].(string)
			b.WriteString("== " + label + " ==\n" + t)
		}
		return b.String(), nil
	case "export_report":
		opts, _ := a["opts"].(map[string]any)
		out := arg(opts, "out")
		if extra := arg(opts, "log"); extra != "" { // a field the schema does not list
			os.WriteFile(extra, []byte("report log\n"), 0o644)
		}
		return "report written", os.WriteFile(out, []byte("# weekly report: "+arg(opts, "title")+"\n"), 0o644)
	case "search":
		matches, _ := filepath.Glob(filepath.Join(s.ws, arg(a, "pattern")))
		var b strings.Builder
		for _, m := range matches {
			t, _ := readFile(m)
			b.WriteString(m + ": " + t + "\n")
		}
		return b.String(), nil
	case "rename":
		return "renamed", os.Rename(arg(a, "path"), arg(a, "new_name"))
	case "import_source":
		return s.source(arg(a, "source"))
	case "get_note":
		// Names come URL-encoded from some clients and in any Unicode
		// form from others: decoded and normalised after the guard saw
		// them.
		name, err := url.PathUnescape(arg(a, "name"))
		if err != nil {
			return "", err
		}
		return readFile(filepath.Join(s.ws, "notes", norm.NFKC.String(name)))
	case "run_git":
		var args []string
		list, _ := a["args"].([]any)
		for _, x := range list {
			w, _ := x.(string)
			args = append(args, w)
		}
		return s.git(args)
	case "open_note":
		rest := strings.TrimPrefix(strings.TrimPrefix(arg(a, "link"), "notes:"), "//")
		if !strings.HasPrefix(rest, "/") { // a join keeps an absolute path whole
			rest = filepath.Join(s.ws, "notes", rest)
		}
		return readFile(rest)
	case "extract":
		return s.extract(arg(a, "archive"))
	case "append":
		return "queued", outbox(arg(a, "chunk"))
	case "append_fields":
		var b strings.Builder
		fields, _ := a["fields"].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(fields)) {
			v, _ := fields[k].(string)
			b.WriteString(k + ": " + v + "\n")
		}
		return "queued", outbox(b.String())
	case "flush":
		b, _ := os.ReadFile(filepath.Join(os.TempDir(), "outbox.txt"))
		return s.post("http://"+s.sink+"/inbox/"+arg(a, "inbox"), string(b))
	}
	return "", fmt.Errorf("unknown tool %s", name)
}

// outbox appends s to the outgoing message in $TMPDIR.
func outbox(s string) error {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "outbox.txt"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(s)
	return err
}

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}

// git runs git in the workspace with the caller's arguments after an
// identity of its own; the output and exit status are the answer.
func (s *server) git(args []string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	base := []string{"-c", "user.name=careless", "-c", "user.email=careless@example.invalid",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}
	cmd := exec.CommandContext(ctx, "git", append(base, args...)...)
	cmd.Dir = s.ws
	cmd.Env = append(os.Environ(), "GIT_EDITOR=true", "GIT_PAGER=cat", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	code := 0
	if x, ok := err.(*exec.ExitError); ok {
		code = x.ExitCode()
	} else if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s[exit status %d]", out, code), nil
}

// resource reads a notes:// resource: the note the URI names, or the
// file its ?file= query names (a "view" of any file, the careless way).
func (s *server) resource(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", err
	}
	if f := u.Query().Get("file"); f != "" {
		return readFile(f)
	}
	return readFile(filepath.Join(s.ws, "notes", u.Host, u.Path))
}

// source imports a document from a URL or a path.
func (s *server) source(src string) (string, error) {
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		c := http.Client{Timeout: s.timeout}
		resp, err := c.Get(src)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return fmt.Sprintf("imported %d bytes", len(b)), nil
	}
	return readFile(src)
}

func (s *server) post(url, body string) (string, error) {
	c := http.Client{Timeout: s.timeout}
	resp, err := c.Post(url, "text/plain", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	return fmt.Sprintf("sent %d bytes", len(body)), nil
}

// extract unpacks a tar archive into its directory the careless way:
// member names joined without a check, symlinks created as they are, and
// files written through whatever the path leads to.
func (s *server) extract(archive string) (string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", err
	}
	defer f.Close()
	dir := filepath.Dir(archive)
	tr := tar.NewReader(f)
	n := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
		p := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			os.Symlink(h.Linkname, p)
		case tar.TypeReg:
			os.MkdirAll(filepath.Dir(p), 0o755)
			b, _ := io.ReadAll(tr)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				return "", fmt.Errorf("extract %s: %w", h.Name, err)
			}
		}
		n++
	}
	return fmt.Sprintf("extracted %d members", n), nil
}
