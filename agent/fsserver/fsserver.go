// Package fsserver is a small MCP filesystem server confined to a set of root
// directories. Its tools carry the names and argument names of
// @modelcontextprotocol/server-filesystem (read_file{path},
// write_file{path,content}, list_directory{path}, search_files{path,pattern},
// list_allowed_directories), so the agent can use either server unchanged.
//
// The agent starts it as a subprocess over stdio: as its own binary
// (cmd/fsserver) or by re-executing the current program (see ServeIfChild),
// which spares a `go build` in benchmarks.
package fsserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpguard/mcpguard/lab/corpus/tools"
)

// ErrOutsideRoots is returned for a path that does not resolve inside one of
// the server's roots.
var ErrOutsideRoots = tools.ErrOutsideRoots

// maxSearchResults bounds search_files so one call cannot walk forever.
const maxSearchResults = 1000

// FS resolves paths against its roots. Roots are absolute and symlink-free.
// The confinement is the benchmark filesystem server's strict one
// (lab/corpus/tools), so the two servers cannot drift apart on it.
type FS struct {
	roots  []string
	strict *tools.FS
}

// NewFS checks each root is an existing directory and canonicalises it.
func NewFS(roots ...string) (*FS, error) {
	if len(roots) == 0 {
		return nil, errors.New("fsserver: no root directory given")
	}
	fs := &FS{}
	for _, r := range roots {
		abs, err := filepath.Abs(r)
		if err != nil {
			return nil, fmt.Errorf("root %q: %w", r, err)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, fmt.Errorf("root %q: %w", r, err)
		}
		st, err := os.Stat(real)
		if err != nil {
			return nil, fmt.Errorf("root %q: %w", r, err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("root %q: not a directory", r)
		}
		fs.roots = append(fs.roots, real)
	}
	strict, err := tools.NewFS(fs.roots)
	if err != nil {
		return nil, err
	}
	fs.strict = strict
	return fs, nil
}

// Roots returns the canonical roots.
func (f *FS) Roots() []string { return append([]string(nil), f.roots...) }

// Resolve maps a client path to a real path inside the roots. Relative paths
// are taken relative to the first root. Symlinks are followed before the
// check, so a link pointing out of the roots is refused. For a path that does
// not exist yet (write_file), the part of it that exists must resolve inside.
func (f *FS) Resolve(p string) (string, error) { return f.strict.Resolve(p) }

// New returns an MCP server exposing fs.
func New(fs *FS) *server.MCPServer {
	s := server.NewMCPServer("mcpguard-fsserver", "0.1.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("read_file",
		mcp.WithDescription("Read the complete contents of a text file. Only works within allowed directories."),
		mcp.WithString("path", mcp.Required(), mcp.Description("Path of the file to read")),
	), fs.readFile)
	s.AddTool(mcp.NewTool("write_file",
		mcp.WithDescription("Create a new file or overwrite an existing file with new content. Only works within allowed directories."),
		mcp.WithString("path", mcp.Required(), mcp.Description("Path of the file to write")),
		mcp.WithString("content", mcp.Required(), mcp.Description("Content to write")),
	), fs.writeFile)
	s.AddTool(mcp.NewTool("list_directory",
		mcp.WithDescription("List files and directories in a path; entries are prefixed [FILE] or [DIR]. Only works within allowed directories."),
		mcp.WithString("path", mcp.Required(), mcp.Description("Directory to list")),
	), fs.listDirectory)
	s.AddTool(mcp.NewTool("search_files",
		mcp.WithDescription("Recursively search for files and directories whose name contains a pattern (case-insensitive). Only works within allowed directories."),
		mcp.WithString("path", mcp.Required(), mcp.Description("Directory to search from")),
		mcp.WithString("pattern", mcp.Required(), mcp.Description("Substring of the names to find")),
	), fs.searchFiles)
	s.AddTool(mcp.NewTool("list_allowed_directories",
		mcp.WithDescription("List the directories this server may access."),
	), fs.listAllowed)
	return s
}

