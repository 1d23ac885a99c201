package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpguard/mcpguard/gateway"

	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

// The test binary doubles as the MCP server behind the gateway: with
// GATEWAY_TEST_SERVER set, TestMain runs the server instead of the tests.
const serverEnv = "GATEWAY_TEST_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(serverEnv); mode != "" {
		os.Exit(testServer(mode))
	}
	// The gateway's bridge to a remote server, as `mcpguard gateway bridge`
	// runs it (see bridgeArgv).
	if len(os.Args) == 3 && os.Args[1] == "gateway-bridge" {
		if err := gateway.Bridge(context.Background(), os.Args[2], nil, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testServer is an mcp-go stdio server with tools that exercise every
// direction of the protocol. Its name is mode, so tests can tell servers
// apart behind the aggregate endpoint.
func testServer(mode string) int {
	if mode == "raw" {
		return rawServer()
	}
	s := server.NewMCPServer(mode, "1.0", server.WithToolCapabilities(true), server.WithLogging())
	s.EnableSampling()
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("echoes text"), mcp.WithString("text", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(mode + ":" + req.GetString("text", "")), nil
		})
	s.AddTool(mcp.NewTool("notify", mcp.WithDescription("sends a log notification and progress, then answers")),
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
		})
	s.AddTool(mcp.NewTool("ask", mcp.WithDescription("asks the client's LLM (sampling)")),
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
		})
	s.AddTool(mcp.NewTool("sleep", mcp.WithDescription("sleeps ms milliseconds"), mcp.WithNumber("ms")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-time.After(time.Duration(req.GetFloat("ms", 0)) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return mcp.NewToolResultText("slept"), nil
		})
	s.AddTool(mcp.NewTool("read_file", mcp.WithDescription("reads a file"), mcp.WithString("path", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			b, err := os.ReadFile(req.GetString("path", ""))
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText(string(b)), nil
		})
	s.AddTool(mcp.NewTool("pid", mcp.WithDescription("the server's pid")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(fmt.Sprint(os.Getpid())), nil
		})
	s.AddTool(mcp.NewTool("crash", mcp.WithDescription("exits mid-call")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(1)
			return nil, nil
		})
	if err := server.ServeStdio(s); err != nil && !strings.Contains(err.Error(), "context canceled") {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// rawServer answers line by line on one goroutine, so the order in which
// it writes messages is fixed: for tools/call of any tool but echo it writes
// a log notification, a progress notification for the request's token, then
// the response; echo answers "done <text>" alone.
func rawServer() int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Meta struct {
					Token json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
				Name      string `json:"name"`
				Arguments struct {
					Text string `json:"text"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil || m.Method == "" {
			continue
		}
		switch m.Method {
		case "initialize":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}}`+"\n", m.ID)
		case "tools/call":
			if m.Params.Name == "echo" {
				text, _ := json.Marshal("done " + m.Params.Arguments.Text)
				fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%s}]}}`+"\n", m.ID, text)
				break
			}
			fmt.Fprintln(out, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}`)
			if m.Params.Meta.Token != nil {
				fmt.Fprintf(out, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1}}`+"\n", m.Params.Meta.Token)
			}
			text, _ := json.Marshal("done " + m.Params.Arguments.Text)
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%s}]}}`+"\n", m.ID, text)
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", m.ID)
		}
		out.Flush()
	}
	return 0
}
