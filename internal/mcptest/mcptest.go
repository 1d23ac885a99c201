// Package mcptest holds the mcp-go server that the tests of several
// packages run behind the code they test: a test binary re-executes itself
// as the server (an environment variable tells TestMain which mode to run)
// and offers the tools its tests call.
package mcptest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The tools a server can offer (Config.Tools).
const (
	// Echo answers its text argument after Config.EchoPrefix.
	Echo = "echo"
	// Notify sends a log notification, and progress when the call carries
	// a progress token, then answers "notified".
	Notify = "notify"
	// Ask asks the client's LLM (sampling) "2+2?" and answers
	// "llm said " and the reply.
	Ask = "ask"
	// Roots asks the client for its roots and answers the first one's URI.
	Roots = "roots"
	// Sleep waits ms milliseconds or until the call is cancelled, then
	// answers "slept".
	Sleep = "sleep"
	// ReadFile answers the content of the file at path, or a tool error.
	ReadFile = "read_file"
	// PID answers the server's process id.
	PID = "pid"
	// Spawn starts a child that sleeps 300 s and answers its process id:
	// for tests that the server's whole tree is stopped.
	Spawn = "spawn"
	// Crash exits the server in the middle of the call.
	Crash = "crash"
)

// Config says what a server offers.
type Config struct {
	// Name is the serverInfo name.
	Name string
	// Tools are the tools offered (the constants above).
	Tools []string
	// EchoPrefix goes before echo's answer, so that tests can tell
	// servers apart behind one endpoint.
	EchoPrefix string
	// Extras adds a resource test://greeting ("hello") and a prompt
	// greet ("hello " and its name argument).
	Extras bool
}

// New returns a server with logging and sampling and the tools of c.
func New(c Config) (*server.MCPServer, error) {
	opts := []server.ServerOption{server.WithToolCapabilities(true), server.WithLogging()}
	if c.Extras {
		opts = append(opts, server.WithResourceCapabilities(true, true), server.WithPromptCapabilities(true))
	}
	s := server.NewMCPServer(c.Name, "1.0", opts...)
	s.EnableSampling()
	for _, name := range c.Tools {
		t, h, ok := tool(s, c, name)
		if !ok {
			return nil, fmt.Errorf("mcptest: no tool %q", name)
		}
		s.AddTool(t, h)
	}
	if c.Extras {
		s.AddResource(mcp.NewResource("test://greeting", "greeting", mcp.WithMIMEType("text/plain")),
			func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{mcp.TextResourceContents{URI: "test://greeting", MIMEType: "text/plain", Text: "hello"}}, nil
			})
		s.AddPrompt(mcp.NewPrompt("greet", mcp.WithArgument("name")),
			func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return mcp.NewGetPromptResult("greeting", []mcp.PromptMessage{
					mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("hello "+req.Params.Arguments["name"])),
				}), nil
			})
	}
	return s, nil
}

// Serve runs c's server on stdin and stdout until stdin ends or a signal
// stops it, and returns the process's exit code.
func Serve(c Config) int {
	s, err := New(c)
	if err == nil {
		err = server.ServeStdio(s)
	}
	// ServeStdio ends with the context's error when SIGTERM or SIGINT
	// stopped it: that is how the code under test stops a server.
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func tool(s *server.MCPServer, c Config, name string) (mcp.Tool, server.ToolHandlerFunc, bool) {
	switch name {
	case Echo:
		return mcp.NewTool(Echo, mcp.WithDescription("echoes text"), mcp.WithString("text", mcp.Required())),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(c.EchoPrefix + req.GetString("text", "")), nil
			}, true
	case Notify:
		return mcp.NewTool(Notify, mcp.WithDescription("sends a log notification and progress, then answers")),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if err := s.SendNotificationToClient(ctx, "notifications/message", map[string]any{"level": "info", "data": "working"}); err != nil {
					return nil, err
				}
				if tok := req.Params.Meta; tok != nil && tok.ProgressToken != nil {
					if err := s.SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": tok.ProgressToken, "progress": 1, "total": 2}); err != nil {
						return nil, err
					}
				}
				return mcp.NewToolResultText("notified"), nil
			}, true
	case Ask:
		return mcp.NewTool(Ask, mcp.WithDescription("asks the client's LLM (sampling)")),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				res, err := s.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: mcp.CreateMessageParams{
					Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("2+2?")}},
					MaxTokens: 5,
				}})
				if err != nil {
					return nil, err
				}
				tc, _ := res.Content.(mcp.TextContent)
				return mcp.NewToolResultText("llm said " + tc.Text), nil
			}, true
	case Roots:
		return mcp.NewTool(Roots, mcp.WithDescription("lists the client's roots")),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				res, err := s.RequestRoots(ctx, mcp.ListRootsRequest{})
				if err != nil {
					return nil, err
				}
				if len(res.Roots) == 0 {
					return mcp.NewToolResultError("the client has no roots"), nil
				}
				return mcp.NewToolResultText(res.Roots[0].URI), nil
			}, true
	case Sleep:
		return mcp.NewTool(Sleep, mcp.WithDescription("sleeps ms milliseconds"), mcp.WithNumber("ms")),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				select {
				case <-time.After(time.Duration(req.GetFloat("ms", 0)) * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return mcp.NewToolResultText("slept"), nil
			}, true
	case ReadFile:
		return mcp.NewTool(ReadFile, mcp.WithDescription("reads a file"), mcp.WithString("path", mcp.Required())),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				b, err := os.ReadFile(req.GetString("path", ""))
				if err != nil {
					return mcp.NewToolResultError(err.Error()), nil
				}
				return mcp.NewToolResultText(string(b)), nil
			}, true
	case PID:
		return mcp.NewTool(PID, mcp.WithDescription("the server's pid")),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(fmt.Sprint(os.Getpid())), nil
			}, true
	case Spawn:
		return mcp.NewTool(Spawn, mcp.WithDescription("starts a long-lived child, returns its pid")),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				c := exec.Command("sleep", "300")
				if err := c.Start(); err != nil {
					return nil, err
				}
				return mcp.NewToolResultText(fmt.Sprint(c.Process.Pid)), nil
			}, true
	case Crash:
		return mcp.NewTool(Crash, mcp.WithDescription("exits mid-call")),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				os.Exit(1)
				return nil, nil
			}, true
	}
	return mcp.Tool{}, nil, false
}
