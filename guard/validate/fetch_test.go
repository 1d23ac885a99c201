package validate

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/internal/stagetest"
	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// fetchOptions admit the host docs.example.org only, as a policy whose
// network list names it would.
func fetchOptions() Options {
	return Options{Fetch: func(_ context.Context, uri string) string {
		if strings.HasPrefix(uri, "https://docs.example.org/") {
			return ""
		}
		return "not in the policy's network allow-list"
	}}
}

// Icons the client would fetch for the server are removed wherever they
// are, unless data: or admitted by the policy; the rest is left as it was.
func TestForeignIconsRemoved(t *testing.T) {
	o := fetchOptions()
	ctx := context.Background()
	in := `{"tools":[{"name":"a","icons":[{"src":"https://evil.example/i.png?d=secret"},{"src":"data:image/png;base64,iVBOR"},{"src":"https://docs.example.org/a.png","sizes":["48x48"]}]},` +
		`{"name":"b","icons":[{"src":"javascript:alert(1)"}],"_meta":{"icons":[{"src":"HTTP://evil.example/x"}]}}],"nextCursor":"c"}`
	out, removed := o.withoutForeignIcons(ctx, []byte(in))
	assert.JSONEq(t, `{"tools":[{"name":"a","icons":[{"src":"data:image/png;base64,iVBOR"},{"src":"https://docs.example.org/a.png","sizes":["48x48"]}]},`+
		`{"name":"b","icons":[],"_meta":{"icons":[]}}],"nextCursor":"c"}`, string(out))
	require.Len(t, removed, 3)
	assert.Contains(t, removed[0], "https://evil.example/i.png?d=secret")
	assert.Contains(t, removed[1], "not a data:, http(s) or file: URI")
	var sc jsonrpc.Scanner
	require.NoError(t, sc.Value(out))

	same := []byte(`{"tools":[{"name":"a","icons":[{"src":"data:,x"}]}],"icons":"not an array"}`)
	out, removed = o.withoutForeignIcons(ctx, same)
	assert.Empty(t, removed)
	assert.Equal(t, string(same), string(out))
}

// Through the layer: a tools/list answer keeps its tools and loses the
// foreign icon; a URL-mode elicitation outside the policy is dropped
// (answered to the server with a denial), one inside passes; icons in the
// server's own messages are removed too.
func TestClientFetchRule(t *testing.T) {
	ctx := context.Background()
	o := fetchOptions()
	srv := rawServer{"tools/list": `{"tools":[{"name":"t","inputSchema":{"type":"object"},"icons":[{"src":"http://127.0.0.1:9/i?d=ws-notes"}]}]}`}
	h := stagetest.Handler(Stage(o), srv.handle)
	r := h(ctx, &guard.Request{Method: "tools/list", ID: json.RawMessage("1")})
	require.Nil(t, r.Error)
	assert.JSONEq(t, `{"tools":[{"name":"t","inputSchema":{"type":"object"},"icons":[]}]}`, string(r.Result))

	hook := ServerHook(o)
	elicit := func(url string) *guard.ServerMessage {
		return hook(ctx, &guard.ServerMessage{Kind: jsonrpc.KindRequest, Method: "elicitation/create", ID: json.RawMessage(`"s1"`),
			Params: json.RawMessage(`{"mode":"url","elicitationId":"e1","url":"` + url + `","message":"Sign in"}`)})
	}
	assert.Nil(t, elicit("https://evil.example/login?d=ws-notes"))
	assert.Nil(t, elicit("ftp://evil.example/x"))
	assert.NotNil(t, elicit("https://docs.example.org/login"))
	m := hook(ctx, &guard.ServerMessage{Kind: jsonrpc.KindNotification, Method: "notifications/message",
		Params: json.RawMessage(`{"level":"info","data":{"icons":[{"src":"https://evil.example/i"}]}}`)})
	require.NotNil(t, m)
	assert.JSONEq(t, `{"level":"info","data":{"icons":[]}}`, string(m.Params))

	// Without a policy's judgement (Fetch nil) only other schemes go.
	out, removed := (&Options{}).withoutForeignIcons(ctx, []byte(`{"icons":[{"src":"https://x/y"},{"src":"smb://x/y"}]}`))
	assert.JSONEq(t, `{"icons":[{"src":"https://x/y"}]}`, string(out))
	assert.Len(t, removed, 1)
}

// FuzzForeignIcons: on whatever value the Scanner accepts, the icon
// filter's output is a value the Scanner accepts, and one with no icons
// left that a policy refusing everything but data: would remove.
func FuzzForeignIcons(f *testing.F) {
	f.Add([]byte(`{"tools":[{"icons":[{"src":"https://e/x"},{"src":"data:,"}]}]}`))
	f.Add([]byte(`[{"icons":[1,{"src":2},{"src":"file:///x"}]},{"a":{"icons":[]}}]`))
	f.Add([]byte(`{"icons" : [ {"src" : "http://x" } , {} ] , "b":"icons"}`))
	o := Options{Fetch: func(context.Context, string) string { return "refused" }}
	f.Fuzz(func(t *testing.T, v []byte) {
		var sc jsonrpc.Scanner
		if sc.Value(v) != nil {
			return
		}
		out, _ := o.withoutForeignIcons(context.Background(), v)
		require.NoError(t, sc.Value(out), "%q from %q", out, v)
		again, removed := o.withoutForeignIcons(context.Background(), out)
		assert.Empty(t, removed, "%q still has icons to remove", out)
		assert.Equal(t, string(out), string(again))
	})
}