// pathArg returns the call's path argument and where it resolves to, or a
// tool error to answer when it is missing or outside the roots.
func (f *FS) pathArg(req mcp.CallToolRequest) (p, real string, fail *mcp.CallToolResult) {
	p, err := req.RequireString("path")
	if err == nil {
		real, err = f.Resolve(p)
	}
	if err != nil {
		return "", "", mcp.NewToolResultError(err.Error())
	}
	return p, real, nil
}

func (f *FS) readFile(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, real, fail := f.pathArg(req)
	if fail != nil {
		return fail, nil
	}
	data, err := os.ReadFile(real)
	if err != nil {
		return mcp.NewToolResultErrorf("read %s: %v", p, err), nil
	}
	return mcp.NewToolResultText(string(data)), nil
}

func (f *FS) writeFile(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, real, fail := f.pathArg(req)
	if fail != nil {
		return fail, nil
	}
	content, err := req.RequireString("content")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	if err := os.WriteFile(real, []byte(content), 0o644); err != nil {
		return mcp.NewToolResultErrorf("write %s: %v", p, err), nil
	}
	return mcp.NewToolResultText(fmt.Sprintf("Successfully wrote to %s", p)), nil
}

func (f *FS) listDirectory(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, real, fail := f.pathArg(req)
	if fail != nil {
		return fail, nil
	}
	entries, err := os.ReadDir(real)
	if err != nil {
		return mcp.NewToolResultErrorf("list %s: %v", p, err), nil
	}
	var b strings.Builder
	for _, e := range entries {
		kind := "[FILE]"
		if e.IsDir() {
			kind = "[DIR]"
		}
		fmt.Fprintf(&b, "%s %s\n", kind, e.Name())
	}
	return mcp.NewToolResultText(b.String()), nil
}

func (f *FS) searchFiles(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, real, fail := f.pathArg(req)
	if fail != nil {
		return fail, nil
	}
	pattern, err := req.RequireString("pattern")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	pattern = strings.ToLower(pattern)
	var found []string
	errStop := errors.New("stop")
	werr := filepath.WalkDir(real, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable entries are skipped, as the npm server does
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if path != real && strings.Contains(strings.ToLower(d.Name()), pattern) {
			found = append(found, path)
			if len(found) >= maxSearchResults {
				return errStop
			}
		}
		return nil
	})
	if werr != nil && !errors.Is(werr, errStop) {
		return mcp.NewToolResultErrorf("search %s: %v", p, werr), nil
	}
	if len(found) == 0 {
		return mcp.NewToolResultText("No matches found"), nil
	}
	sort.Strings(found)
	return mcp.NewToolResultText(strings.Join(found, "\n")), nil
}

func (f *FS) listAllowed(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultText("Allowed directories:\n" + strings.Join(f.roots, "\n")), nil
}

// Serve runs the server over stdio (in, out) until in ends or ctx is done.
func Serve(ctx context.Context, roots []string, in io.Reader, out io.Writer) error {
	fs, err := NewFS(roots...)
	if err != nil {
		return err
	}
	return server.NewStdioServer(New(fs)).Listen(ctx, in, out)
}

// ChildEnv is the environment variable that turns a program calling
// ServeIfChild into this server. Its value lists the roots, separated by the
// OS path-list separator.
const ChildEnv = "MCPGUARD_FSSERVER_ROOTS"

// ServeIfChild serves over stdin/stdout and exits when ChildEnv is set; it
// returns at once otherwise. A program (or a test binary, from an init
// function) calls it first so that it can re-execute itself as the server.
func ServeIfChild() {
	v, ok := os.LookupEnv(ChildEnv)
	if !ok {
		return
	}
	err := Serve(context.Background(), filepath.SplitList(v), os.Stdin, os.Stdout)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "fsserver:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// SelfCommand returns the command and environment that re-execute the
// current program as the server over roots; the program must call
// ServeIfChild at start-up.
func SelfCommand(roots ...string) (cmd []string, env []string, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("fsserver: find own executable: %w", err)
	}
	return []string{exe}, []string{ChildEnv + "=" + strings.Join(roots, string(os.PathListSeparator))}, nil
}
