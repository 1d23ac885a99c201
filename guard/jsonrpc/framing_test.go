package jsonrpc_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// The readers MCP peers use to split a stdio stream into messages. Each
// program reads its whole stdin as a peer does and prints, for every line
// it reads, the message as JSON ({"v": value}) or {"bad": true} when the
// line is not JSON.
var frameReaders = map[string][]string{
	// The official Python SDK's stdio server reads
	// anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8"))
	// line by line: universal newlines, so a lone CR ends a line too. The
	// SDK cannot be installed here (no PyPI); this is its reader, with
	// python3's own io, and json for pydantic's parser.
	"python-sdk-server": {"python3", "-c", `
import io, json, sys
for line in io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="strict"):
    if not line.strip():
        continue
    try:
        print(json.dumps({"v": json.loads(line)}))
    except Exception:
        print(json.dumps({"bad": True}))
`},
	// The Python SDK's stdio client splits what it reads on "\n" only.
	"python-sdk-client": {"python3", "-c", `
import json, sys
for line in sys.stdin.buffer.read().decode("utf-8").split("\n"):
    if not line.strip():
        continue
    try:
        print(json.dumps({"v": json.loads(line)}))
    except Exception:
        print(json.dumps({"bad": True}))
`},
	// Node's readline, as this repository's JavaScript servers and many
	// others read stdin: CR, LF and CRLF end a line.
	"node-readline": {"node", "-e", `
const rl = require("readline").createInterface({input: process.stdin, crlfDelay: Infinity});
rl.on("line", (line) => {
  if (!line.trim()) return;
  try { console.log(JSON.stringify({v: JSON.parse(line)})); } catch (e) { console.log(JSON.stringify({bad: true})); }
});
`},
}

// readGo is Go's bufio.Scanner (mcp-go reads lines with bufio too).
func readGo(stream []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var v any
		if err := decodeNumbers(sc.Bytes(), &v); err != nil {
			out = append(out, `{"bad":true}`)
			continue
		}
		b, _ := json.Marshal(map[string]any{"v": v})
		out = append(out, string(b))
	}
	return out
}

