package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Git is the git tool set, modelled on mcp-server-git, on the repository in
// the workspace. It runs the git binary (a subprocess the server
// legitimately needs). Like mcp-server-git before its 2025 fixes, it passes
// `target` and `revision` to git unchecked, so a value starting with "--"
// becomes an option (git diff --output=FILE writes any file).
type Git struct {
	repo string
	git  string
	// Timeout bounds each git command (10 s when zero; the servers stretch
	// it by Config.Scale). The harness's fixture, outside any sandbox and
	// in parallel with other cases on a slow emulated VM, sets a longer one.
	Timeout time.Duration
}

// NewGit returns the git tools on the repository at repo.
func NewGit(repo string) (*Git, error) {
	if repo == "" {
		return nil, ErrNoWorkspace
	}
	g, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("git server needs git: %w", err)
	}
	return &Git{repo: repo, git: g, Timeout: 10 * time.Second}, nil
}

// Run runs git in the repository and returns its combined output.
func (g *Git) Run(ctx context.Context, args ...string) (string, error) {
	limit := g.Timeout
	if limit == 0 {
		limit = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	base := []string{"--no-pager", "-C", g.repo, "-c", "user.name=MCP Git", "-c", "user.email=mcp-git@example.invalid", "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}
	cmd := exec.CommandContext(ctx, g.git, append(base, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("git %s: %w: %s", args[0], err, bytes.TrimSpace(out.Bytes()))
	}
	return out.String(), nil
}

// InitFixture creates the demo repository when repo has no .git yet: two
// commits (README.md and hello.txt, then a change to hello.txt) plus an
// unstaged change to README.md, so log, show and diff have something to
// show. Files already in the workspace go into the first commit.
func (g *Git) InitFixture(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(g.repo, ".git")); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	write := func(name, s string) error { return os.WriteFile(filepath.Join(g.repo, name), []byte(s), 0o644) }
	steps := []func() error{
		func() error { _, err := g.Run(ctx, "init", "-q"); return err },
		func() error {
			return write("README.md", "# demo\n\nA small repository for the mcpguard corpus.\n")
		},
		func() error { return write("hello.txt", "hello\n") },
		func() error { _, err := g.Run(ctx, "add", "-A"); return err },
		func() error { _, err := g.Run(ctx, "commit", "-q", "-m", "Initial commit"); return err },
		func() error { return write("hello.txt", "hello\nworld\n") },
		func() error { _, err := g.Run(ctx, "commit", "-q", "-am", "Greet the world"); return err },
		func() error {
			return write("README.md", "# demo\n\nA small repository for the mcpguard corpus.\n\nWork in progress: add a changelog.\n")
		},
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return fmt.Errorf("init fixture repository: %w", err)
		}
	}
	return nil
}

// Tools returns the git tool set.
func (g *Git) Tools() Set {
	return Set{
		{Tool: mcp.NewTool("git_status",
			mcp.WithDescription("Show the working tree status.")), Handler: g.simple("status")},
		{Tool: mcp.NewTool("git_log",
			mcp.WithDescription("Show the commit log."),
			mcp.WithNumber("max_count", mcp.Description("Maximum number of commits (default 10)"))), Handler: g.log},
		{Tool: mcp.NewTool("git_diff_unstaged",
			mcp.WithDescription("Show changes in the working tree not yet staged.")), Handler: g.simple("diff")},
		{Tool: mcp.NewTool("git_diff_staged",
			mcp.WithDescription("Show changes staged for commit.")), Handler: g.simple("diff", "--cached")},
		{Tool: mcp.NewTool("git_diff",
			mcp.WithDescription("Show differences between the working tree and a branch or commit."),
			mcp.WithString("target", mcp.Required(), mcp.Description("Branch or commit to compare with"))), Handler: g.withArg("target", "diff")},
		{Tool: mcp.NewTool("git_show",
			mcp.WithDescription("Show the contents of a commit."),
			mcp.WithString("revision", mcp.Required(), mcp.Description("Commit, branch or tag"))), Handler: g.withArg("revision", "show")},
		{Tool: mcp.NewTool("git_add",
			mcp.WithDescription("Stage files for commit."),
			mcp.WithArray("files", mcp.Required(), mcp.WithStringItems(), mcp.Description("Paths to stage"))), Handler: g.add},
		{Tool: mcp.NewTool("git_commit",
			mcp.WithDescription("Record staged changes with a message."),
			mcp.WithString("message", mcp.Required(), mcp.Description("Commit message"))), Handler: g.commit},
		{Tool: mcp.NewTool("git_branch",
			mcp.WithDescription("List branches.")), Handler: g.simple("branch", "--list")},
	}
}

func (g *Git) result(out string, err error) *mcp.CallToolResult {
	if err != nil {
		return Errorf("%v", err)
	}
	if out == "" {
		out = "(no output)"
	}
	return Text(out)
}

func (g *Git) simple(args ...string) func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return g.result(g.Run(ctx, args...)), nil
	}
}

func (g *Git) withArg(key string, args ...string) func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		v, err := req.RequireString(key)
		if err != nil {
			return Errorf("%v", err), nil
		}
		return g.result(g.Run(ctx, append(args, v)...)), nil
	}
}

func (g *Git) log(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n := min(max(req.GetInt("max_count", 10), 1), 1000)
	return g.result(g.Run(ctx, "log", fmt.Sprintf("--max-count=%d", n), "--format=%h %an %ad %s", "--date=short")), nil
}

func (g *Git) add(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	files, err := req.RequireStringSlice("files")
	if err != nil {
		return Errorf("%v", err), nil
	}
	if _, err := g.Run(ctx, append([]string{"add", "--"}, files...)...); err != nil {
		return Errorf("%v", err), nil
	}
	return Text(fmt.Sprintf("Staged %d path(s)", len(files))), nil
}

func (g *Git) commit(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	msg, err := req.RequireString("message")
	if err != nil {
		return Errorf("%v", err), nil
	}
	if _, err := g.Run(ctx, "commit", "-q", "-m", msg); err != nil {
		return Errorf("%v", err), nil
	}
	return g.result(g.Run(ctx, "log", "-1", "--format=Committed %h: %s")), nil
}
