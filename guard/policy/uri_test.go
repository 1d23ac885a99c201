package policy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestURIParts: every component of a URI's query and fragment is judged
// as the argument model reads a value (decoded forms included), in
// resource URIs of any scheme and in file: and server-scheme URIs in tool
// arguments; benign twins with ordinary queries pass.
func TestURIParts(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, testPolicy, true)
	key := f.home + "/.ssh/id_rsa"
	cases := []struct{ uri, rule string }{
		{"notes://x?file=" + key, RulePathOutside},
		{"notes://x?file=..%2Fhome%2F.ssh%2Fid_rsa", RulePathOutside},
		{"notes://x?file=%2F" + key[1:], RulePathOutside},
		{"notes://x?a=1;file=" + key, RulePathOutside},
		{"notes://x?" + key, RulePathOutside},
		{"notes://x#" + key, RulePathOutside},
		{"notes://x?u=http://127.0.0.1:9/", RuleURLHost},
		{"file://" + f.ws + "/notes.txt?file=" + key, RulePathOutside},
		{"file://" + f.ws + "/notes.txt?file=\uff0e\uff0e/home/.ssh/id_rsa", RulePathOutside},
		{"http://api.example.com/?file=" + key, RulePathOutside},
		// Benign twins.
		{"notes://x?file=docs/a.md&view=full", ""},
		{"notes://hello?lang=en#top", ""},
		{"file://" + f.ws + "/notes.txt?version=2", ""},
		{"notes://x?file=" + f.ws + "/notes.txt", ""},
	}
	for _, c := range cases {
		v := e.CheckRequest(context.Background(), "resources/read", json.RawMessage(`{"uri":`+quote(c.uri)+`}`))
		if c.rule == "" {
			assert.Nil(t, v, c.uri)
			continue
		}
		if assert.NotNil(t, v, c.uri) {
			assert.Equal(t, c.rule, v.Rule, "%s: %s", c.uri, v.Reason)
		}
	}
	// In tool arguments: a server's own scheme and file: URIs (a network
	// URL's query is for the host it goes to).
	checkCalls(t, f.engine(t, modelPolicy, true), []engineCall{
		{"note", map[string]any{"ref": "notes://x?file=" + key}, RulePathOutside, "L1"},
		{"note", map[string]any{"ref": "notes://x?file=%2e%2e%2fhome%2fx"}, RulePathOutside, "L1"},
		{"import", map[string]any{"source": "file://" + f.ws + "/notes.txt?f=" + key}, RulePathOutside, "L1"},
		{"note", map[string]any{"ref": "notes://x?file=notes.txt"}, "", ""},
		{"import", map[string]any{"source": "http://127.0.0.2/weather?file=/etc/passwd"}, "", ""},
	})
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
