// Command bigresult is the server of the memory benchmark
// (bench_rss_test.go): its one tool, big, answers with a result of the
// size and shape its arguments ask for, so that what decoding a result
// costs the proxy can be measured against the result's size. It speaks MCP
// over stdio by hand and writes the result without building it in memory.
//
// Shapes: "flat" (one text of the size), "objects" (structuredContent
// holding an array of small objects, each with a string), "nested" (arrays 400 deep, over and
// over), "wide" (one object with as many small members as fit).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					Shape string `json:"shape"`
					Bytes int    `json:"bytes"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":`, m.ID)
		switch m.Method {
		case "initialize":
			out.WriteString(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"bigresult","version":"1"}}`)
		case "tools/list":
			out.WriteString(`{"tools":[{"name":"big","description":"Returns a result of the size and shape asked for.","inputSchema":{"type":"object","properties":{"shape":{"type":"string","enum":["flat","objects","nested","wide"]},"bytes":{"type":"integer"}},"required":["shape","bytes"],"additionalProperties":false}}]}`)
		case "tools/call":
			write(out, m.Params.Arguments.Shape, m.Params.Arguments.Bytes)
		default:
			out.WriteString(`{}`)
		}
		out.WriteString("}\n")
		out.Flush()
	}
}

// write writes a CallToolResult of about n bytes in the shape asked for.
func write(out *bufio.Writer, shape string, n int) {
	out.WriteString(`{"content":[{"type":"text","text":"`)
	if shape == "flat" {
		chunk := strings.Repeat("lorem ipsum dolor sit amet ", 1024)
		for w := 0; w < n; w += len(chunk) {
			out.WriteString(chunk[:min(len(chunk), n-w)])
		}
		out.WriteString(`"}]}`)
		return
	}
	out.WriteString(`a structured result"}],"structuredContent":{"v":`)
	switch shape {
	case "objects":
		out.WriteByte('[')
		for w := 0; w < n; w += 10 {
			if w > 0 {
				out.WriteByte(',')
			}
			out.WriteString(`{"a":"b"}`)
		}
		out.WriteByte(']')
	case "nested":
		deep := strings.Repeat("[", 400) + "1" + strings.Repeat("]", 400)
		out.WriteByte('[')
		for w := 0; w < n; w += len(deep) + 1 {
			if w > 0 {
				out.WriteByte(',')
			}
			out.WriteString(deep)
		}
		out.WriteByte(']')
	default: // wide
		out.WriteByte('{')
		for i, w := 0, 0; w < n; i++ {
			if i > 0 {
				out.WriteByte(',')
			}
			k := fmt.Sprintf(`"k%x":1`, i)
			out.WriteString(k)
			w += len(k) + 1
		}
		out.WriteByte('}')
	}
	out.WriteString(`}}`)
}
