package policy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keysPolicy has tools whose arguments are maps: the server receives the
// keys the caller chose.
const keysPolicy = `{
  "server": "k", "workdir": "${WS}",
  "tools": {
    "read_set": {"read_only": true, "schema": {"type": "object", "additionalProperties": false,
      "properties": {"files": {"type": "object", "additionalProperties": {"type": "string"}}}}},
    "read_named": {"read_only": true, "schema": {"type": "object", "additionalProperties": false,
      "properties": {"files": {"type": "object", "additionalProperties": {"type": "string"}}}},
      "args": {"files": {"kind": "path", "access": "read"}}},
    "tag": {"schema": {"type": "object", "additionalProperties": false,
      "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}}},
    "by_pattern": {"read_only": true, "schema": {"type": "object", "additionalProperties": false,
      "properties": {"m": {"type": "object", "patternProperties": {"^.": {"type": "string"}},
        "propertyNames": {"format": "path"}, "additionalProperties": false}}}},
    "fixed": {"schema": {"type": "object", "additionalProperties": false,
      "properties": {"m": {"type": "object", "additionalProperties": {"type": "string"},
        "propertyNames": {"enum": ["a", "b"]}}}}},
    "explicit": {"schema": {"type": "object", "additionalProperties": false,
      "properties": {"env": {"type": "object", "additionalProperties": {"type": "string"}}}},
      "args": {"/env/~k": {"kind": "host"}}},
    "open": {"schema": {"type": "object", "properties": {"name": {"type": "string"}}}},
    "none": {}
  },
  "filesystem": {"read": ["${WS}"], "write": ["${WS}/docs"]},
  "network": {"allow": [{"host": "127.0.0.2"}]}
}`

const ghToken = "ghp_R8fK2mQ9xL4vN7pT1sW6yB3cH5jD0gZ8aE2u"

// TestModelKeys: the keys of a map are judged with the kind the model
// gives them: the map's own (its name, the policy's args), propertyNames,
// an args entry for the key slot, else free text (a key that reads as a
// path or URL is one; secrets). Keys the schema fixes are not judged.
func TestModelKeys(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, keysPolicy, true)
	kind := func(tool, path string) string {
		s := e.tools[tool].slots[path]
		require.NotNil(t, s, "%s %s", tool, path)
		return s.kind + "/" + s.access
	}
	assert.Equal(t, "path/read", kind("read_set", "/files/~k"), "a map named files is keyed by files")
	assert.Equal(t, "path/read", kind("read_named", "/files/~k"), "the policy calls the map a path")
	assert.Equal(t, "text/", kind("tag", "/labels/~k"))
	assert.Equal(t, "path/read", kind("by_pattern", "/m/~k"), "propertyNames format path")
	assert.Equal(t, "text/", kind("fixed", "/m/~k"))
	assert.Equal(t, "host/", kind("explicit", "/env/~k"))

	checkCalls(t, e, []engineCall{
		{"read_set", map[string]any{"files": map[string]any{"../home/.ssh/id_rsa": "notes"}}, RulePathOutside, "L1"},
		{"read_set", map[string]any{"files": map[string]any{f.home + "/.ssh/id_rsa": "notes"}}, RulePathOutside, "L1"},
		{"read_set", map[string]any{"files": map[string]any{"link": "notes"}}, RulePathOutside, "L1"}, // a symlink out
		{"read_set", map[string]any{"files": map[string]any{"notes.txt": "notes", "docs/a.md": "a"}}, "", ""},
		{"read_named", map[string]any{"files": map[string]any{"link": "x"}}, RulePathOutside, "L1"},
		{"read_named", map[string]any{"files": map[string]any{"notes.txt": "x"}}, "", ""},
		{"tag", map[string]any{"labels": map[string]any{f.home + "/.ssh/id_rsa": "x"}}, RulePathOutside, "L1"},
		{"tag", map[string]any{"labels": map[string]any{"http://127.0.0.1:9/x": "x"}}, RuleURLHost, "L1"},
		{"tag", map[string]any{"labels": map[string]any{ghToken: "x"}}, RuleSecret, "L2"},
		{"tag", map[string]any{"labels": map[string]any{"$HOME": "x"}}, RuleEnvReference, "L2"},
		{"tag", map[string]any{"labels": map[string]any{"urgent": "yes", "link": "no"}}, "", ""},
		{"by_pattern", map[string]any{"m": map[string]any{"link": "x"}}, RulePathOutside, "L1"},
		{"by_pattern", map[string]any{"m": map[string]any{"notes.txt": "x"}}, "", ""},
		{"fixed", map[string]any{"m": map[string]any{"a": "x"}}, "", ""},
		{"explicit", map[string]any{"env": map[string]any{"127.0.0.1": "x"}}, RuleNetHost, "L1"},
		{"explicit", map[string]any{"env": map[string]any{"127.0.0.2": "x"}}, "", ""},
		// Members a schema does not name at the top (an open schema, no
		// schema): flat objects, the fast path's shape.
		{"open", map[string]any{"name": "a", f.home + "/.ssh/id_rsa": "x"}, RulePathOutside, "L1"},
		{"open", map[string]any{"name": "a", ghToken: "x"}, RuleSecret, "L2"},
		{"open", map[string]any{"name": "a", "extra": "x"}, "", ""},
		{"none", map[string]any{"../home/.ssh/id_rsa": "x"}, RulePathOutside, "L1"},
		{"none", map[string]any{"q": "x"}, "", ""},
	})
}

// TestModelKeysSession: a key is one of the session's strings: a secret
// split between a key and a later call is seen.
func TestModelKeysSession(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, keysPolicy, true)
	call := func(s *Session, args map[string]any) *Violation {
		raw, err := json.Marshal(args)
		require.NoError(t, err)
		return e.CheckCall(context.Background(), "tag", raw, s)
	}
	s := NewSession()
	require.Nil(t, call(s, map[string]any{"labels": map[string]any{ghToken[:16]: "x"}}))
	v := call(s, map[string]any{"labels": map[string]any{ghToken[16:]: "x"}})
	require.NotNil(t, v)
	assert.Equal(t, RuleSecret, v.Rule)
}

// TestKindReportKeys: the kind report lists key slots with why.
func TestKindReportKeys(t *testing.T) {
	f := newFixture(t)
	p, err := Parse([]byte(keysPolicy), f.vars)
	require.NoError(t, err)
	lines, err := KindReport(p)
	require.NoError(t, err)
	var got []string
	for _, l := range lines {
		if l.Tool == "read_set" {
			got = append(got, l.Arg+" "+l.Kind+" "+l.Why)
		}
	}
	assert.Contains(t, got, "files/~k path the keys of files: name files; read: the tool only reads")
}
