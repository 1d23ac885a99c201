package jsonrpc_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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
        # The line's bytes arrive as latin-1 code points; a server reads
        # them as UTF-8, strictly.
        m = json.loads(raw.encode("latin-1").decode("utf-8"))
        if not isinstance(m, dict):
            print(json.dumps({"ok": True, "object": False})); continue
        p = m.get("params")
        out = {"ok": True, "object": True, "method": m.get("method"), "hasId": "id" in m, "id": m.get("id")}
        if isinstance(p, dict):
            out["name"], out["arguments"] = p.get("name"), p.get("arguments")
        try:
            print(json.dumps(out, allow_nan=False))
        except ValueError:  # 1e400 is inf to Python: not comparable as JSON
            print(json.dumps({"ok": True, "object": True, "method": out["method"], "hasId": out["hasId"], "unrepresentable": True}))
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
	// Unrepresentable: a number the parser read as infinity.
	Unrepresentable bool `json:"unrepresentable"`
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
		// (Python and node turn them back into bytes with latin-1), so
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
		// Raw (unescaped) UTF-8 in keys and values: the Kelvin sign K
		// folds to "k" and NFKC-normalises to "K", yet every parser must
		// read the key byte for byte.
		[]byte("{\"jsonrpc\":\"2.0\",\"method\":\"l\",\"params\":{\"\":\"\",\"arguments\":{\"\":1,\"\u212a\":2}}}"),
		[]byte("{\"jsonrpc\":\"2.0\",\"id\":\"\u00e9\",\"method\":\"tools/call\",\"params\":{\"name\":\"r\u00e9ad\",\"arguments\":{\"p\u00e4th\":\"/\u00e4\U0001F600\"}}}"),
	)
	corpus := fuzzCorpus(t)
	var sc jsonrpc.Scanner
	var good [][]byte
	for _, line := range lines {
		if _, err := sc.Scan(line); err == nil {
			good = append(good, line)
		}
	}
	mutants := mutate(good, 600)
	t.Logf("%d tricky messages, %d from FuzzScan's corpus, %d mutants", len(lines), len(corpus), len(mutants))
	lines = append(append(lines, corpus...), mutants...)
	accepted := 0
	for _, line := range lines {
		if _, err := sc.Scan(line); err == nil {
			accepted++
		}
	}
	require.Positive(t, accepted, "some messages are accepted, so the parsers' reading is compared")
	t.Logf("%d of %d accepted by the scanner", accepted, len(lines))
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
				if v.Unrepresentable {
					continue
				}
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
	if raw != nil && json.Unmarshal(raw, &want) != nil {
		return // a number beyond float64: JavaScript reads Infinity, Go refuses
	}
	assert.Equal(t, want, got, append([]any{format}, args...)...)
}

// fuzzCorpus returns FuzzScan's inputs: the committed seeds and, when this
// machine fuzzed it, the generated corpus in the build cache.
func fuzzCorpus(t *testing.T) [][]byte {
	dirs := []string{filepath.Join("testdata", "fuzz", "FuzzScan")}
	if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
		dirs = append(dirs, filepath.Join(strings.TrimSpace(string(out)), "fuzz", "github.com", "mcpguard", "mcpguard", "guard", "jsonrpc", "FuzzScan"))
	}
	var lines [][]byte
	for _, dir := range dirs {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				continue
			}
			// "go test fuzz v1\n[]byte(\"...\")\n": one Go-quoted value.
			_, lit, ok := strings.Cut(string(b), "[]byte(")
			if !ok {
				continue
			}
			v, err := strconv.Unquote(strings.TrimSuffix(strings.TrimSpace(lit), ")"))
			if err != nil || strings.ContainsAny(v, "\n\r") {
				continue // one message per line: the Reader splits at newlines
			}
			lines = append(lines, []byte(v))
		}
	}
	return lines
}

var (
	stringToken  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	simpleMember = regexp.MustCompile(`"[a-zA-Z_]+":(?:"[^"\\]*"|-?[0-9.eE+-]+|null|true|false)`)
)

// mutate derives n messages from the given ones by the changes that make
// parsers disagree: a character of a key or value as a \u escape, a key's
// letter in upper case, a member repeated with another value, whitespace,
// an id or number spelt otherwise. The seed is fixed: the same messages
// every run.
func mutate(base [][]byte, n int) [][]byte {
	rng := rand.New(rand.NewPCG(19, 20))
	var out [][]byte
	for len(out) < n {
		m := []byte(string(base[rng.IntN(len(base))]))
		for range 1 + rng.IntN(3) {
			switch rng.IntN(5) {
			case 0, 1: // escape or upper-case one character of a string
				toks := stringToken.FindAllIndex(m, -1)
				if len(toks) == 0 {
					continue
				}
				tk := toks[rng.IntN(len(toks))]
				if tk[1]-tk[0] < 3 {
					continue
				}
				i := tk[0] + 1 + rng.IntN(tk[1]-tk[0]-2)
				c := m[i]
				if c == '\\' || c >= 0x80 || (i > 0 && m[i-1] == '\\') {
					continue
				}
				var rep []byte
				if rng.IntN(2) == 0 {
					rep = fmt.Appendf(nil, `\u%04x`, c)
				} else {
					rep = []byte(strings.ToUpper(string(c)))
				}
				m = append(m[:i], append(rep, m[i+1:]...)...)
			case 2: // repeat a member with another value
				mems := simpleMember.FindAllIndex(m, -1)
				if len(mems) == 0 {
					continue
				}
				mb := mems[rng.IntN(len(mems))]
				key, _, _ := strings.Cut(string(m[mb[0]:mb[1]]), ":")
				dup := []byte("," + key + `:"decoy"`)
				m = append(m[:mb[1]], append(dup, m[mb[1]:]...)...)
			case 3: // whitespace after a separator
				if i := bytes.IndexAny(m[1:], ",:"); i >= 0 {
					i++
					m = append(m[:i+1], append([]byte(" \t"), m[i+1:]...)...)
				}
			case 4: // a number spelt otherwise
				m = bytes.Replace(m, []byte(`"id":1,`), []byte(`"id":1.0e0,`), 1)
			}
		}
		out = append(out, m)
	}
	return out
}
