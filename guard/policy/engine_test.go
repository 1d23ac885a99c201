package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/internal/stagetest"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

// fixture is a workspace, a home with a key, and a policy over them.
type fixture struct {
	base, ws, home, tmp string
	vars                map[string]string
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	base, err := filepath.EvalSymlinks(tb.TempDir())
	require.NoError(tb, err)
	f := &fixture{base: base, ws: filepath.Join(base, "ws"), home: filepath.Join(base, "home"), tmp: filepath.Join(base, "tmp")}
	for _, d := range []string{f.ws + "/docs", f.home + "/.ssh", f.tmp, base + "/ws-evil"} {
		require.NoError(tb, os.MkdirAll(d, 0o755))
	}
	require.NoError(tb, os.WriteFile(f.ws+"/notes.txt", []byte("hello"), 0o644))
	require.NoError(tb, os.WriteFile(f.home+"/.ssh/id_rsa", []byte("key"), 0o600))
	require.NoError(tb, os.Symlink(f.home+"/.ssh/id_rsa", f.ws+"/link"))
	f.vars = map[string]string{"WS": f.ws, "HOME": f.home, "TMP": f.tmp}
	return f
}

const testPolicy = `{
  "server": "fs",
  "workdir": "${WS}",
  "tools": {
    "read_file": {
      "schema": {"type": "object", "properties": {"path": {"type": "string", "maxLength": 4096}}, "required": ["path"], "additionalProperties": false},
      "args": {"path": {"kind": "path", "access": "read"}}
    },
    "write_file": {
      "schema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]},
      "args": {"path": {"kind": "path", "access": "write"}}
    },
    "fetch": {
      "schema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
      "args": {"url": {"kind": "url"}}
    },
    "connect": {"args": {"addr": {"kind": "host"}}},
    "run": {
      "schema": {"type": "object", "properties": {"command": {"type": "string"}, "mode": {"enum": ["fast", "slow"]}}},
      "args": {"command": {"kind": "command"}}
    },
    "read_many": {"args": {"paths": {"kind": "path", "access": "read"}}},
    "exec": {"args": {"program": {"kind": "exec"}, "args": {"kind": "argv"}}}
  },
  "filesystem": {"read": ["${WS}", "/usr/share"], "write": ["${WS}/docs"]},
  "network": {"allow": [{"host": "127.0.0.2", "ports": [8080]}, {"host": "api.example.com"}, {"host": "intranet.example.com", "private": true}]},
  "exec": {"allow": ["/bin/ls", "/usr/bin/git"]},
  "env": {"allow": ["PATH", "HOME", "LC_*"]}
}`

func resolver() fakeResolver {
	return fakeResolver{
		"api.example.com":      {netip.MustParseAddr("93.184.216.34")},
		"intranet.example.com": {netip.MustParseAddr("10.0.0.8")},
		"rebind.example.com":   {netip.MustParseAddr("127.0.0.1")},
	}
}

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &os.PathError{Op: "lookup", Path: host, Err: os.ErrNotExist}
}

func (f *fixture) engine(tb testing.TB, src string, l2 bool) *Engine {
	tb.Helper()
	p, err := Parse([]byte(src), f.vars)
	require.NoError(tb, err)
	e, err := Compile(p, EngineOptions{L2: l2, Resolver: resolver()})
	require.NoError(tb, err)
	return e
}

// engineCall is one tools/call and the rule that must refuse it ("" for
// none) in the layer that must.
type engineCall struct {
	tool  string
	args  any
	rule  string
	layer string
}

func checkCalls(t *testing.T, e *Engine, calls []engineCall) {
	t.Helper()
	for _, c := range calls {
		raw, err := json.Marshal(c.args)
		require.NoError(t, err)
		v := e.Check(context.Background(), c.tool, raw)
		name := c.tool + " " + string(raw)
		if c.rule == "" {
			assert.Nil(t, v, name)
			continue
		}
		if assert.NotNil(t, v, name) {
			assert.Equal(t, c.rule, v.Rule, "%s: %s", name, v.Reason)
			assert.Equal(t, c.layer, v.Layer, name)
		}
	}
}

