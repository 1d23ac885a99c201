package policy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestModelForms: a value whose percent-decoded or NFKC-normalised form
// would be refused is refused as sent, in every kind of slot (a server
// that URL-decodes a note's name, or normalises a file name, reaches what
// the form names); benign twins with encodings and non-ASCII text pass,
// and a URL's own percent-encoding is the URL's.
func TestModelForms(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, modelPolicy, true)
	checkCalls(t, e, []engineCall{
		// Text slots a decoding server joins to a directory of its own.
		{"note", map[string]any{"text": "..%2fhome%2f.ssh%2fid_rsa"}, RulePathOutside, "L1"},
		{"note", map[string]any{"text": "%2e%2e/home/.ssh/id_rsa"}, RulePathOutside, "L1"},
		{"note", map[string]any{"text": "%252e%252e%252fhome%252f.ssh"}, RulePathOutside, "L1"},
		{"note", map[string]any{"text": "%2Fetc%2Fpasswd"}, RulePathOutside, "L1"},
		{"note", map[string]any{"text": "http%3A%2F%2F127.0.0.1%3A9%2Fx"}, RuleURLHost, "L1"},
		// Compatibility forms: fullwidth dots and solidus, the two-dot
		// leader, in text and in path slots.
		{"note", map[string]any{"text": "\uff0e\uff0e/\uff0e\uff0e/home/.ssh/id_rsa"}, RulePathOutside, "L1"},
		{"note", map[string]any{"text": "\u2025/home/.ssh/id_rsa"}, RulePathOutside, "L1"},
		{"search", map[string]any{"pattern": "\uff0e\uff0e/home/.ss*"}, RulePathOutside, "L1"},
		{"import", map[string]any{"source": "\uff0fetc\uff0fpasswd"}, RulePathOutside, "L1"},
		{"import", map[string]any{"source": "\uff0e\uff0e%2fhome"}, RulePathEncoded, "L2"},
		// Benign twins.
		{"note", map[string]any{"text": "50%25 off, %2Bone"}, "", ""},
		{"note", map[string]any{"text": "my%20note.txt"}, "", ""},
		{"note", map[string]any{"text": "日本語のメモ ｆｕｌｌｗｉｄｔｈ"}, "", ""},
		{"import", map[string]any{"source": "\uff4e\uff4f\uff54\uff45\uff53.txt"}, "", ""},
		{"many", map[string]any{"files": []any{"http://127.0.0.2/w?city=New%20York&q=%2e%2e%2f"}}, "", ""},
	})
	// Prompt arguments, which no schema types.
	v := e.CheckRequest(context.Background(), "prompts/get", json.RawMessage(`{"name":"p","arguments":{"file":"..%2fhome%2f.ssh%2fid_rsa"}}`))
	if assert.NotNil(t, v) {
		assert.Equal(t, RulePathOutside, v.Rule)
		assert.Contains(t, v.Reason, "percent-decodes")
	}
	assert.Nil(t, e.CheckRequest(context.Background(), "prompts/get", json.RawMessage(`{"name":"p","arguments":{"file":"my%20notes.txt"}}`)))
}
