package policy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modelPolicy has tools whose schemas nest, default and leave kinds to
// the model: no args but the one verbatim slot.
const modelPolicy = `{
  "server": "m", "workdir": "${WS}",
  "tools": {
    "read_config": {"read_only": true, "schema": {"type": "object", "additionalProperties": false,
      "properties": {"file": {"type": ["string", "null"], "default": "${HOME}/.ssh/id_rsa"}}}},
    "export": {"schema": {"type": "object", "additionalProperties": false,
      "properties": {"opts": {"$ref": "#/$defs/O"}}, "$defs": {"O": {"type": "object", "additionalProperties": false,
      "properties": {"out": {"type": "string"}, "title": {"type": "string"}, "level": {"type": "integer", "default": 1}}}}}},
    "many": {"read_only": true, "schema": {"type": "object", "properties": {"files": {"type": "array",
      "items": {"anyOf": [{"type": "object", "properties": {"path": {"type": "string"}}}, {"type": "string", "format": "uri"}]}}}}},
    "note": {"schema": {"type": "object", "properties": {"text": {"type": "string"}, "ref": {"type": "string"}}}},
    "search": {"read_only": true, "schema": {"type": "object", "properties": {"pattern": {"type": "string"}}}},
    "import": {"read_only": true, "schema": {"type": "object", "properties": {"source": {"type": "string",
      "description": "a local path"}}}},
    "raw": {"args": {"name": {"kind": "path", "access": "read", "verbatim": true}}},
    "render": {"schema": {"type": "object", "additionalProperties": false,
      "properties": {"opts": {"$ref": "#/$defs/R"}}, "$defs": {"R": {"type": "object", "additionalProperties": false,
      "properties": {"out": {"type": "string", "default": "${HOME}/.bashrc"}}}}}},
    "login": {"schema": {"type": "object", "properties": {"password": {"type": "string"}, "note": {"type": "string"}}}}
  },
  "filesystem": {"read": ["${WS}"], "write": ["${WS}/docs"]},
  "network": {"allow": [{"host": "127.0.0.2"}]}
}`

// TestModelSlots: every string gets a kind from the schema, the name, the
// description, or the policy; nested ones by slot path.
func TestModelSlots(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, modelPolicy, true)
	kind := func(tool, path string) string {
		s := e.tools[tool].slots[path]
		require.NotNil(t, s, "%s %s", tool, path)
		return s.kind + "/" + s.access
	}
	assert.Equal(t, "path/read", kind("read_config", "/file"))
	assert.Equal(t, "path/write", kind("export", "/opts/out"), "an output in a $ref'd object")
	assert.Equal(t, "text/", kind("export", "/opts/title"))
	assert.Equal(t, "path/read", kind("many", "/files/*/path"))
	assert.Equal(t, "url/", kind("many", "/files/*"), "the string branch of anyOf")
	assert.Equal(t, "path/read", kind("search", "/pattern"), "a glob is a path")
	assert.Equal(t, "path/read", kind("import", "/source"))
	assert.Equal(t, "secret/", kind("login", "/password"))
	assert.True(t, e.tools["raw"].slots["/name"].verbatim)
}