// TestEngineCheck: path arguments, the schema, the tool list; paths as the kernel
// resolves them, ~ forms and file: URIs.
func TestEngineCheck(t *testing.T) {
	f := newFixture(t)
	checkCalls(t, f.engine(t, testPolicy, true), []engineCall{
		{"read_file", map[string]any{"path": f.ws + "/notes.txt"}, "", ""},
		{"read_file", map[string]any{"path": "notes.txt"}, "", ""},
		{"read_file", map[string]any{"path": "/usr/share/doc"}, "", ""},
		{"read_file", map[string]any{"path": f.ws + "/../home/.ssh/id_rsa"}, RulePathOutside, "L1"},
		{"read_file", map[string]any{"path": f.ws + "/link"}, RulePathOutside, "L1"},
		{"read_file", map[string]any{"path": f.base + "/ws-evil/x"}, RulePathOutside, "L1"},
		{"read_file", map[string]any{"path": f.ws + "/%2e%2e/home/.ssh/id_rsa"}, RulePathEncoded, "L2"},
		{"read_file", map[string]any{"path": f.ws + "/a\x00"}, RulePathNUL, "L2"},
		{"read_file", map[string]any{"path": "x", "extra": 1}, RuleSchema, "L1"},
		{"read_file", map[string]any{}, RuleSchema, "L1"},
		{"read_file", []any{1}, RuleArgsMalformed, "L1"},
		{"delete_file", map[string]any{"path": "x"}, RuleToolNotAllowed, "L1"},
		{"write_file", map[string]any{"path": f.ws + "/docs/a.md", "content": "hi"}, "", ""},
		{"write_file", map[string]any{"path": f.ws + "/notes.txt", "content": "hi"}, RulePathOutside, "L1"},
		{"read_many", map[string]any{"paths": []any{f.ws + "/notes.txt", "/etc/shadow"}}, RulePathOutside, "L1"},
		{"read_many", map[string]any{"paths": []any{f.ws + "/notes.txt", 3}}, RuleKindMismatch, "L1"},
		{"read_many", map[string]any{"paths": []any{"/proc/self/environ"}}, RulePathOutside, "L1"},
		{"read_file", map[string]any{"path": "--output=" + f.ws + "/x"}, RuleOptionLike, "L2"},
		{"read_file", map[string]any{"path": "link/../notes.txt"}, RulePathOutside, "L1"},
		{"read_file", map[string]any{"path": "~/.ssh/id_rsa"}, RulePathHome, "L2"},
		{"read_file", map[string]any{"path": "~root/.ssh/id_rsa"}, RulePathHome, "L2"},
		{"read_file", map[string]any{"path": "FILE://" + f.home + "/.ssh/id_rsa"}, RulePathOutside, "L1"},
		{"read_file", map[string]any{"path": "file:" + f.ws + "/notes.txt"}, "", ""},
	})
}

// TestEngineBareName: a file name alone refused as a path outside the
// roots says it was resolved against workdir and that a name kind of text
// is the fix, not an override of where it landed (issue 33's matrix); a
// path with a directory does not.
func TestEngineBareName(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, testPolicy, true)
	v := e.Check(context.Background(), "write_file", []byte(`{"path":"notes.txt","content":"hi"}`))
	require.NotNil(t, v)
	assert.Equal(t, RulePathOutside, v.Rule)
	assert.Contains(t, v.Reason, `"notes.txt" has no directory, so it was resolved against the policy's workdir`)
	assert.Contains(t, v.Reason, `set tools.write_file.args.path.kind to "text"`)
	v = e.Check(context.Background(), "write_file", []byte(`{"path":"`+f.ws+`/notes.txt","content":"hi"}`))
	require.NotNil(t, v)
	assert.NotContains(t, v.Reason, "has no directory")
}

