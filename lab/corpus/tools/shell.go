package tools

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// ShellCommands is the shell server's allow-list. The check is on the
// program name only (as in many real "safe shell" servers): arguments are
// passed through unchecked, which is what the argument-visible cases abuse
// (cat of a secret, printenv, find -exec).
var ShellCommands = []string{"cat", "date", "echo", "find", "grep", "head", "ls", "printenv", "pwd", "sort", "tail", "uname", "wc"}

// ErrNotAllowed is returned for a command outside the allow-list.
var ErrNotAllowed = errors.New("command not allowed")

// Shell is the shell tool set: it runs allow-listed programs directly
// (no shell) in the workspace.
type Shell struct {
	ws string
	// Timeout bounds each program (10 s; Config.Scale stretches it).
	Timeout time.Duration
}

// NewShell returns the shell tools running in ws.
func NewShell(ws string) (*Shell, error) {
	if ws == "" {
		return nil, ErrNoWorkspace
	}
	return &Shell{ws: ws, Timeout: 10 * time.Second}, nil
}

// Tools returns the shell tool set.
func (s *Shell) Tools() Set {
	return Set{
		{Tool: mcp.NewTool("run_command",
			mcp.WithDescription("Run one allow-listed command (no shell: no pipes, globbing or variables) in the workspace and return its output and exit status. See list_commands."),
			mcp.WithString("command", mcp.Required(), mcp.Description("Program name, e.g. ls")),
			mcp.WithArray("args", mcp.WithStringItems(), mcp.Description("Arguments"))), Handler: s.run},
		{Tool: mcp.NewTool("list_commands",
			mcp.WithDescription("List the commands run_command accepts.")), Handler: s.list},
	}
}

// Run runs an allow-listed command and returns its combined output.
func (s *Shell) Run(ctx context.Context, name string, args []string) (string, int, error) {
	if !slices.Contains(ShellCommands, name) {
		return "", -1, fmt.Errorf("%w: %q (allowed: %s)", ErrNotAllowed, name, strings.Join(ShellCommands, ", "))
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", -1, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = s.ws
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode(), nil
	}
	if err != nil {
		return string(out), -1, err
	}
	return string(out), 0, nil
}

func (s *Shell) run(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	name, err := req.RequireString("command")
	if err != nil {
		return Errorf("%v", err), nil
	}
	out, code, err := s.Run(ctx, name, req.GetStringSlice("args", nil))
	if err != nil {
		return Errorf("%v", err), nil
	}
	res := Text(fmt.Sprintf("%s\n[exit status %d]", out, code))
	res.IsError = code != 0
	return res, nil
}

func (s *Shell) list(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return Text(strings.Join(ShellCommands, "\n")), nil
}
