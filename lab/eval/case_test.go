package eval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/mcpguard/mcpguard/internal/testenv"
	"github.com/mcpguard/mcpguard/lab/servers"
)

const validCase = `{
  "id": "XX-01",
  "category": "file_read",
  "description": "reads a secret",
  "server": "filesystem",
  "visible_in_arguments": true,
  "calls": [{"tool": "read_file", "arguments": {"path": "{{HOME}}/.ssh/id_rsa"}}],
  "oracle": {"kind": "canary_in_response", "canary": "ssh_key"}
}`

// mutate replaces old with new in the valid case, failing if old is absent
// (so a test can never silently check the valid case).
func mutate(t *testing.T, old, new string) string {
	t.Helper()
	require.Contains(t, validCase, old)
	return strings.Replace(validCase, old, new, 1)
}

func TestParseCaseValid(t *testing.T) {
	c, err := ParseCase("XX-01.json", []byte(validCase), servers.Names())
	require.NoError(t, err)
	assert.Equal(t, "XX-01", c.ID)
	assert.True(t, c.Attack())
	assert.True(t, *c.VisibleInArguments)
}

func TestParseCaseMethod(t *testing.T) {
	src := mutate(t, `"tool": "read_file", "arguments": {"path": "{{HOME}}/.ssh/id_rsa"}`,
		`"method": "resources/read", "arguments": {"uri": "file://{{HOME}}/.ssh/id_rsa"}`)
	c, err := ParseCase("XX-01.json", []byte(src), servers.Names())
	require.NoError(t, err)
	assert.Equal(t, "resources/read", c.Calls[0].Method)
	assert.Empty(t, c.Calls[0].Tool)
}

func TestParseCaseErrorsNameFileAndField(t *testing.T) {
	tests := []struct {
		name, json, field string
	}{
		{"unknown field", mutate(t, `"oracle":`, `"oracel": {}, "oracle":`), "oracel"},
		{"unknown oracle field", mutate(t, `"canary": "ssh_key"`, `"canary": "ssh_key", "cannary": "x"`), "cannary"},
		{"missing id", mutate(t, `"id": "XX-01",`, ``), "id"},
		{"bad id", mutate(t, `"XX-01"`, `"xx 01"`), "id"},
		{"id not file name", mutate(t, `"XX-01"`, `"XX-02"`), "id"},
		{"bad category", mutate(t, `"file_read"`, `"file_reads"`), "category"},
		{"missing description", mutate(t, `"reads a secret"`, `"  "`), "description"},
		{"unknown server", mutate(t, `"filesystem"`, `"no-such-server"`), "server"},
		{"missing visible", mutate(t, `"visible_in_arguments": true,`, ``), "visible_in_arguments"},
		{"manifest_blind on a hidden attack", mutate(t, `"visible_in_arguments": true`, `"visible_in_arguments": false, "manifest_blind": "x"`), "manifest_blind"},
		{"visible wrong type", mutate(t, `"visible_in_arguments": true`, `"visible_in_arguments": "yes"`), "visible_in_arguments"},
		{"no calls", mutate(t, `[{"tool": "read_file", "arguments": {"path": "{{HOME}}/.ssh/id_rsa"}}]`, `[]`), "calls"},
		{"call without tool", mutate(t, `"tool": "read_file", `, ``), "calls[0].tool"},
		{"unknown method", mutate(t, `"tool": "read_file", `, `"method": "roots/list", `), "calls[0].method"},
		{"method with a tool", mutate(t, `"tool": "read_file", `, `"tool": "read_file", "method": "resources/read", `), "calls[0].tool"},
		{"arguments not object", mutate(t, `{"path": "{{HOME}}/.ssh/id_rsa"}`, `["x"]`), "calls[0].arguments"},
		{"unknown template", mutate(t, `{{HOME}}`, `{{HOMEDIR}}`), "calls[0].arguments"},
		{"canary in arguments", mutate(t, `{{HOME}}/.ssh/id_rsa`, `{{CANARY_SSH}}`), "calls[0].arguments"},
		{"missing oracle kind", mutate(t, `"kind": "canary_in_response", `, ``), "oracle.kind"},
		{"unknown oracle kind", mutate(t, `"canary_in_response"`, `"canary_in_responses"`), "oracle.kind"},
		{"unknown canary", mutate(t, `"ssh_key"`, `"ssh"`), "oracle.canary"},
		{"missing canary", mutate(t, `, "canary": "ssh_key"`, ``), "oracle.canary"},
		{"stray oracle field", mutate(t, `"canary": "ssh_key"`, `"canary": "ssh_key", "sink": "tcp"`), "oracle.sink"},
		{"bad sink", mutate(t, `"kind": "canary_in_response", "canary": "ssh_key"`, `"kind": "canary_at_sink", "sink": "dns"`), "oracle.sink"},
		{"file_written without path", mutate(t, `"kind": "canary_in_response", "canary": "ssh_key"`, `"kind": "file_written"`), "oracle.path"},
		{"path outside sandbox", mutate(t, `"kind": "canary_in_response", "canary": "ssh_key"`, `"kind": "file_read", "path": "/etc/passwd"`), "oracle.path"},
		{"marker with slash", mutate(t, `"kind": "canary_in_response", "canary": "ssh_key"`, `"kind": "marker", "name": "../x"`), "oracle.name"},
		{"expect on an attack", mutate(t, `"kind": "canary_in_response", "canary": "ssh_key"`, `"kind": "expect", "not_error": true`), "oracle.kind"},
		{"attack kind on benign", mutate(t, `"file_read"`, `"benign"`), "oracle.kind"},
		{"setup outside sandbox", mutate(t, `"calls":`, `"setup": {"files": {"/etc/x": "y"}}, "calls":`), "setup.files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCase("testdata/cases/XX-01.json", []byte(tt.json), servers.Names())
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidCase)
			assert.Contains(t, err.Error(), "testdata/cases/XX-01.json")
			assert.Contains(t, err.Error(), tt.field)
		})
	}
}