// TestEngineCheckContent: secrets and environment references in any argument, also
// split across arguments, base64-encoded or with a soft hyphen inside.
func TestEngineCheckContent(t *testing.T) {
	f := newFixture(t)
	checkCalls(t, f.engine(t, testPolicy, true), []engineCall{
		{"write_file", map[string]any{"path": f.ws + "/docs/a.md", "content": "AKIAIOSFODNN7EXAMPLE"}, RuleSecret, "L2"},
		{"write_file", map[string]any{"path": f.ws + "/docs/a.md", "content": "token is ${API_TOKEN}"}, RuleEnvReference, "L2"},
		{"write_file", map[string]any{"path": f.ws + "/docs/a.md", "content": "IOSFODNN7EXAMPLE", "prefix": "AKIA"}, RuleSecret, "L2"},
		{"write_file", map[string]any{"path": f.ws + "/docs/a.md", "content": "QUtJQUlPU0ZPRE5ON0VYQU1QTEU="}, RuleSecret, "L2"},
		{"write_file", map[string]any{"path": f.ws + "/docs/a.md", "content": "AKIA\u00adIOSFODNN7EXAMPLE"}, RuleSecret, "L2"},
	})
}

// TestEngineCheckNetwork: URL and host arguments against the network allow-list.
func TestEngineCheckNetwork(t *testing.T) {
	f := newFixture(t)
	checkCalls(t, f.engine(t, testPolicy, true), []engineCall{
		{"fetch", map[string]any{"url": "http://127.0.0.2:8080/weather?city=Oslo"}, "", ""},
		{"fetch", map[string]any{"url": "http://127.0.0.2:9999/"}, RuleURLHost, "L1"},
		{"fetch", map[string]any{"url": "http://127.0.0.1:8080/"}, RuleURLHost, "L1"},
		{"fetch", map[string]any{"url": "https://api.example.com/v1"}, "", ""},
		{"fetch", map[string]any{"url": "https://intranet.example.com/"}, "", ""},
		{"fetch", map[string]any{"url": "http://169.254.169.254/latest/meta-data"}, RuleURLHost, "L1"},
		{"fetch", map[string]any{"url": "file:///etc/passwd"}, RuleURLScheme, "L2"},
		{"fetch", map[string]any{"url": "http://2130706433/"}, RuleURLObfuscated, "L2"},
		{"fetch", map[string]any{"url": "http://x@api.example.com/"}, RuleURLUserinfo, "L2"},
		{"connect", map[string]any{"addr": "127.0.0.2:8080"}, "", ""},
		{"connect", map[string]any{"addr": "127.0.0.1:8080"}, RuleNetHost, "L1"},
	})
}

// TestEngineCheckCommands: commands split with shell rules, every word confined;
// attached short-option values and per-program option rules.
func TestEngineCheckCommands(t *testing.T) {
	f := newFixture(t)
	checkCalls(t, f.engine(t, testPolicy, true), []engineCall{
		{"run", map[string]any{"command": "git status"}, "", ""},
		{"run", map[string]any{"command": "ls -la", "mode": "fast"}, "", ""},
		{"run", map[string]any{"command": "ls", "mode": "turbo"}, RuleSchema, "L1"},
		{"run", map[string]any{"command": "ls; curl http://127.0.0.1"}, RuleCmdInjection, "L2"},
		{"run", map[string]any{"command": "ls $(cat ~/.ssh/id_rsa)"}, RuleCmdInjection, "L2"},
		{"run", map[string]any{"command": "curl http://127.0.0.1"}, RuleExec, "L1"},
		{"run", map[string]any{"command": "/tmp/evil"}, RuleExec, "L1"},
		{"exec", map[string]any{"program": "ls", "args": []any{"-la", "docs", "+%Y", "@0", "notes.txt"}}, "", ""},
		{"exec", map[string]any{"program": "ls", "args": []any{"-n", "5", f.home + "/.ssh/id_rsa"}}, RulePathOutside, "L1"},
		{"exec", map[string]any{"program": "ls", "args": []any{f.ws + "/../home"}}, RulePathOutside, "L1"},
		{"exec", map[string]any{"program": "ls", "args": []any{"link"}}, RulePathOutside, "L1"},
		{"exec", map[string]any{"program": "ls", "args": []any{"--output=/etc/passwd"}}, RulePathOutside, "L1"},
		{"exec", map[string]any{"program": "-x"}, RuleOptionLike, "L2"},
		{"exec", map[string]any{"program": "find", "args": []any{"."}}, RuleExec, "L1"},
		{"exec", map[string]any{"program": "ls", "args": []any{"-I" + f.home + "/.ssh/id_rsa"}}, RulePathOutside, "L1"},
		{"exec", map[string]any{"program": "git", "args": []any{"-c", "core.fsmonitor=touch /tmp/x", "status"}}, RuleOptionDenied, "L2"},
		{"exec", map[string]any{"program": "git", "args": []any{"ls-remote", "--upload-pack=touch x", "."}}, RuleOptionDenied, "L2"},
		{"exec", map[string]any{"program": "git", "args": []any{"log", "-n3", "--", "notes.txt"}}, "", ""},
		{"exec", map[string]any{"program": "git", "args": []any{"-C", f.home, "log"}}, RulePathOutside, "L1"},
		{"run", map[string]any{"command": "ls " + f.home + "/.ssh"}, RulePathOutside, "L1"},
		{"run", map[string]any{"command": "ls *"}, RuleCmdInjection, "L2"},
		{"run", map[string]any{"command": "ls '" + f.ws + "/docs'"}, "", ""},
		{"run", map[string]any{"command": "git -c alias.x='!touch /tmp/x' x"}, RuleOptionDenied, "L2"},
		{"run", map[string]any{"command": "git -c core.fsmonitor=x status"}, RuleOptionDenied, "L2"},
		{"run", map[string]any{"command": "ls ~/x"}, RuleCmdInjection, "L2"},
	})
}

