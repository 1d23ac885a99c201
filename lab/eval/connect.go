package eval

import (
	"context"
	"io"
	"os/exec"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/configs"
)

// Launch is what a Connector needs to start one guarded server session.
type Launch struct {
	Argv   []string
	Env    []string
	Dir    string
	Server string
	Config string
	Setup  *configs.Setup
	// Stderr receives the server's stderr. The runner passes an *os.File,
	// so that no copying goroutine can keep the proxy waiting for a pipe a
	// daemonised child still holds.
	Stderr io.Writer
	// Grace is the proxy's shutdown grace period.
	Grace time.Duration
	// OnStart is called with the server's pid once it runs.
	OnStart func(pid int)
}

// Session is a client session with a guarded server.
type Session interface {
	CallTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error)
	// Close ends the session; the server and its process group are stopped.
	Close() error
}

// Instructed is a Session that kept the server's initialize result, whose
// instructions the model reads too (oracles look for canaries there).
type Instructed interface {
	Instructions() string
}

// Connector starts the server behind the config's layers and returns an
// initialized session.
type Connector func(ctx context.Context, l Launch) (Session, error)

// ProxyConnect runs the server behind guard.Proxy in-process, with the
// config's layers, prepare hooks and sandbox: the same path `mcpguard run`
// takes, so the harness measures the guard users get.
func ProxyConnect(ctx context.Context, l Launch) (Session, error) {
	s, err := guard.Open(ctx, NewProxy(l))
	if err != nil {
		return nil, err
	}
	return s, nil
}

// NewProxy is the guard.Proxy for l with the config's layers, hooks,
// prepare hooks and sandbox; every connector builds its proxy here, so the
// transports cannot differ in what guards the server.
func NewProxy(l Launch) *guard.Proxy {
	p := &guard.Proxy{
		Command: l.Argv,
		Dir:     l.Dir,
		Env:     l.Env,
		Server:  l.Server,
		Config:  l.Config,
		Stderr:  l.Stderr,
		Grace:   l.Grace,
		OnStart: l.OnStart,
	}
	if l.Setup != nil {
		p.Stages = l.Setup.Stages
		p.ServerHooks = l.Setup.ServerHooks
		p.Prepare = append([]func(*exec.Cmd) error(nil), l.Setup.Prepare...)
		p.Sandbox = l.Setup.Sandbox
	}
	return p
}