// TestModelJudges: defaults, nesting, by-value reading, unclean values and
// server-scheme URIs, each against a benign twin.
func TestModelJudges(t *testing.T) {
	f := newFixture(t)
	checkCalls(t, f.engine(t, modelPolicy, true), []engineCall{
		// Omitted and null arguments are their defaults.
		{"read_config", map[string]any{}, RulePathOutside, "L1"},
		{"read_config", map[string]any{"file": nil}, RulePathOutside, "L1"},
		{"read_config", map[string]any{"file": "notes.txt"}, "", ""},
		// A blank value is its default to a server that reads `value or
		// default`; an omitted object is built from its members' defaults.
		{"read_config", map[string]any{"file": ""}, RulePathOutside, "L1"},
		{"read_config", map[string]any{"file": " "}, RuleUnclean, "L2"},
		{"render", map[string]any{}, RulePathOutside, "L1"},
		{"render", map[string]any{"opts": map[string]any{}}, RulePathOutside, "L1"},
		{"render", map[string]any{"opts": map[string]any{"out": "docs/r.md"}}, "", ""},
		// Nesting behind $ref, and arrays of objects.
		{"export", map[string]any{"opts": map[string]any{"out": f.home + "/.bashrc"}}, RulePathOutside, "L1"},
		{"export", map[string]any{"opts": map[string]any{"out": "notes.txt"}}, RulePathOutside, "L1"}, // a read-only root
		{"export", map[string]any{"opts": map[string]any{"out": "docs/r.md", "title": "w"}}, "", ""},
		{"export", map[string]any{"opts": map[string]any{"out": "docs/r.md", "log": "/x"}}, RuleSchema, "L1"},
		{"many", map[string]any{"files": []any{map[string]any{"path": "notes.txt"}, map[string]any{"path": f.home + "/.ssh/id_rsa"}}}, RulePathOutside, "L1"},
		{"many", map[string]any{"files": []any{"http://127.0.0.1:9/x"}}, RuleURLHost, "L1"},
		{"many", map[string]any{"files": []any{map[string]any{"path": "notes.txt"}, "http://127.0.0.2/w"}}, "", ""},
		// Globs, and values that read as a path or URL in any slot.
		{"search", map[string]any{"pattern": "../home/.ss*"}, RulePathOutside, "L1"},
		{"search", map[string]any{"pattern": "docs/*.md"}, "", ""},
		{"import", map[string]any{"source": "http://127.0.0.1:8080/x"}, RuleURLHost, "L1"},
		{"import", map[string]any{"source": "http://127.0.0.2/weather"}, "", ""},
		{"note", map[string]any{"text": f.home + "/.ssh/id_rsa"}, RulePathOutside, "L1"},
		{"note", map[string]any{"text": "http://127.0.0.1:9/"}, RuleURLHost, "L1"},
		{"note", map[string]any{"text": "/todo buy milk and ../ eggs"}, "", ""},
		{"note", map[string]any{"text": "see docs/readme.md"}, "", ""},
		// Forms a server normalises.
		{"import", map[string]any{"source": " " + f.home + "/.ssh/id_rsa"}, RuleUnclean, "L2"},
		{"import", map[string]any{"source": "'notes.txt'"}, RuleUnclean, "L2"},
		{"import", map[string]any{"source": "\t../x"}, RuleUnclean, "L2"},
		// Invisible characters a trim may strip (JavaScript's strips U+FEFF).
		{"import", map[string]any{"source": "\ufeff" + f.home + "/.ssh/id_rsa"}, RuleUnclean, "L2"},
		{"import", map[string]any{"source": "notes.txt\u200b"}, RuleUnclean, "L2"},
		{"note", map[string]any{"text": "\ufeff" + f.home + "/.ssh/id_rsa"}, RuleUnclean, "L2"},
		{"note", map[string]any{"text": "\ufeffhello"}, "", ""},
		{"import", map[string]any{"source": "docs/caf\u00e9.md"}, "", ""},
		{"note", map[string]any{"text": " ../home/x "}, RuleUnclean, "L2"},
		{"raw", map[string]any{"name": " notes.txt"}, "", ""}, // verbatim: a file named " notes.txt"
		{"raw", map[string]any{"name": "notes\x01.txt"}, RuleUnclean, "L2"},
		// A server's own scheme.
		{"note", map[string]any{"ref": "notes://" + f.home + "/.ssh/id_rsa"}, RulePathOutside, "L1"},
		{"note", map[string]any{"ref": "notes://../../x"}, RuleResourceTraversal, "L2"},
		{"note", map[string]any{"ref": "notes://hello.txt"}, "", ""},
		{"note", map[string]any{"ref": "notes:" + strings.ReplaceAll(f.home, "/", "%2F") + "%2F.ssh%2Fid_rsa"}, RulePathOutside, "L1"},
		{"note", map[string]any{"ref": "notes:hello%20world.txt"}, "", ""},
	})
}

// TestSessionSplit: a secret sent in two calls of one session is refused
// at the call that completes it; the same pieces in two sessions, and a
// message in two chunks, pass; a credential given to a secret argument is
// refused in another argument later.
func TestSessionSplit(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, modelPolicy, true)
	ctx := context.Background()
	call := func(s *Session, tool string, args map[string]any) *Violation {
		raw, err := json.Marshal(args)
		require.NoError(t, err)
		return e.CheckCall(ctx, tool, raw, s)
	}
	s := NewSession()
	require.Nil(t, call(s, "note", map[string]any{"text": "glpat-Xk4mQ9vT"}))
	v := call(s, "note", map[string]any{"text": "2bLp7RwZ3nHc"})
	require.NotNil(t, v)
	assert.Equal(t, RuleSecret, v.Rule)
	assert.Nil(t, call(NewSession(), "note", map[string]any{"text": "2bLp7RwZ3nHc"}))

	s = NewSession()
	assert.Nil(t, call(s, "note", map[string]any{"text": "hello "}))
	assert.Nil(t, call(s, "note", map[string]any{"text": "world"}))

	s = NewSession()
	require.Nil(t, call(s, "login", map[string]any{"password": "hunter2-correct-horse"}))
	require.Nil(t, call(s, "login", map[string]any{"password": "hunter2-correct-horse"}), "the same credential to a secret argument again")
	v = call(s, "note", map[string]any{"text": "q=" + reverseString("hunter2-correct-horse")})
	require.NotNil(t, v)
	assert.Equal(t, RuleSecret, v.Rule)
}

// TestSessionSplitLongToken: a token longer than the split window's half
// on each side of the call boundary, but whole in the window (a JWT of
// about 700 bytes, cut in the middle), is refused at the call that
// completes it. A narrower window loses the token's start and passes it.
func TestSessionSplitLongToken(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, modelPolicy, true)
	part := func(n int) string {
		const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
		b := make([]byte, n)
		x := uint32(2463534242)
		for i := range b {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			b[i] = alnum[int(x)%len(alnum)]
		}
		return string(b)
	}
	jwt := "eyJ" + part(33) + ".eyJ" + part(600) + "." + part(43)
	cut := len(jwt) / 2
	require.Greater(t, cut, 256, "the token starts further than 256 bytes before the cut")
	require.LessOrEqual(t, max(len("token: ")+cut, len(jwt)-cut), 512, "each side is whole in a 512-byte window")
	call := func(s *Session, text string) *Violation {
		raw, err := json.Marshal(map[string]any{"text": text})
		require.NoError(t, err)
		return e.CheckCall(context.Background(), "note", raw, s)
	}
	require.NotNil(t, call(NewSession(), jwt), "the whole token")
	s := NewSession()
	require.Nil(t, call(s, "token: "+jwt[:cut]), "the first half alone")
	v := call(s, jwt[cut:]+" end")
	require.NotNil(t, v, "the second half completes the token")
	assert.Equal(t, RuleSecret, v.Rule)
	assert.Nil(t, call(NewSession(), jwt[cut:]+" end"), "the second half alone")
}