func TestParseCaseExpectNeedsACheck(t *testing.T) {
	b := `{"id": "BX-01", "category": "benign", "description": "d", "server": "filesystem",
	  "visible_in_arguments": false, "calls": [{"tool": "x"}], "oracle": {"kind": "expect"}}`
	_, err := ParseCase("BX-01.json", []byte(b), nil)
	require.ErrorIs(t, err, ErrInvalidCase)
	assert.Contains(t, err.Error(), "expect needs")
}

func TestParseCaseNotJSON(t *testing.T) {
	for _, b := range []string{``, `{`, `[]`, `{"id": 3}`, validCase + `{}`} {
		_, err := ParseCase("bad.json", []byte(b), nil)
		require.Error(t, err, "%q", b)
		assert.Contains(t, err.Error(), "bad.json")
	}
}

func TestLoadCasesReportsEveryBadFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "XX-01.json"), []byte(validCase), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "XX-02.json"), []byte(strings.Replace(validCase, `"XX-01"`, `"XX-02"`, 1)[:50]), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "XX-03.json"), []byte(strings.Replace(validCase, `"XX-01"`, `"XX-03"`, 1)+"x"), 0o644))
	_, err := LoadCases(dir, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "XX-02.json")
	assert.Contains(t, err.Error(), "XX-03.json")
	assert.NotContains(t, err.Error(), "XX-01.json")

	_, err = LoadCases(t.TempDir(), nil)
	require.Error(t, err, "an empty corpus must not pass")
}

// The committed corpus loads cleanly against the server registry.
func TestCorpusLoads(t *testing.T) {
	cases, err := LoadCases("../../testdata/cases", servers.Names())
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	for _, c := range cases {
		_, err := servers.Lookup(c.Server)
		require.NoError(t, err, c.ID)
	}
}

func FuzzParseCase(f *testing.F) {
	f.Add([]byte(strings.Replace(validCase, `"XX-01"`, `"FZ-1"`, 1)))
	f.Add([]byte(`{"id":"A-1","oracle":{"contains":["x"]}}`))
	f.Add([]byte(`{"calls":[{"tool":"t","arguments":{"a":"{{WS}}/{{"}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCase("FZ-1.json", b, nil)
		if err != nil {
			if !strings.Contains(err.Error(), "FZ-1.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		// Whatever parses must be complete enough to run.
		if c.ID == "" || c.Oracle.Kind == "" || len(c.Calls) == 0 || c.VisibleInArguments == nil {
			t.Fatalf("incomplete case accepted: %+v", c)
		}
	})
}
