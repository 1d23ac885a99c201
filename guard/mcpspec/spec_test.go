package mcpspec_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
	"github.com/mcpguard/mcpguard/guard/mcpspec"
)

// The committed table is what the generator makes of the committed
// schemas: `go generate ./guard/mcpspec` after changing either.
func TestTableIsGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the generator")
	}
	out := filepath.Join(t.TempDir(), "table_gen.go")
	cmd := exec.Command("go", "run", "./internal/gen", ".", out)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	want, err := os.ReadFile(out)
	require.NoError(t, err)
	got, err := os.ReadFile("table_gen.go")
	require.NoError(t, err)
	assert.True(t, string(want) == string(got), "table_gen.go is stale: run go generate ./guard/mcpspec")
}

func TestTable(t *testing.T) {
	for _, tc := range []struct {
		from     mcpspec.Side
		kind     mcpspec.Kind
		method   string
		result   string
		versions int
	}{
		{mcpspec.Client, mcpspec.Request, "tools/call", "CallToolResult", 2},
		{mcpspec.Client, mcpspec.Request, "ping", "EmptyResult", 2},
		{mcpspec.Server, mcpspec.Request, "ping", "EmptyResult", 2},
		{mcpspec.Client, mcpspec.Request, "tasks/result", "GetTaskPayloadResult", 1},
		{mcpspec.Server, mcpspec.Request, "elicitation/create", "ElicitResult", 2},
		{mcpspec.Server, mcpspec.Request, "roots/list", "ListRootsResult", 2},
		{mcpspec.Server, mcpspec.Notification, "notifications/progress", "", 2},
		{mcpspec.Server, mcpspec.Notification, "notifications/tasks/status", "", 1},
		{mcpspec.Client, mcpspec.Notification, "notifications/roots/list_changed", "", 2},
	} {
		m, ok := mcpspec.Lookup(tc.from, tc.kind, tc.method)
		require.True(t, ok, "%v %v %s", tc.from, tc.kind, tc.method)
		assert.Equal(t, tc.result, m.ResultType, tc.method)
		assert.Len(t, m.Versions, tc.versions, tc.method)
	}
	_, ok := mcpspec.Lookup(mcpspec.Client, mcpspec.Notification, "tools/call")
	assert.False(t, ok, "tools/call is no notification")
	_, ok = mcpspec.Lookup(mcpspec.Server, mcpspec.Request, "tools/call")
	assert.False(t, ok, "servers do not call tools")
	assert.True(t, mcpspec.Known("tools/call"))
	assert.False(t, mcpspec.Known("tools/execute"))
	assert.Len(t, mcpspec.Messages(), 39, "17 client requests, 5 client notifications, 8 server requests, 9 server notifications")
}

func TestCheckKeys(t *testing.T) {
	get := func(from mcpspec.Side, kind mcpspec.Kind, method string) mcpspec.Message {
		m, ok := mcpspec.Lookup(from, kind, method)
		require.True(t, ok, method)
		return m
	}
	list := get(mcpspec.Client, mcpspec.Request, "tools/list")
	init := get(mcpspec.Client, mcpspec.Request, "initialize")
	call := get(mcpspec.Client, mcpspec.Request, "tools/call")
	progress := get(mcpspec.Server, mcpspec.Notification, "notifications/progress")
	for _, tc := range []struct {
		name string
		err  error
		fn   func() error
	}{
		{"Tools", jsonrpc.ErrCaseKey, func() error { return list.CheckResult([]byte(`{"Tools":[{"name":"x"}]}`)) }},
		{"tool Description", jsonrpc.ErrCaseKey, func() error {
			return list.CheckResult([]byte(`{"tools":[{"name":"x","Description":"y","inputSchema":{"type":"object"}}]}`))
		}},
		{"schema properties are data", nil, func() error {
			return list.CheckResult([]byte(`{"tools":[{"name":"x","inputSchema":{"type":"object","properties":{"Path":{"type":"string"},"path":{}}}}],"nextCursor":"c"}`))
		}},
		{"Instructions", jsonrpc.ErrCaseKey, func() error {
			return init.CheckResult([]byte(`{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"s","version":"1"},"Instructions":"x"}`))
		}},
		{"escaped Instructions", jsonrpc.ErrCaseKey, func() error {
			return init.CheckResult([]byte(`{"\u0049nstructions":"x"}`))
		}},
		{"extra member", nil, func() error { return init.CheckResult([]byte(`{"instructions":"x","vendorThing":{"Instructions":1}}`)) }},
		{"structuredContent is data", nil, func() error {
			return call.CheckResult([]byte(`{"content":[{"type":"text","text":"t"}],"structuredContent":{"Content":1,"TEXT":[{"Type":2}]}}`))
		}},
		{"content item Text", jsonrpc.ErrCaseKey, func() error {
			return call.CheckResult([]byte(`{"content":[{"type":"text","Text":"t"}]}`))
		}},
		{"embedded resource Text", jsonrpc.ErrCaseKey, func() error {
			return call.CheckResult([]byte(`{"content":[{"type":"resource","resource":{"uri":"a","Text":"t"}}]}`))
		}},
		{"task result", jsonrpc.ErrCaseKey, func() error {
			return call.CheckResult([]byte(`{"task":{"taskId":"1","StatusMessage":"x"}}`))
		}},
		{"progress Message", jsonrpc.ErrCaseKey, func() error {
			return progress.CheckParams([]byte(`{"progressToken":1,"progress":1,"Message":"x"}`))
		}},
		{"error Message", jsonrpc.ErrCaseKey, func() error { return mcpspec.CheckError([]byte(`{"code":1,"Message":"x"}`)) }},
		{"call Arguments", jsonrpc.ErrCaseKey, func() error { return call.CheckParams([]byte(`{"name":"x","Arguments":{}}`)) }},
		{"arguments are data", nil, func() error {
			return call.CheckParams([]byte(`{"name":"x","arguments":{"Name":1,"nested":[{"Arguments":2}]}}`))
		}},
		{"scalars after objects", nil, func() error {
			return call.CheckResult([]byte(`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"isError":false,"structuredContent":{"a":[1,{"b":true}],"c":null}}`))
		}},
	} {
		err := tc.fn()
		if tc.err == nil {
			assert.NoError(t, err, tc.name)
		} else {
			assert.ErrorIs(t, err, tc.err, tc.name)
		}
	}
}

// FuzzCheckKeys: on whatever the scanner accepts, the walker ends without
// a panic, for every row's params and result.
func FuzzCheckKeys(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"x","inputSchema":{"type":"object"}}],"Tools":1}`))
	f.Add([]byte(`{"content":[{"type":"text","text":"a","annotations":{"audience":["user"]}}],"structuredContent":{"x":[[1],{"y":"z"}]}}`))
	f.Add([]byte(`{"a":"\"}\\","b":[{},[],""]}`))
	f.Fuzz(func(t *testing.T, v []byte) {
		var sc jsonrpc.Scanner
		if _, err := sc.Scan(append(append([]byte(`{"jsonrpc":"2.0","id":1,"result":`), v...), '}')); err != nil {
			return
		}
		for _, m := range mcpspec.Messages() {
			m.CheckParams(v)
			m.CheckResult(v)
		}
		mcpspec.CheckError(v)
	})
}
