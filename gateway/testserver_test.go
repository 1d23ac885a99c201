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
	if spec, ok := strings.CutPrefix(mode, "list:"); ok {
		name, tools, _ := strings.Cut(spec, ":")
		return listServer(name, strings.Split(tools, "|"), false)
	}
	if mode == "badinit" {
		return badInitServer()
	}
	if spec, ok := strings.CutPrefix(mode, "flakylist:"); ok {
		name, tools, _ := strings.Cut(spec, ":")
		return listServer(name, strings.Split(tools, "|"), true)
	}
	return mcptest.Serve(mcptest.Config{
		Name:       mode,
		Tools:      []string{mcptest.Echo, mcptest.Notify, mcptest.Ask, mcptest.Sleep, mcptest.ReadFile, mcptest.PID, mcptest.Crash},
		EchoPrefix: mode + ":",
	})
}

// requests calls handle with each request read from stdin, one at a time
// on one goroutine, and flushes what it wrote after each.
func requests(handle func(line []byte, id json.RawMessage, method string, out *bufio.Writer)) int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil || m.Method == "" {
			continue
		}
		handle(in.Bytes(), m.ID, m.Method, out)
		out.Flush()
	}
	return 0
}

// rawServer answers line by line on one goroutine, so the order in which
// it writes messages is fixed: for tools/call of any tool but echo it writes
// a log notification, a progress notification for the request's token, then
// the response; echo answers "done <text>" alone. tools/list lists echo.
func rawServer() int {
	return requests(func(line []byte, id json.RawMessage, method string, out *bufio.Writer) {
		var m struct {
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
		json.Unmarshal(line, &m)
		switch method {
		case "initialize":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}}`+"\n", id)
		case "tools/list":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}]}}`+"\n", id)
		case "tools/call":
			text, _ := json.Marshal("done " + m.Params.Arguments.Text)
			if m.Params.Name != "echo" {
				fmt.Fprintln(out, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}`)
				if m.Params.Meta.Token != nil {
					fmt.Fprintf(out, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1}}`+"\n", m.Params.Meta.Token)
				}
			}
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%s}]}}`+"\n", id, text)
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", id)
		}
	})
}

// listServer lists the tools named and answers a call of one with
// "<server>/<tool>", so that a test can see which server's tool ran; with
// failFirst its first tools/list gets an error.
func listServer(server string, tools []string, failFirst bool) int {
	return requests(func(line []byte, id json.RawMessage, method string, out *bufio.Writer) {
		if method == "tools/list" && failFirst {
			failFirst = false
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"not ready"}}`+"\n", id)
			return
		}
		var m struct {
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		json.Unmarshal(line, &m)
		var result any = struct{}{}
		switch method {
		case "initialize":
			result = map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": server, "version": "1"}}
		case "tools/list":
			var list []map[string]any
			for _, t := range tools {
				list = append(list, map[string]any{"name": t, "inputSchema": map[string]any{"type": "object"}})
			}
			result = map[string]any{"tools": list}
		case "tools/call":
			result = map[string]any{"content": []map[string]any{{"type": "text", "text": server + "/" + m.Params.Name}}}
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
		out.Write(append(b, '\n'))
	})
}

// badInitServer refuses initialize, and stays after its stdin closes, as a
// server slow to exit does, until it is stopped.
func badInitServer() int {
	requests(func(line []byte, id json.RawMessage, method string, out *bufio.Writer) {
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"cannot start"}}`+"\n", id)
	})
	time.Sleep(time.Minute)
	return 0
}