// TestEngineCheckRebinding: a host name that resolves to loopback is refused even
// though the name is allowed (DNS rebinding), unless the rule says private.
func TestEngineCheckRebinding(t *testing.T) {
	js := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	p, err := Parse([]byte(`{"server":"x","tools":{"fetch":{"args":{"url":{"kind":"url"}}}},
		"network":{"allow":[{"host":"rebind.example.com"}]}}`), nil)
	require.NoError(t, err)
	e2, err := Compile(p, EngineOptions{L2: true, Resolver: resolver()})
	require.NoError(t, err)
	v := e2.Check(context.Background(), "fetch", js(map[string]any{"url": "http://rebind.example.com/"}))
	require.NotNil(t, v)
	assert.Equal(t, RuleURLPrivate, v.Rule)
	assert.Equal(t, "rebind.example.com", v.Target)
	assert.Contains(t, v.Reason, "127.0.0.1")
	v = e2.Check(context.Background(), "fetch", js(map[string]any{"url": "http://unknown.example.com/"}))
	require.NotNil(t, v)
	assert.Equal(t, RuleURLHost, v.Rule)
}

func TestEngineL1Only(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, testPolicy, false)
	// Without L2 a symlink inside the root is taken at face value, and
	// content rules are off: the layers are separable.
	assert.Nil(t, e.Check(context.Background(), "read_file", json.RawMessage(`{"path":"`+f.ws+`/link"}`)))
	assert.Nil(t, e.Check(context.Background(), "write_file", json.RawMessage(`{"path":"`+f.ws+`/docs/x","content":"$HOME"}`)))
	v := e.Check(context.Background(), "read_file", json.RawMessage(`{"path":"`+f.ws+`/../home/.ssh/id_rsa"}`))
	require.NotNil(t, v)
	assert.Equal(t, RulePathOutside, v.Rule)
}

func TestCompileErrors(t *testing.T) {
	bad := []string{
		`{"server":"x","tools":{"t":{"schema":{"type":"nope"}}}}`,
		`{"server":"x","tools":{"t":{"schema":{"$ref":"http://example.com/s.json"}}}}`,
		`{"server":"x","tools":{"t":{"args":{"a":{"kind":"weird"}}}}}`,
		`{"server":"x","tools":{"t":{"args":{"a":{"kind":"path"}}}}}`,
		`{"server":"x","filesystem":{"read":["relative"]},"tools":{"t":{}}}`,
		`{"server":"x","network":{"allow":[{"host":"a/b/c"}]},"tools":{"t":{}}}`,
		`{"server":"x","network":{"allow":[{"host":"a","ports":[0]}]},"tools":{"t":{}}}`,
		`{"server":"x","exec":{"allow":["ls"]},"tools":{"t":{}}}`,
		`{"server":"x","workdir":"rel"}`,
	}
	for _, b := range bad {
		p, err := Parse([]byte(b), nil)
		require.NoError(t, err, b)
		_, err = Compile(p, EngineOptions{})
		assert.Error(t, err, b)
	}
	_, err := Parse([]byte(`{"server":"x","tols":{}}`), nil)
	assert.Error(t, err, "unknown fields are errors")
	_, err = Parse([]byte(`{"server":"${NOPE}"}`), nil)
	assert.ErrorContains(t, err, "NOPE")
	p, err := Parse([]byte(`{"server":"x","tools":{"t":{"schema":{"type":"string","pattern":"^a+$"}}}}`), nil)
	require.NoError(t, err, "a bare $ is not a placeholder")
	assert.Contains(t, string(p.Tools["t"].Schema), "^a+$")
}