func runReader(t *testing.T, argv []string, stream []byte) []string {
	t.Helper()
	if _, err := exec.LookPath(argv[0]); err != nil {
		t.Skipf("%s not installed: %v", argv[0], err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(stream)
	out, err := cmd.Output()
	require.NoError(t, err, "%v", argv)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l == "" {
			continue
		}
		// Re-encode through Go so that all readers' output compares alike.
		var v any
		require.NoError(t, decodeNumbers([]byte(l), &v))
		b, _ := json.Marshal(v)
		lines = append(lines, string(b))
	}
	return lines
}

// guardReads is what a guard with layers makes of a stream: the messages
// it judges (the canonical lines it forwards), each as {"v": value}, and
// the stream it forwards.
func guardReads(t *testing.T, stream []byte) (judged []string, forwarded []byte) {
	t.Helper()
	r := jsonrpc.NewReader(bytes.NewReader(stream))
	sc := jsonrpc.Scanner{Strict: true}
	for {
		line, err := r.Next()
		if errors.Is(err, io.EOF) {
			return judged, forwarded
		}
		require.NoError(t, err)
		env, err := sc.Scan(line)
		if err != nil {
			continue // refused: answered with an error, never forwarded
		}
		out, _, err := sc.Canonical(line, env)
		require.NoError(t, err)
		var v any
		require.NoError(t, decodeNumbers(out, &v))
		b, _ := json.Marshal(map[string]any{"v": v})
		judged = append(judged, string(b))
		forwarded = append(append(forwarded, out...), '\n')
	}
}

// framingStreams are byte streams a peer may send, the tricky ones being
// those where readers disagree on where a message ends.
var framingStreams = map[string]string{
	"plain":              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
	"crlf":               "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\r\n",
	"lone CR hides call": "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\r{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"run\",\"arguments\":{\"cmd\":\"id\"}}}\r}}\n",
	"CR as whitespace":   "{\"jsonrpc\":\"2.0\",\r\"id\":3,\r\"method\":\"ping\"}\n",
	"CR CR LF":           "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}\r\r\n",
	"U+2028 in a string": "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"t\",\"arguments\":{\"s\":\"a\u2028b\u2029c\u0085d\"}}}\n",
	"escapes":            "{\"jsonrpc\":\"2.0\",\"id\":\"\\u0041\",\"\\u006dethod\":\"tools\\/call\",\"params\":{\"name\":\"t\",\"arguments\":{\"s\":\"\\ud83d\\ude00\\r\\n\"}}}\n",
	"pretty on one line": "{ \"jsonrpc\" : \"2.0\" , \"id\" : 6 ,\t\"method\" : \"ping\" }\n",
	"no final newline":   "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}",
}

// TestReadersSplitAsJudged: whatever a peer sends, every reader MCP peers
// use (Python SDK server and client, Node readline, Go bufio) splits and
// decodes the bytes a guard with layers forwards into exactly the messages
// the guard judged, with the same values. The raw bytes of the lone-CR
// stream, which C0 relays, are read as more messages than one by Python's
// and Node's readers: that is the attack the canonical forwarding and the
// refusal of CR close.
func TestReadersSplitAsJudged(t *testing.T) {
	// One stream of everything the guard forwards, so that each reader
	// starts once.
	var judged []string
	var forwarded []byte
	for _, name := range slices.Sorted(maps.Keys(framingStreams)) {
		j, f := guardReads(t, []byte(framingStreams[name]))
		judged, forwarded = append(judged, j...), append(forwarded, f...)
	}
	require.Len(t, judged, 9, "every stream but the lone CR's gives its messages")
	assert.Equal(t, judged, readGo(forwarded), "Go bufio")
	for reader, argv := range frameReaders {
		assert.Equal(t, judged, runReader(t, argv, forwarded), reader)
	}
	raw := []byte(framingStreams["lone CR hides call"])
	j, _ := guardReads(t, raw)
	assert.Empty(t, j, "the guard refuses the message with a CR in it")
	for _, reader := range []string{"python-sdk-server", "node-readline"} {
		got := runReader(t, frameReaders[reader], raw)
		assert.Greater(t, len(got), 1, "%s reads the raw bytes as several messages", reader)
		assert.Contains(t, strings.Join(got, "\n"), `"method":"tools/call"`, "%s finds the hidden call", reader)
	}
}

// lineBreaks are where the strictest line readers end a line: Python's
// str.splitlines (a superset of universal newlines and of Node's
// readline: CR, LF, CRLF, VT, FF, FS, GS, RS, NEL, U+2028, U+2029).
var lineBreaks = []string{"\r\n", "\r", "\n", "\v", "\f", "\x1c", "\x1d", "\x1e", "\u0085", "\u2028", "\u2029"}

// splitLines splits s at every one of lineBreaks and drops blank pieces.
func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		cut, n := len(s), 0
		for _, lb := range lineBreaks {
			if i := strings.Index(s, lb); i >= 0 && (i < cut || i == cut && len(lb) > n) {
				cut, n = i, len(lb)
			}
		}
		if piece := s[:cut]; strings.TrimSpace(piece) != "" {
			out = append(out, piece)
		}
		s = s[cut+n:]
	}
	return out
}

// FuzzForwardedFraming: whatever bytes a peer sends, the stream a guard
// with layers forwards splits, at every line break any reader honours,
// into exactly the lines it judged, byte for byte; and a reader that
// ignores lines and decodes one JSON value after another (encoding/json's
// Decoder, as the Go SDK's stdio transport reads) finds the same values,
// one per judged line. TestReadersSplitAsJudged runs the real readers on
// chosen streams; this runs their splitting rule on any.
func FuzzForwardedFraming(f *testing.F) {
	for _, s := range framingStreams {
		f.Add([]byte(s))
	}
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"s\":\"\v\f\x1c\"}}\n"))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := jsonrpc.NewReader(bytes.NewReader(stream))
		sc := jsonrpc.Scanner{Strict: true}
		var judged []string
		var forwarded []byte
		for {
			line, err := r.Next()
			if err != nil {
				require.ErrorIs(t, err, io.EOF)
				break
			}
			env, err := sc.Scan(line)
			if err != nil {
				continue
			}
			out, _, err := sc.Canonical(line, env)
			require.NoError(t, err)
			judged = append(judged, string(out))
			forwarded = append(append(forwarded, out...), '\n')
		}
		assert.Equal(t, judged, splitLines(string(forwarded)), "split of %q", forwarded)
		d := json.NewDecoder(bytes.NewReader(forwarded))
		d.UseNumber()
		for i := 0; ; i++ {
			var got any
			if err := d.Decode(&got); errors.Is(err, io.EOF) {
				require.Equal(t, len(judged), i, "values in %q", forwarded)
				break
			} else {
				require.NoError(t, err)
			}
			require.Less(t, i, len(judged), "values in %q", forwarded)
			var want any
			require.NoError(t, decodeNumbers([]byte(judged[i]), &want))
			assert.Equal(t, want, got)
		}
	})
}
