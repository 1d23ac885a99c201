package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpguard/mcpguard/agent/fsserver"
	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/configs"
)

// Server says how to start the MCP server the agent uses and whether
// mcpguard sits in front of it.
type Server struct {
	// Command is the server's argv.
	Command []string
	// Env is added to the agent's own environment for the server.
	Env []string
	// Dir is the server's working directory ("" for the agent's).
	Dir string
	// Guard names an mcpguard config (C0, C-app, ...). Empty runs the server
	// directly, with no proxy at all. Otherwise the server runs under
	// guard.Proxy in this process (the same proxy as `mcpguard run`, minus a
	// process hop) with the config's layers and sandbox.
	Guard string
	// GuardOptions is passed to configs.Build (policy file, audit log, ...).
	GuardOptions configs.Options
	// Stderr receives the server's stderr under the guard (nil: discarded).
	Stderr io.Writer
}

// FSServer is the default server: the repository's own Go filesystem server
// over roots, run by re-executing the current program. The program must call
// fsserver.ServeIfChild first thing (test binaries do it from an init).
func FSServer(roots ...string) (Server, error) {
	cmd, env, err := fsserver.SelfCommand(roots...)
	if err != nil {
		return Server{}, err
	}
	return Server{Command: cmd, Env: env}, nil
}

// NPMFilesystemServer is @modelcontextprotocol/server-filesystem from npm
// over roots (needs npx and network access to npm, or a warm npm cache).
func NPMFilesystemServer(roots ...string) Server {
	return Server{Command: append([]string{"npx", "-y", "@modelcontextprotocol/server-filesystem"}, roots...)}
}

// Sentinel errors of the MCP side.
var (
	// ErrServer wraps failures to start or talk to the MCP server.
	ErrServer = errors.New("mcp server failed")
	// ErrGuardConfig: the guard config could not be built here (unknown,
	// unavailable on this kernel, missing policy); it wraps configs' error.
	ErrGuardConfig = errors.New("guard config not usable")
)

// session is a connected, initialized MCP client and what ends it.
type session struct {
	*client.Client
	close func() error
}

func connect(ctx context.Context, s Server) (*session, error) {
	if len(s.Command) == 0 {
		return nil, fmt.Errorf("%w: no server command", ErrServer)
	}
	if s.Guard != "" {
		return connectGuarded(ctx, s)
	}
	cmdFunc := func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, command, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Dir = s.Dir
		return cmd, nil
	}
	c, err := client.NewStdioMCPClientWithOptions(s.Command[0], s.Env, s.Command[1:], transport.WithCommandFunc(cmdFunc))
	if err != nil {
		return nil, fmt.Errorf("%w: start %s: %v", ErrServer, s.Command[0], err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "mcpguard-agent", Version: "dev"}
	if _, err := c.Initialize(ctx, init); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: initialize %s: %v", ErrServer, s.Command[0], err)
	}
	return &session{Client: c, close: c.Close}, nil
}

func connectGuarded(ctx context.Context, s Server) (*session, error) {
	setup, err := configs.Build(s.Guard, s.GuardOptions)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrGuardConfig, err)
	}
	stderr := s.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	p := &guard.Proxy{
		Command:     s.Command,
		Dir:         s.Dir,
		Env:         append(os.Environ(), s.Env...),
		Server:      s.GuardOptions.Server,
		Config:      setup.Name,
		Stages:      setup.Stages,
		ServerHooks: setup.ServerHooks,
		Prepare:     setup.Prepare,
		Sandbox:     setup.Sandbox,
		Stderr:      stderr,
	}
	gs, err := guard.Open(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("%w: under %s: %v", ErrServer, s.Guard, err)
	}
	return &session{Client: gs.Client, close: gs.Close}, nil
}
