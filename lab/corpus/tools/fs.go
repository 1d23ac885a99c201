package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// ErrOutsideRoots is returned for a path that resolves outside every root.
var ErrOutsideRoots = errors.New("access denied: path outside allowed directories")

// FS is the filesystem tool set, modelled on
// @modelcontextprotocol/server-filesystem: the same tool names and
// arguments, confined to a list of root directories.
type FS struct {
	roots   []string
	resolve func(roots []string, path string) (string, error)
}

// NewFS returns the filesystem tools with strict confinement: a path is made
// absolute against the first root, cleaned, and its symlinks resolved (the
// parent's, for a file that does not exist yet) before it is checked against
// the symlink-resolved roots.
func NewFS(roots []string) (*FS, error) {
	if len(roots) == 0 {
		return nil, ErrNoWorkspace
	}
	var real []string
	for _, r := range roots {
		rr, err := filepath.EvalSymlinks(r)
		if err != nil {
			return nil, fmt.Errorf("root %s: %w", r, err)
		}
		real = append(real, rr)
	}
	return &FS{roots: real, resolve: strictResolve}, nil
}

// NewNaiveFS returns the same tools with the naive confinement many real
// servers shipped with: the raw argument must start with a root, and only
// then is it cleaned, so "ROOT/../../etc/passwd" passes; symlinks inside a
// root are followed wherever they point.
func NewNaiveFS(roots []string) (*FS, error) {
	if len(roots) == 0 {
		return nil, ErrNoWorkspace
	}
	return &FS{roots: roots, resolve: naiveResolve}, nil
}

// Resolve maps a tool's path argument to the path the tool will use.
func (f *FS) Resolve(path string) (string, error) { return f.resolve(f.roots, path) }

// Roots returns the allowed directories.
func (f *FS) Roots() []string { return f.roots }

func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

func strictResolve(roots []string, path string) (string, error) {
	if path == "" {
		return "", errors.New("empty path")
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(roots[0], path)
	}
	p := filepath.Clean(path)
	real, err := resolveExisting(p)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	for _, r := range roots {
		if within(r, real) {
			return real, nil
		}
	}
	return "", fmt.Errorf("%w: %s", ErrOutsideRoots, path)
}

// resolveExisting resolves the symlinks of the longest existing prefix of
// the clean absolute path p and appends the rest, so a path that does not
// exist yet (write_file, create_directory with parents) is judged by where
// it would land.
func resolveExisting(p string) (string, error) {
	var rest []string
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

func naiveResolve(roots []string, path string) (string, error) {
	if path == "" {
		return "", errors.New("empty path")
	}
	if !filepath.IsAbs(path) {
		path = roots[0] + string(filepath.Separator) + path
	}
	for _, r := range roots {
		if strings.HasPrefix(path, r) {
			return filepath.Clean(path), nil
		}
	}
	return "", fmt.Errorf("%w: %s", ErrOutsideRoots, path)
}

// Tools returns the filesystem tool set.
func (f *FS) Tools() Set {
	pathArg := mcp.WithString("path", mcp.Required(), mcp.Description("Path of the file or directory"))
	return Set{
		{Tool: mcp.NewTool("read_file",
			mcp.WithDescription("Read the complete contents of a file as text. Only works within allowed directories. (Kept for compatibility; prefer read_text_file.)"),
			pathArg), Handler: f.readFile},
		{Tool: mcp.NewTool("read_text_file",
			mcp.WithDescription("Read a file as text. With head or tail, return only the first or last N lines. Only works within allowed directories."),
			pathArg,
			mcp.WithNumber("head", mcp.Description("If set, return only the first N lines")),
			mcp.WithNumber("tail", mcp.Description("If set, return only the last N lines"))), Handler: f.readFile},
		{Tool: mcp.NewTool("write_file",
			mcp.WithDescription("Create a file or overwrite an existing one with the given content. Only works within allowed directories."),
			pathArg,
			mcp.WithString("content", mcp.Required(), mcp.Description("Content to write"))), Handler: f.writeFile},
		{Tool: mcp.NewTool("create_directory",
			mcp.WithDescription("Create a directory, including missing parents; succeeds if it already exists. Only works within allowed directories."),
			pathArg), Handler: f.createDirectory},
		{Tool: mcp.NewTool("list_directory",
			mcp.WithDescription("List the entries of a directory, each prefixed with [FILE] or [DIR]. Only works within allowed directories."),
			pathArg), Handler: f.listDirectory},
		{Tool: mcp.NewTool("move_file",
			mcp.WithDescription("Move or rename a file or directory. Fails if the destination exists. Both paths must be within allowed directories."),
			mcp.WithString("source", mcp.Required(), mcp.Description("Path to move")),
			mcp.WithString("destination", mcp.Required(), mcp.Description("New path"))), Handler: f.moveFile},
		{Tool: mcp.NewTool("search_files",
			mcp.WithDescription("Recursively search under a directory for files and directories whose name contains the pattern (case-insensitive) or matches it as a glob. Returns full paths."),
			pathArg,
			mcp.WithString("pattern", mcp.Required(), mcp.Description("Substring or glob to match against names"))), Handler: f.searchFiles},
		{Tool: mcp.NewTool("get_file_info",
			mcp.WithDescription("Return metadata of a file or directory: size, modification time, type and permissions."),
			pathArg), Handler: f.getFileInfo},
		{Tool: mcp.NewTool("list_allowed_directories",
			mcp.WithDescription("List the directories this server may access.")), Handler: f.listAllowed},
	}
}

func (f *FS) pathArg(req mcp.CallToolRequest, key string) (string, *mcp.CallToolResult) {
	p, err := req.RequireString(key)
	if err != nil {
		return "", Errorf("%v", err)
	}
	rp, err := f.Resolve(p)
	if err != nil {
		return "", Errorf("%v", err)
	}
	return rp, nil
}

func (f *FS) readFile(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, bad := f.pathArg(req, "path")
	if bad != nil {
		return bad, nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return Errorf("read %s: %v", p, err), nil
	}
	s := string(b)
	if h := req.GetInt("head", 0); h > 0 {
		s = strings.Join(firstLines(s, h), "\n")
	} else if t := req.GetInt("tail", 0); t > 0 {
		s = strings.Join(lastLines(s, t), "\n")
	}
	return Text(s), nil
}

func firstLines(s string, n int) []string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[:min(n, len(lines))]
}

