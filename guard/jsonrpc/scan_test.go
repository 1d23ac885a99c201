package jsonrpc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// scanCases are messages whose reading servers might disagree on, with
// what the scanner must make of them: the error it refuses them with, or
// the values it reads.
var scanCases = []struct {
	name   string
	line   string
	err    error  // nil: accepted
	method string // accepted: the method read
	tool   string // accepted: params.name read
	id     string // accepted, or refused with an id to reply to: the id's bytes
}{
	{"plain call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/a"}}}`, nil, "tools/call", "read_file", "1"},
	{"escaped method key", `{"jsonrpc":"2.0","id":1,"\u006dethod":"tools/call","params":{"name":"x"}}`, nil, "tools/call", "x", "1"},
	{"escaped method value", `{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"n\u0061me":"x"}}`, nil, "tools/call", "x", "1"},
	{"escaped version", `{"jsonrpc":"2\u002e0","id":1,"method":"ping"}`, nil, "ping", "", "1"},
	{"string id with a long e-number in it", `{"jsonrpc":"2.0","id":"x-e12345678901234","method":"ping"}`, nil, "ping", "", `"x-e12345678901234"`},
	{"null id is a request", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x"}}`, nil, "tools/call", "x", "null"},
	{"whitespace everywhere", " \t{ \"jsonrpc\" : \"2.0\" ,\r\n\"id\" : \"a\" , \"method\" : \"ping\" } \t", nil, "ping", "", `"a"`},
	{"surrogate pair", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"t":"\ud83d\ude00"}}`, nil, "ping", "", "1"},

	{"decoy Method", `{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"ping","params":{"name":"x"}}`, jsonrpc.ErrCaseKey, "", "", "1"},
	{"lone Method", `{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"x"}}`, jsonrpc.ErrCaseKey, "", "", "1"},
	{"decoy PARAMS", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"PARAMS":{"name":"y"}}`, jsonrpc.ErrCaseKey, "", "", "1"},
	{"decoy Arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{},"Arguments":{"path":"/etc"}}}`, jsonrpc.ErrCaseKey, "", "", "1"},
	{"lone Arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","Arguments":{"path":"/etc"}}}`, jsonrpc.ErrCaseKey, "", "", "1"},
	{"kelvin sign", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"arguments\":{\"k\":1,\"\u212a\":2}}}", jsonrpc.ErrCaseKey, "", "", "1"},
	{"case pair in arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"path":"/a","Path":"/etc"}}}`, jsonrpc.ErrCaseKey, "", "", "1"},
	{"duplicate method", `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}`, jsonrpc.ErrDuplicateKey, "", "", "1"},
	{"duplicate escaped method", `{"jsonrpc":"2.0","id":1,"method":"ping","\u006d\u0065thod":"tools/call"}`, jsonrpc.ErrDuplicateKey, "", "", "1"},
	{"duplicate name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","name":"y"}}`, jsonrpc.ErrDuplicateKey, "", "", "1"},
	{"duplicate argument", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"path":"/a","path":"/etc/shadow"}}}`, jsonrpc.ErrDuplicateKey, "", "", "1"},
	{"duplicate deep", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":[{"b":{"c":1,"c":2}}]}}`, jsonrpc.ErrDuplicateKey, "", "", "1"},
	{"duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`, jsonrpc.ErrDuplicateKey, "", "", ""},
	{"duplicate in a big object", `{"jsonrpc":"2.0","id":1,"method":"x","params":{` + manyKeys(40) + `,"k7":0}}`, jsonrpc.ErrDuplicateKey, "", "", "1"},
	{"case pair in a big object", `{"jsonrpc":"2.0","id":1,"method":"x","params":{` + manyKeys(40) + `,"K7":0}}`, jsonrpc.ErrCaseKey, "", "", "1"},
	{"lone high surrogate", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"p":"\ud800"}}`, jsonrpc.ErrLoneSurrogate, "", "", "1"},
	{"lone low surrogate in a key", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"\udc00":1}}`, jsonrpc.ErrLoneSurrogate, "", "", "1"},
	{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":\"\xff\"}", jsonrpc.ErrInvalidUTF8, "", "", "1"},
	{"UTF-8 encoded surrogate", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":\"\xed\xa0\x80\"}", jsonrpc.ErrInvalidUTF8, "", "", "1"},
	{"invalid UTF-8 in the id", "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"x\"}", jsonrpc.ErrInvalidUTF8, "", "", ""},
	{"too deep", `{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`, jsonrpc.ErrTooDeep, "", "", ""},
	{"empty method", `{"jsonrpc":"2.0","id":1,"method":""}`, jsonrpc.ErrBadMethod, "", "", "1"},
	{"method not a string", `{"jsonrpc":"2.0","id":1,"method":1}`, jsonrpc.ErrBadMethod, "", "", "1"},
	{"id an object", `{"jsonrpc":"2.0","id":{},"method":"x"}`, jsonrpc.ErrBadID, "", "", ""},
	{"absurd exponent id", `{"jsonrpc":"2.0","id":1e9999999999,"method":"x"}`, jsonrpc.ErrBadID, "", "", ""},
	{"version 1", `{"jsonrpc":"1.0","id":1,"method":"x"}`, jsonrpc.ErrBadVersion, "", "", "1"},
	{"array", `[{"jsonrpc":"2.0","id":1,"method":"x"}]`, jsonrpc.ErrNotObject, "", "", ""},
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + string(rune('0'+i/10)) + string(rune('0'+i%10)) + `":1`)
	}
	// k07 is among them: the test adds "k7"/"K7" which collide only with
	// their own kind below, so make sure "k7" exists.
	return b.String() + `,"k7":1`
}

