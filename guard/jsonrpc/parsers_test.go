package jsonrpc_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// Each program reads one message per line (JSON-encoded, so that any bytes
// survive the trip) and prints what its language's standard parser makes
// of it: the members the guard reads, or that it refused the message.
const pyParser = `
import json, sys
for line in sys.stdin:
    raw = json.loads(line)
    try:
        m = json.loads(raw.encode("utf-8", "surrogateescape").decode("utf-8"))
        if not isinstance(m, dict):
            print(json.dumps({"ok": True, "object": False})); continue
        p = m.get("params")
        out = {"ok": True, "object": True, "method": m.get("method"), "hasId": "id" in m, "id": m.get("id")}
        if isinstance(p, dict):
            out["name"], out["arguments"] = p.get("name"), p.get("arguments")
        print(json.dumps(out, allow_nan=False))
    except Exception as e:
        print(json.dumps({"ok": False, "why": str(e)[:80]}))
    sys.stdout.flush()
`

const jsParser = `
const rl = require("readline").createInterface({input: process.stdin});
rl.on("line", (line) => {
  const raw = Buffer.from(JSON.parse(line), "latin1");
  const text = new TextDecoder("utf-8", {fatal: true});
  try {
    const m = JSON.parse(text.decode(raw));
    if (m === null || typeof m !== "object" || Array.isArray(m)) { console.log(JSON.stringify({ok: true, object: false})); return; }
    const out = {ok: true, object: true, method: m.method ?? null, hasId: Object.prototype.hasOwnProperty.call(m, "id"), id: m.id ?? null};
    if (m.params && typeof m.params === "object" && !Array.isArray(m.params)) { out.name = m.params.name ?? null; out.arguments = m.params.arguments ?? null; }
    console.log(JSON.stringify(out));
  } catch (e) { console.log(JSON.stringify({ok: false, why: String(e).slice(0, 80)})); }
});
`

// parserVerdict is what a server-side parser read.
type parserVerdict struct {
	OK        bool   `json:"ok"`
	Why       string `json:"why"`
	Object    bool   `json:"object"`
	Method    any    `json:"method"`
	HasID     bool   `json:"hasId"`
	ID        any    `json:"id"`
	Name      any    `json:"name"`
	Arguments any    `json:"arguments"`
}

// runParser feeds lines to a parser program and returns its verdicts.
func runParser(t *testing.T, argv []string, lines [][]byte) []parserVerdict {
	t.Helper()
	if _, err := exec.LookPath(argv[0]); err != nil {
		t.Skipf("%s not installed: %v", argv[0], err)
	}
	var in bytes.Buffer
	for _, l := range lines {
		// Lines may hold invalid UTF-8: send them as latin-1 code points
		// (Python re-encodes with surrogateescape, node with latin1), so
		// each program sees the exact bytes.
		var runes []rune
		for _, c := range l {
			runes = append(runes, rune(c))
		}
		enc, err := json.Marshal(string(runes))
		require.NoError(t, err)
		in.Write(enc)
		in.WriteByte('\n')
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = &in
	out, err := cmd.Output()
	require.NoError(t, err, "%v", argv)
	var verdicts []parserVerdict
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v parserVerdict
		require.NoError(t, json.Unmarshal(sc.Bytes(), &v), "%s", sc.Bytes())
		verdicts = append(verdicts, v)
	}
	require.Len(t, verdicts, len(lines))
	return verdicts
}

// TestServerParsersAgree runs the tricky messages through the parsers the
// corpus's servers use (Python's json, JavaScript's JSON.parse): whatever
// the scanner accepts, each parser reads the same method, id, params.name
// and arguments; what it cannot read alike, the scanner refuses.
func TestServerParsersAgree(t *testing.T) {
	var lines [][]byte
	for _, tc := range scanCases {
		lines = append(lines, []byte(tc.line))
	}
	lines = append(lines,
		[]byte(`{"jsonrpc":"2.0","id":"\u0041b","method":"tools/call","params":{"name":"r\u00e9ad","arguments":{"p\u0061th":"/a"}}}`),
		[]byte(`{"jsonrpc":"2.0","id":1.0,"method":"ping"}`),
		[]byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":NaN}}`),
		[]byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":Infinity}}`),
		[]byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":01}}`),
		[]byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1,}}`),
		[]byte("\ufeff{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}"),
		[]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"a\":\"\t\"}}"),
		[]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}\x00"),
		[]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}\u00a0"),
		[]byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"__proto__":{"name":"y"},"name":"x"}}`),
		[]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"__proto__":1,"__PROTO__":2}}}`),
	)
	var sc jsonrpc.Scanner
	for _, p := range []struct {
		name string
		argv []string
	}{
		{"python", []string{"python3", "-c", pyParser}},
		{"node", []string{"node", "-e", jsParser}},
	} {
		t.Run(p.name, func(t *testing.T) {
			verdicts := runParser(t, p.argv, lines)
			for i, line := range lines {
				v := verdicts[i]
				env, err := sc.Scan(line)
				if err != nil {
					continue // refused: no server sees it
				}
				require.True(t, v.OK, "%s refuses %q, which the guard accepts", p.name, line)
				require.True(t, v.Object, "%q", line)
				assert.Equal(t, env.MethodName, v.Method, "method of %q", line)
				assert.Equal(t, env.ID.Present(), v.HasID, "id present in %q", line)
				assertSame(t, v.ID, env.ID.In(line), "id of %q", line)
				assertSame(t, v.Name, env.Name.In(line), "params.name of %q", line)
				assertSame(t, v.Arguments, env.Arguments.In(line), "arguments of %q", line)
			}
		})
	}
}

// assertSame checks that the parser's value (re-encoded by it and decoded
// here) is the value at raw in the message.
func assertSame(t *testing.T, got any, raw []byte, format string, args ...any) {
	t.Helper()
	var want any
	if raw != nil {
		require.NoError(t, json.Unmarshal(raw, &want))
	}
	assert.Equal(t, want, got, append([]any{format}, args...)...)
}