func lastLines(s string, n int) []string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[max(0, len(lines)-n):]
}

func (f *FS) writeFile(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, bad := f.pathArg(req, "path")
	if bad != nil {
		return bad, nil
	}
	content, err := req.RequireString("content")
	if err != nil {
		return Errorf("%v", err), nil
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		return Errorf("write %s: %v", p, err), nil
	}
	return Text(fmt.Sprintf("Successfully wrote to %s", p)), nil
}

func (f *FS) createDirectory(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, bad := f.pathArg(req, "path")
	if bad != nil {
		return bad, nil
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return Errorf("create directory %s: %v", p, err), nil
	}
	return Text(fmt.Sprintf("Successfully created directory %s", p)), nil
}

func (f *FS) listDirectory(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, bad := f.pathArg(req, "path")
	if bad != nil {
		return bad, nil
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return Errorf("list %s: %v", p, err), nil
	}
	var b strings.Builder
	for _, e := range ents {
		kind := "[FILE]"
		if e.IsDir() {
			kind = "[DIR]"
		}
		fmt.Fprintf(&b, "%s %s\n", kind, e.Name())
	}
	return Text(b.String()), nil
}

func (f *FS) moveFile(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	src, bad := f.pathArg(req, "source")
	if bad != nil {
		return bad, nil
	}
	dst, bad := f.pathArg(req, "destination")
	if bad != nil {
		return bad, nil
	}
	if _, err := os.Lstat(dst); err == nil {
		return Errorf("move: destination %s exists", dst), nil
	}
	if err := os.Rename(src, dst); err != nil {
		return Errorf("move: %v", err), nil
	}
	return Text(fmt.Sprintf("Successfully moved %s to %s", src, dst)), nil
}

func (f *FS) searchFiles(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, bad := f.pathArg(req, "path")
	if bad != nil {
		return bad, nil
	}
	pattern, err := req.RequireString("pattern")
	if err != nil {
		return Errorf("%v", err), nil
	}
	lower := strings.ToLower(pattern)
	var hits []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable entries are skipped, as the reference server does
		}
		if path == p {
			return nil
		}
		name := d.Name()
		if ok, _ := filepath.Match(pattern, name); ok || strings.Contains(strings.ToLower(name), lower) {
			hits = append(hits, path)
		}
		return nil
	})
	if err != nil {
		return Errorf("search %s: %v", p, err), nil
	}
	if len(hits) == 0 {
		return Text("No matches found"), nil
	}
	return Text(strings.Join(hits, "\n")), nil
}

func (f *FS) getFileInfo(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, bad := f.pathArg(req, "path")
	if bad != nil {
		return bad, nil
	}
	fi, err := os.Stat(p)
	if err != nil {
		return Errorf("stat %s: %v", p, err), nil
	}
	return Text(fmt.Sprintf("size: %d\nmodified: %s\nisDirectory: %t\nisFile: %t\npermissions: %o\n",
		fi.Size(), fi.ModTime().UTC().Format("2006-01-02T15:04:05Z"), fi.IsDir(), fi.Mode().IsRegular(), fi.Mode().Perm())), nil
}

func (f *FS) listAllowed(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return Text("Allowed directories:\n" + strings.Join(f.roots, "\n")), nil
}
