package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/mcpguard/mcpguard/gateway"
	"github.com/mcpguard/mcpguard/internal/mcptest"

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
// direction of the protocol. Its name is mode, and echo answers after
// "mode:", so tests can tell servers apart behind the aggregate endpoint.
func testServer(mode string) int {
	if mode == "raw" {
		return rawServer()
	}
	return mcptest.Serve(mcptest.Config{
		Name:       mode,
		Tools:      []string{mcptest.Echo, mcptest.Notify, mcptest.Ask, mcptest.Sleep, mcptest.ReadFile, mcptest.PID, mcptest.Crash},
		EchoPrefix: mode + ":",
	})
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
