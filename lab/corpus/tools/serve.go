package tools

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Set is a server's tool list.
type Set []server.ServerTool

// Around wraps the handler of tool name with mw, keeping the tool's name,
// description and schema. It reports an error for a name not in the set.
func (s Set) Around(name string, mw func(next server.ToolHandlerFunc) server.ToolHandlerFunc) error {
	for i := range s {
		if s[i].Tool.Name == name {
			s[i].Handler = mw(s[i].Handler)
			return nil
		}
	}
	return fmt.Errorf("wrap tool %q: no such tool", name)
}

// Handler returns the handler of tool name, or nil.
func (s Set) Handler(name string) server.ToolHandlerFunc {
	for _, t := range s {
		if t.Tool.Name == name {
			return t.Handler
		}
	}
	return nil
}

// NewServer builds the MCP server for a tool set.
func NewServer(name string, set Set) *server.MCPServer {
	s := server.NewMCPServer(name, "1.0.0", server.WithToolCapabilities(false), server.WithRecovery())
	s.AddTools(set...)
	return s
}

// Serve runs the tool set on stdin/stdout until stdin closes.
func Serve(name string, set Set) error {
	return server.ServeStdio(NewServer(name, set), server.WithErrorLogger(log.New(os.Stderr, name+": ", 0)))
}

// Main is the body of every server's main: serve, and exit 1 on error.
func Main(name string, set Set) {
	if err := Serve(name, set); err != nil && err != context.Canceled {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// Text returns a successful text result.
func Text(s string) *mcp.CallToolResult { return mcp.NewToolResultText(s) }

// Errorf returns a tool-level error result (isError: true), which is how MCP
// servers report bad input without failing the JSON-RPC call.
func Errorf(format string, a ...any) *mcp.CallToolResult {
	return mcp.NewToolResultError(fmt.Sprintf(format, a...))
}

// AppendText adds a text block to a result (used by trojans to smuggle data
// into an otherwise genuine answer).
func AppendText(r *mcp.CallToolResult, s string) *mcp.CallToolResult {
	if r == nil {
		r = &mcp.CallToolResult{}
	}
	r.Content = append(r.Content, mcp.NewTextContent(s))
	return r
}

// Exit reports a start-up error of server name and exits with status 2.
func Exit(name string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	os.Exit(2)
}

// After makes tool name run f on its genuine result before answering; f
// returns the result to send (trojans append smuggled data or just act).
func (s Set) After(name string, f func(ctx context.Context, req mcp.CallToolRequest, res *mcp.CallToolResult) *mcp.CallToolResult) error {
	return s.Around(name, func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := next(ctx, req)
			if err != nil {
				return res, err
			}
			return f(ctx, req, res), nil
		}
	})
}

// Before makes tool name run f before its genuine handler.
func (s Set) Before(name string, f func(ctx context.Context, req mcp.CallToolRequest)) error {
	return s.Around(name, func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			f(ctx, req)
			return next(ctx, req)
		}
	})
}

// Must exits with a start-up error when a wrapping failed (a programming
// error in a server's main).
func Must(name string, errs ...error) {
	for _, err := range errs {
		if err != nil {
			Exit(name, err)
		}
	}
}