func TestStageAuditsAndDenies(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, testPolicy, true)
	var buf bytes.Buffer
	reached := 0
	h := stagetest.Handler(Stage(e, LayerOptions{Server: "fs", Config: "C-app", Audit: audit.New(&buf)}), func(context.Context, *guard.Request) *guard.Response {
		reached++
		return &guard.Response{Result: json.RawMessage(`{}`)}
	})
	args := json.RawMessage(`{"path":"` + f.home + `/.ssh/id_rsa"}`)
	r := h(context.Background(), &guard.Request{Method: "tools/call", Tool: "read_file", Arguments: args})
	require.NotNil(t, r.Error)
	assert.Contains(t, r.Error.Message, RulePathOutside)
	msg, ok := guard.IsDenied(r.Error)
	require.True(t, ok)
	assert.Contains(t, msg, "rule "+RulePathOutside)
	assert.Equal(t, 0, reached)
	var ev audit.Event
	require.NoError(t, json.Unmarshal(buf.Bytes(), &ev))
	assert.Equal(t, audit.Event{Time: ev.Time, Server: "fs", Config: "C-app", Layer: "L1", Rule: RulePathOutside,
		Tool: "read_file", Decision: audit.Deny, Reason: ev.Reason, Target: f.home + "/.ssh/id_rsa", ArgsDigest: audit.Digest(args)}, ev)
	assert.NotContains(t, buf.String(), `"path"`, "the audit log holds a digest, not the arguments")

	r = h(context.Background(), &guard.Request{Method: "tools/list"})
	assert.Nil(t, r.Error)
	r = h(context.Background(), &guard.Request{Method: "tools/call", Tool: "read_file", Arguments: json.RawMessage(`{"path":"notes.txt"}`)})
	assert.Nil(t, r.Error)
	assert.Equal(t, 2, reached)
}

func TestEnvFilter(t *testing.T) {
	f := newFixture(t)
	p, err := Parse([]byte(testPolicy), f.vars)
	require.NoError(t, err)
	var buf bytes.Buffer
	prep := EnvFilter(p, LayerOptions{Server: "fs", Audit: audit.New(&buf)})
	cmd := exec.Command("/bin/true")
	cmd.Env = []string{"PATH=/bin", "HOME=/h", "API_TOKEN=secret-value", "LC_ALL=C", "LCX=1"}
	require.NoError(t, prep(cmd))
	assert.Equal(t, []string{"PATH=/bin", "HOME=/h", "LC_ALL=C"}, cmd.Env)
	assert.Contains(t, buf.String(), "API_TOKEN,LCX")
	assert.NotContains(t, buf.String(), "secret-value")

	// With no environment of its own the command would inherit the
	// guard's: the filter starts from that instead.
	t.Setenv("MCPGUARD_TEST_SECRET", "x")
	cmd = exec.Command("/bin/true")
	require.NoError(t, prep(cmd))
	require.NotNil(t, cmd.Env)
	for _, kv := range cmd.Env {
		assert.False(t, strings.HasPrefix(kv, "MCPGUARD_TEST_SECRET="))
	}
}

