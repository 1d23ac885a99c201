package guard_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// rawResult is what the rawecho server answered: the line it got.
func rawResult(t *testing.T, m map[string]any) (string, []string) {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	require.True(t, ok, "no result: %v", m)
	var seen []string
	for _, s := range r["seen"].([]any) {
		seen = append(seen, s.(string))
	}
	return r["raw"].(string), seen
}

// With layers, the server gets the canonical encoding of what they judged
// (one line, no whitespace, strings from their values); without, the
// client's bytes.
func TestServerGetsCanonicalBytes(t *testing.T) {
	in := " {\"jsonrpc\" : \"2.0\", \"id\" : 1 ,\t\"\\u006dethod\":\"tools\\/call\",\"params\":{\"name\":\"t\",\"arguments\":{\"s\":\"\\u003cb\\u003e \\ud83d\\ude00 \u2028\"}}} "
	want := "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\",\"arguments\":{\"s\":\"<b> \U0001F600 \\u2028\"}}}"
	for name, stages := range map[string][]guard.Stage{"raw": nil, "judged": {noop{}}, "waited": {waitsFor{}}} {
		t.Run(name, func(t *testing.T) {
			c := startRaw(t, "rawecho", stages...)
			c.send(in)
			got, _ := rawResult(t, c.recv())
			if stages == nil {
				assert.Equal(t, in, got, "C0 relays bytes")
			} else {
				assert.Equal(t, want, got)
			}
		})
	}
}

// The client gets the canonical encoding of the server's answer too.
func TestClientGetsCanonicalBytes(t *testing.T) {
	c := startRaw(t, "reencode", noop{})
	c.send(`{"jsonrpc":"2.0","id":"Ab","method":"x","params":{"t":"\u00e9\/"}}`)
	line := string(c.recvRaw())
	assert.Equal(t, `{"jsonrpc":"2.0","id":"Ab","result":{"echo":{"t":"é/"}}}`, line)
}

// A CR inside a message is refused where layers judge: Python's and Node's
// readers would end a line there and run what follows unjudged. Without
// layers the bytes pass as they are.
func TestLoneCRRefused(t *testing.T) {
	line := "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\r{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"run\"}}\r}}"
	t.Run("judged", func(t *testing.T) {
		c := startRaw(t, "rawecho", noop{})
		c.send(line)
		m := c.recv()
		require.Contains(t, m, "error")
		assert.Equal(t, 1.0, m["id"])
		assert.Contains(t, m["error"].(map[string]any)["message"], "carriage return")
		c.send(`{"jsonrpc":"2.0","id":2,"method":"after"}`)
		_, seen := rawResult(t, c.recv())
		assert.Equal(t, []string{`{"jsonrpc":"2.0","id":2,"method":"after"}`}, seen, "the server never saw the CR line")
	})
	t.Run("raw", func(t *testing.T) {
		c := startRaw(t, "rawecho")
		c.send(line)
		got, _ := rawResult(t, c.recv())
		assert.Equal(t, line, got)
	})
}

// clientJudge drops notifications named "drop", rewrites those named
// "rewrite", and refuses every answer to roots/list.
type clientJudge struct {
	noop
	seen chan string
}

func (j clientJudge) Client(_ context.Context, m *guard.ClientMessage) *guard.ClientMessage {
	j.seen <- m.Kind.String() + " " + m.Method
	switch {
	case m.Method == "drop":
		return nil
	case m.Method == "rewrite":
		out := *m
		out.Params = json.RawMessage(`{"rewritten":true}`)
		return &out
	case m.Kind == jsonrpc.KindResponse && m.Method == "roots/list":
		return nil
	}
	return m
}

// Notifications and the client's answers go through the ClientJudges; an
// answer is judged as an answer to the server's request's method, a
// refused one becomes a denial to the server, and an answer to no request
// of the server's is dropped.
func TestClientJudges(t *testing.T) {
	j := clientJudge{seen: make(chan string, 16)}
	c := startRaw(t, "rawecho", j)
	c.send(`{"jsonrpc":"2.0","method":"drop","params":{}}`)
	c.send(`{"jsonrpc":"2.0","method":"rewrite","params":{"a":1}}`)
	c.send(`{"jsonrpc":"2.0","method":"keep","params":{"a":1}}`)
	c.send(`{"jsonrpc":"2.0","id":"nobody","result":{}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"ask"}`)
	req := c.recv()
	assert.Equal(t, "roots/list", req["method"])
	_, seen := rawResult(t, c.recv())
	assert.Equal(t, []string{
		`{"jsonrpc":"2.0","method":"rewrite","params":{"rewritten":true}}`,
		`{"jsonrpc":"2.0","method":"keep","params":{"a":1}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ask"}`,
	}, seen)
	c.send(`{"jsonrpc":"2.0","id":"s1","result":{"roots":[{"uri":"file:///"}]}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"after"}`)
	_, seen = rawResult(t, c.recv())
	last := seen[len(seen)-2]
	var denial jsonrpc.Message
	require.NoError(t, json.Unmarshal([]byte(last), &denial), last)
	require.NotNil(t, denial.Error, last)
	assert.Equal(t, jsonrpc.CodeDenied, denial.Error.Code)
	assert.Equal(t, `"s1"`, string(denial.ID))
	var judged []string
	for len(j.seen) > 0 {
		judged = append(judged, <-j.seen)
	}
	assert.Equal(t, []string{"notification drop", "notification rewrite", "notification keep", "response roots/list"}, judged)
	assert.Contains(t, c.stderr.String(), `dropped the client's answer to id "nobody"`)
}

// A server message with the members of two kinds (a result and an error;
// a request with a result, under the id of the client's request) never
// reaches the client where layers judge: the client's request gets an
// error instead, and what the message held is not relayed. Without
// layers the bytes pass as they are.
func TestMixedKindsRefused(t *testing.T) {
	for _, method := range []string{"mixed", "hybrid"} {
		t.Run(method+"/judged", func(t *testing.T) {
			c := startRaw(t, "echo", noop{})
			c.send(`{"jsonrpc":"2.0","id":7,"method":"` + method + `"}`)
			line := string(c.recvRaw())
			assert.NotContains(t, line, `"said"`)
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m))
			assert.Equal(t, 7.0, m["id"])
			require.Contains(t, m, "error", line)
			assert.Contains(t, m["error"].(map[string]any)["message"], "two kinds")
			c.send(`{"jsonrpc":"2.0","id":8,"method":"after"}`)
			assert.Equal(t, 8.0, c.recv()["id"], "the session goes on")
		})
		t.Run(method+"/raw", func(t *testing.T) {
			c := startRaw(t, "echo")
			c.send(`{"jsonrpc":"2.0","id":7,"method":"` + method + `"}`)
			assert.Contains(t, string(c.recvRaw()), `"said":"`+method+`"`)
		})
	}
}