func TestScanCases(t *testing.T) {
	var sc jsonrpc.Scanner
	for _, tc := range scanCases {
		t.Run(tc.name, func(t *testing.T) {
			line := []byte(tc.line)
			env, err := sc.Scan(line)
			assert.Equal(t, tc.id, string(env.ID.In(line)), "id to reply to")
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.method, env.MethodName)
			assert.Equal(t, tc.tool, jsonrpc.Unquote(env.Name.In(line)))
			assert.Equal(t, jsonrpc.KindRequest, env.Kind)
		})
	}
}

func TestScanSpans(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"t","arguments":{"a":[1,{"b":null}]},"_meta":{}}}`)
	var sc jsonrpc.Scanner
	env, err := sc.Scan(line)
	require.NoError(t, err)
	assert.Equal(t, `"x"`, string(env.ID.In(line)))
	assert.Equal(t, `"t"`, string(env.Name.In(line)))
	assert.Equal(t, `{"a":[1,{"b":null}]}`, string(env.Arguments.In(line)))
	assert.Equal(t, `{"name":"t","arguments":{"a":[1,{"b":null}]},"_meta":{}}`, string(env.Params.In(line)))
	assert.False(t, env.Result.Present())

	resp := []byte(`{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"m"}}`)
	env, err = sc.Scan(resp)
	require.NoError(t, err)
	assert.Equal(t, jsonrpc.KindResponse, env.Kind)
	assert.Equal(t, `{"code":-1,"message":"m"}`, string(env.Error.In(resp)))
}

func TestScanAllocs(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/tmp/ws/notes.txt"}}}`)
	var sc jsonrpc.Scanner
	sc.Scan(line)
	allocs := testing.AllocsPerRun(100, func() { sc.Scan(line) })
	assert.Zero(t, allocs, "scanning a request allocates nothing")
}

func TestIDKey(t *testing.T) {
	key := func(id string) string {
		k, ok := jsonrpc.AppendIDKey(nil, []byte(id))
		require.True(t, ok, id)
		return string(k)
	}
	same := [][]string{
		{`1`, `1.0`, `1e0`, `10e-1`, `0.1e1`, `1.000E+0`},
		{`0`, `-0`, `0.0`, `0e5`},
		{`-25`, `-2.5e1`, `-250e-1`},
		{`1e400`, `10e399`, `1` + strings.Repeat("0", 400)},
		{`"Ab"`, `"\u0041b"`, `"\u0041\u0062"`},
		{`null`},
	}
	for _, group := range same {
		for _, id := range group[1:] {
			assert.Equal(t, key(group[0]), key(id), "%s and %s are one id", group[0], id)
		}
	}
	distinct := []string{`1`, `"1"`, `2`, `-1`, `1e400`, `1e401`, `null`, `"null"`, `0.1`, `12345678901234567890`, `12345678901234567891`}
	seen := map[string]string{}
	for _, id := range distinct {
		k := key(id)
		if prev, ok := seen[k]; ok {
			t.Errorf("%s and %s share the key %q", prev, id, k)
		}
		seen[k] = id
	}
}

