package jsonrpc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

func TestCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{" {\"jsonrpc\" : \"2.0\",\r\n \"id\":1 ,\t\"method\":\"ping\"} ", `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{`{"jsonrpc":"2.0","id":1,"\u006dethod":"tools\/call"}`, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`},
		{`{"jsonrpc":"2.0","id":"\u0041","result":{"t":"\u003cb\u003e \u00e9 \ud83d\ude00"}}`, `{"jsonrpc":"2.0","id":"A","result":{"t":"<b> é 😀"}}`},
		{`{"jsonrpc":"2.0","id":1,"result":{"t":"a\u000Ab\u0001c\u001Fd"}}`, `{"jsonrpc":"2.0","id":1,"result":{"t":"a\nb\u0001c\u001fd"}}`},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\":\"a\u2028b\u2029c\u0085d\"}}", `{"jsonrpc":"2.0","id":1,"result":{"t":"a\u2028b\u2029c\u0085d"}}`},
		{`{"jsonrpc":"2.0","id":1.0e0,"result":[ 1.50 , -0 , 1E+2 , true , null ]}`, `{"jsonrpc":"2.0","id":1.0e0,"result":[1.50,-0,1E+2,true,null]}`},
		{`{"jsonrpc":"2.0","id":1,"result":{"q":"\"\\\/"}}`, `{"jsonrpc":"2.0","id":1,"result":{"q":"\"\\/"}}`},
	} {
		var sc jsonrpc.Scanner
		env, err := sc.Scan([]byte(tc.in))
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.in == tc.want, env.Canonical, "Canonical flag of %q", tc.in)
		out, env2, err := sc.Canonical([]byte(tc.in), env)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, string(out))
		assert.True(t, env2.Canonical, "the canonical form of %q is canonical", tc.in)
		assert.Equal(t, tc.want, string(jsonrpc.AppendCanonical(nil, []byte(tc.want))), "idempotent")
	}
}

func TestStrictRefusesCR(t *testing.T) {
	// One line to a reader that ends lines only at LF; three to Python's
	// universal newlines and to Node's readline: a ping hiding a call.
	line := "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\r{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"run\"}}\r}}"
	var lax jsonrpc.Scanner
	env, err := lax.Scan([]byte(line))
	require.NoError(t, err)
	assert.Equal(t, "ping", env.MethodName)
	strict := jsonrpc.Scanner{Strict: true}
	env, err = strict.Scan([]byte(line))
	require.ErrorIs(t, err, jsonrpc.ErrLineBreak)
	assert.Equal(t, "1", string(env.ID.In([]byte(line))), "the refusal still goes to the request's id")
	assert.Equal(t, jsonrpc.CodeInvalidRequest, jsonrpc.ErrorCode(err))
}

// FuzzCanonical: whatever the scanner accepts, its canonical encoding is
// accepted too (strictly: no CR; a message of two kinds is refused for
// that alone), reads as the same value, is flagged
// canonical, has no line break outside a string, and is its own canonical
// encoding; the Canonical flag is set exactly when the line already is.
func FuzzCanonical(f *testing.F) {
	for _, tc := range scanCases {
		f.Add([]byte(tc.line))
	}
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\":\"\\u2028 \u2028 \\/ \\uABCD \\ud83d\\ude00\"}}"))
	f.Add([]byte(" {\"jsonrpc\":\"2.0\" ,\"id\":[1, 2.0e+3],\"method\":\"x\"}\r"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var sc jsonrpc.Scanner
		env, err := sc.Scan(data)
		if err != nil {
			return
		}
		out := jsonrpc.AppendCanonical(nil, data)
		assert.Equal(t, env.Canonical, string(out) == string(data), "flag against output for %q", data)
		strict := jsonrpc.Scanner{Strict: true}
		env2, err := strict.Scan(out)
		if errors.Is(err, jsonrpc.ErrMixedKinds) {
			// Refused for what it is, not for its encoding.
			mixed := env.Method.Present() && (env.Result.Present() || env.Error.Present()) || env.Result.Present() && env.Error.Present()
			require.True(t, mixed, "%q refused as mixed", out)
			return
		}
		require.NoError(t, err, "canonical %q of %q", out, data)
		assert.True(t, env2.Canonical, "canonical %q of %q not flagged", out, data)
		assert.Equal(t, string(out), string(jsonrpc.AppendCanonical(nil, out)))
		for _, lb := range []string{"\n", "\r", "\u2028", "\u2029", "\u0085"} {
			assert.NotContains(t, string(out), lb)
		}
		var a, b any
		require.NoError(t, decodeNumbers(data, &a))
		require.NoError(t, decodeNumbers(out, &b))
		assert.Equal(t, a, b, "%q and its canonical %q differ", data, out)
		assert.Equal(t, env.MethodName, env2.MethodName)
		sameValue(t, nilIfEmpty(env.ID.In(data)), env2.ID.In(out), "id")
	})
}

func nilIfEmpty(b []byte) any {
	if b == nil {
		return nil
	}
	var v any
	if decodeNumbers(b, &v) != nil {
		return errors.New("undecodable")
	}
	return v
}

func BenchmarkCanonical(b *testing.B) {
	resp := []byte(`{"jsonrpc": "2.0", "id": 17, "result": {"content": [{"type": "text", "text": "a small \u003cfile\u003e of notes\n` + strings.Repeat("x", 900) + `"}]}}`)
	for b.Loop() {
		jsonrpc.AppendCanonical(make([]byte, 0, len(resp)), resp)
	}
}

// A message with the members of two kinds is refused where layers judge
// (readers pick a kind by their own order); the id still gets the refusal.
// "error": null is no error (encoding/json reads it so).
func TestStrictRefusesMixedKinds(t *testing.T) {
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":5,"result":{"content":[]},"error":{"code":1,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"ping","result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run"},"error":{"code":1,"message":"x"}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","result":{}}`,
		`{"jsonrpc":"2.0","id":5,"result":null,"error":{"code":1,"message":"x"}}`,
	} {
		var lax jsonrpc.Scanner
		_, err := lax.Scan([]byte(line))
		require.NoError(t, err, "a byte relay reads %s", line)
		strict := jsonrpc.Scanner{Strict: true}
		env, err := strict.Scan([]byte(line))
		require.ErrorIs(t, err, jsonrpc.ErrMixedKinds, line)
		assert.Equal(t, jsonrpc.CodeInvalidRequest, jsonrpc.ErrorCode(err))
		if strings.Contains(line, `"id"`) {
			assert.Equal(t, "5", string(env.ID.In([]byte(line))), "the refusal goes to the id")
		}
	}
	strict := jsonrpc.Scanner{Strict: true}
	env, err := strict.Scan([]byte(`{"jsonrpc":"2.0","id":5,"result":{},"error":null}`))
	require.NoError(t, err)
	assert.Equal(t, jsonrpc.KindResponse, env.Kind)
}