func TestToolsListHidesToolsNotInThePolicy(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, testPolicy, true)
	var buf bytes.Buffer
	list := `{"tools":[{"name":"read_file","inputSchema":{"type":"object"}},{"name":"delete_everything","inputSchema":{"type":"object"}}],"nextCursor":"c2"}`
	h := stagetest.Handler(Stage(e, LayerOptions{Server: "fs", Config: "C-app", Audit: audit.New(&buf)}), func(context.Context, *guard.Request) *guard.Response {
		return &guard.Response{Result: json.RawMessage(list)}
	})
	r := h(context.Background(), &guard.Request{Method: "tools/list"})
	require.Nil(t, r.Error)
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		NextCursor string `json:"nextCursor"`
	}
	require.NoError(t, json.Unmarshal(r.Result, &res))
	require.Len(t, res.Tools, 1)
	assert.Equal(t, "read_file", res.Tools[0].Name)
	assert.Equal(t, "c2", res.NextCursor, "the rest of the result is kept")
	var ev audit.Event
	require.NoError(t, json.Unmarshal(buf.Bytes(), &ev))
	assert.Equal(t, audit.Rewrite, ev.Decision)
	assert.Equal(t, RuleToolNotAllowed, ev.Rule)
	assert.Equal(t, "delete_everything", ev.Target)

	// A list with only allowed tools is passed on as it came.
	only := `{"tools":[{"name":"read_file"}]}`
	h = stagetest.Handler(Stage(e, LayerOptions{}), func(context.Context, *guard.Request) *guard.Response {
		return &guard.Response{Result: json.RawMessage(only)}
	})
	assert.Equal(t, only, string(h(context.Background(), &guard.Request{Method: "tools/list"}).Result))
}

func TestEngineCheckRequest(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, testPolicy, true)
	cases := []struct {
		method, params, rule string
	}{
		{"resources/read", `{"uri":"file://` + f.ws + `/notes.txt"}`, ""},
		{"resources/read", `{"uri":"FILE://` + f.home + `/.ssh/id_rsa"}`, RulePathOutside},
		{"resources/read", `{"uri":"file:/etc/passwd"}`, RulePathOutside},
		{"resources/read", `{"uri":"file://localhost` + f.ws + `/link"}`, RulePathOutside},
		{"resources/subscribe", `{"uri":"file:///etc/shadow"}`, RulePathOutside},
		{"resources/read", `{"uri":"notes://a/b"}`, ""},
		{"resources/read", `{"uri":"notes://../../etc/passwd"}`, RuleResourceTraversal},
		{"resources/read", `{"uri":"notes://%2e%2e/x"}`, RuleResourceTraversal},
		{"resources/read", `{"uri":"http://127.0.0.1:8080/"}`, RuleURLHost},
		{"resources/read", `{}`, RuleParamsMalformed},
		{"prompts/get", `{"name":"p","arguments":{"file":"notes.txt"}}`, ""},
		{"prompts/get", `{"name":"p","arguments":{"file":"` + f.home + `/.ssh/id_rsa"}}`, RulePathOutside},
		{"prompts/get", `{"name":"p","arguments":{"file":"../home/.ssh/id_rsa"}}`, RulePathOutside},
		{"prompts/get", `{"name":"p","arguments":{"url":"http://169.254.169.254/"}}`, RuleURLHost},
		{"prompts/get", `{"name":"p","arguments":{"a":"AKIA","b":"IOSFODNN7EXAMPLE"}}`, RuleSecret},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"file","value":"~/.ssh/"}}`, RulePathHome},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"file","value":"do"}}`, ""},
		{"completion/complete", `{"ref":{"type":"ref/resource","uri":"file:///{+path}"},"argument":{"name":"path","value":"etc/passwd"}}`, RulePathOutside},
		{"completion/complete", `{"ref":{"type":"ref/resource","uri":"file://` + f.ws + `/{path}"},"argument":{"name":"path","value":"no"}}`, ""},
	}
	for _, c := range cases {
		v := e.CheckRequest(context.Background(), c.method, json.RawMessage(c.params))
		if c.rule == "" {
			assert.Nil(t, v, "%s %s", c.method, c.params)
			continue
		}
		if assert.NotNil(t, v, "%s %s", c.method, c.params) {
			assert.Equal(t, c.rule, v.Rule, "%s %s: %s", c.method, c.params, v.Reason)
		}
	}
}