// FuzzScan compares the scanner with encoding/json (v1, what Go servers
// use) and with encoding/json/v2's jsontext (I-JSON: duplicate names,
// invalid UTF-8 and lone surrogates refused). Malformed JSON for one is
// malformed for the other; whatever the scanner accepts, v2 accepts, and
// v1 reads the same id, method, params.name and arguments the scanner
// found, also when decoding into a struct (where v1 matches keys without
// regard to case).
func FuzzScan(f *testing.F) {
	for _, tc := range scanCases {
		f.Add([]byte(tc.line))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":-0.5e-3,"error":{"code":1,"message":"x","data":[true,false,null]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var sc jsonrpc.Scanner
		env, err := sc.Scan(data)
		var se *jsonrpc.SyntaxError
		syntaxErr := errors.As(err, &se)
		if errors.Is(err, jsonrpc.ErrTooDeep) || len(bytes.TrimSpace(data)) == 0 {
			return // deeper than v1's limit is not the question; blank lines are skipped by the Reader
		}
		require.Equal(t, !json.Valid(data), syntaxErr, "v1 and the scanner disagree on whether %q is JSON: %v", data, err)
		if syntaxErr || errors.Is(err, jsonrpc.ErrNotObject) {
			return
		}
		v2ok := jsontext.Value(data).IsValid()
		semantic := errors.Is(err, jsonrpc.ErrDuplicateKey) || errors.Is(err, jsonrpc.ErrInvalidUTF8) || errors.Is(err, jsonrpc.ErrLoneSurrogate)
		if !v2ok {
			require.Error(t, err, "v2 refuses %q, the scanner accepts it", data)
			return
		}
		require.False(t, semantic, "v2 accepts %q, the scanner refuses it: %v", data, err)
		if err != nil {
			return
		}
		var doc map[string]any
		require.NoError(t, decodeNumbers(data, &doc))
		sameValue(t, doc["id"], env.ID.In(data), "id")
		assert.Equal(t, doc["method"], orNil(env.Method.Present(), env.MethodName), "method")
		if p, ok := doc["params"].(map[string]any); ok {
			sameValue(t, p["name"], env.Name.In(data), "params.name")
			sameValue(t, p["arguments"], env.Arguments.In(data), "params.arguments")
		}
		var m struct {
			Method string
			Params struct {
				Name      any
				Arguments any
			}
		}
		if decodeNumbers(data, &m) == nil {
			assert.Equal(t, m.Method, env.MethodName, "v1 struct decoding reads another method")
			sameValue(t, m.Params.Name, env.Name.In(data), "v1 struct decoding reads another params.name")
			sameValue(t, m.Params.Arguments, env.Arguments.In(data), "v1 struct decoding reads other arguments")
		}
	})
}

func orNil(ok bool, v any) any {
	if !ok {
		return nil
	}
	return v
}

// sameValue checks that raw (a span's bytes) decodes to want.
func sameValue(t *testing.T, want any, raw []byte, what string) {
	t.Helper()
	if raw == nil {
		assert.Nil(t, want, what)
		return
	}
	var got any
	require.NoError(t, decodeNumbers(raw, &got), what)
	assert.Equal(t, want, got, what)
}

// decodeNumbers decodes with numbers kept as written (1e700 is no float64).
func decodeNumbers(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// BenchmarkScan reads a tools/call request and its response with the
// scanner, and (encoding-json) with encoding/json decoding the envelope
// and the call's params, as the proxy did before.
func BenchmarkScan(b *testing.B) {
	req := []byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/tmp/ws/notes.txt"}}}`)
	resp := []byte(`{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"a small file of notes\n"}],"structuredContent":{"content":"a small file of notes\n"}}}`)
	b.Run("scanner", func(b *testing.B) {
		var sc jsonrpc.Scanner
		for b.Loop() {
			if _, err := sc.Scan(req); err != nil {
				b.Fatal(err)
			}
			if _, err := sc.Scan(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var m jsonrpc.Message
			if err := json.Unmarshal(req, &m); err != nil {
				b.Fatal(err)
			}
			var p struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			}
			if err := json.Unmarshal(m.Params, &p); err != nil {
				b.Fatal(err)
			}
			var r jsonrpc.Message
			if err := json.Unmarshal(resp, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
