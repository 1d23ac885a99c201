package policy

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/audit"
)

func TestClassify(t *testing.T) {
	cases := map[string]string{
		"path": KindPath, "file_path": KindPath, "sourceDir": KindPath, "destination": KindPath, "paths": KindPath,
		"url": KindURL, "webhook_url": KindURL, "baseUrl": KindURL,
		"command": KindCommand, "args": KindArgv, "cmd": KindCommand, "program": KindExec, "host": KindHost,
		"profile": "", "content": "", "query": "", "city": "", "pattern": "", "mode": "",
	}
	for name, want := range cases {
		assert.Equal(t, want, Classify(name, nil), name)
	}
	assert.Equal(t, KindURL, Classify("location", map[string]any{"format": "uri"}))
	assert.Equal(t, KindPath, Classify("x", map[string]any{"type": "array", "items": map[string]any{"format": "path"}}))
}

func TestFromTools(t *testing.T) {
	tools := []ToolInfo{
		{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		{Name: "move_file", InputSchema: json.RawMessage(`{"type":"object","properties":{"source":{"type":"string"},"destination":{"type":"string"}}}`)},
		{Name: "fetch", InputSchema: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string","format":"uri"}},"additionalProperties":true}`)},
		{Name: "ping"},
	}
	p, err := FromTools("fs", tools)
	require.NoError(t, err)
	assert.Equal(t, map[string]Arg{"path": {Kind: KindPath, Access: Read}}, p.Tools["read_file"].Args)
	assert.Equal(t, map[string]Arg{"source": {Kind: KindPath, Access: Write}, "destination": {Kind: KindPath, Access: Write}}, p.Tools["move_file"].Args)
	assert.Equal(t, map[string]Arg{"url": {Kind: KindURL}}, p.Tools["fetch"].Args)
	assert.Contains(t, string(p.Tools["read_file"].Schema), `"additionalProperties":false`)
	assert.Contains(t, string(p.Tools["fetch"].Schema), `"additionalProperties":true`, "a server's explicit choice is kept")
	assert.Equal(t, []string{"${WS}"}, p.Filesystem.Write)

	// The derived policy round-trips through the file format and works.
	b, err := json.Marshal(p)
	require.NoError(t, err)
	f := newFixture(t)
	p2, err := Parse(b, f.vars)
	require.NoError(t, err)
	e, err := Compile(p2, EngineOptions{L2: true})
	require.NoError(t, err)
	assert.Nil(t, e.Check(context.Background(), "read_file", json.RawMessage(`{"path":"notes.txt"}`)))
	v := e.Check(context.Background(), "read_file", json.RawMessage(`{"path":"notes.txt","sneaky":1}`))
	require.NotNil(t, v)
	assert.Equal(t, RuleSchema, v.Rule)
	v = e.Check(context.Background(), "fetch", json.RawMessage(`{"url":"http://127.0.0.1/"}`))
	require.NotNil(t, v, "no destination is allowed until the operator adds one")
	assert.Equal(t, RuleURLHost, v.Rule)
}

func TestOverrideFor(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ev := func(layer, rule, tool, target string) audit.Event {
		return audit.Event{Time: at, Server: "fs", Layer: layer, Rule: rule, Tool: tool, Target: target, Decision: audit.Deny, Reason: "r"}
	}
	o, err := OverrideFor(ev("L1", RulePathOutside, "read_file", "/data/report.txt"))
	require.NoError(t, err)
	assert.Equal(t, "/data/report.txt", o.Path)
	assert.Equal(t, "read_file", o.Tool)
	assert.Equal(t, "fs", o.Server)
	o, err = OverrideFor(ev("L1", RuleURLHost, "fetch", "api.example.com:443"))
	require.NoError(t, err)
	assert.Equal(t, "api.example.com", o.Host)
	assert.Equal(t, []int{443}, o.Ports)
	o, err = OverrideFor(ev("L2", RuleEnvReference, "run", "command"))
	require.NoError(t, err)
	assert.Equal(t, Override{Server: "fs", Tool: "run", Rule: RuleEnvReference, Reason: o.Reason, Event: o.Event}, o)
	for _, bad := range []audit.Event{
		ev("L1", RuleSchema, "read_file", "read_file"),
		ev("L2", RulePathNUL, "read_file", "x"),
		ev("AB", "ab.filesystem.read", "read_file", "/x"),
		ev("L1", RulePathOutside, "read_file", "/"),
		ev("L1", RuleExec, "run", "curl"),
		ev("L1", RulePathOutside, "", "/x"),
	} {
		_, err := OverrideFor(bad)
		assert.ErrorIs(t, err, ErrNotOverridable, "%+v", bad)
	}
}

func TestURLTools(t *testing.T) {
	p := &Policy{Tools: map[string]Tool{
		"fetch":  {Args: map[string]Arg{"url": {Kind: KindURL}}},
		"read":   {Args: map[string]Arg{"path": {Kind: KindPath, Access: Read}}},
		"mirror": {Args: map[string]Arg{"src": {Kind: KindURL}, "dst": {Kind: KindPath, Access: Write}}},
	}}
	assert.Equal(t, []string{"fetch", "mirror"}, URLTools(p))
	assert.Empty(t, URLTools(&Policy{}))
}
