package clients

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// fuzzRoundTrip is the round trip on any document that parses: wrap
// every wrappable server, the result parses, a second wrap changes
// nothing, and unwrap restores the input byte for byte.
func fuzzRoundTrip(t *testing.T, f File, in []byte) {
	servers, err := Parse(f, in)
	if err != nil {
		return
	}
	wraps := map[string][]string{}
	for _, s := range servers {
		if s.Problem == "" && !s.Guarded {
			wraps[KeyString(s.Key)] = testPrefix(f, s)
		}
	}
	out, changes, err := Wrap(f, in, wraps)
	if err != nil {
		t.Fatalf("wrap: %v", err)
	}
	// Strict JSON stays strict: a client that reads plain JSON (Claude
	// Code, Claude Desktop, Gemini CLI, which refuses trailing commas) can
	// read what wrap wrote.
	if f.Format == JSON && json.Valid(in) && !json.Valid(out) {
		t.Fatalf("wrap made strict JSON invalid:\n%s\n---\n%s", in, out)
	}
	again, more, err := Wrap(f, out, wraps)
	if err != nil {
		t.Fatalf("wrap of the wrapped file: %v\n%s", err, out)
	}
	if string(again) != string(out) || len(more) != 0 {
		t.Fatalf("second wrap changed the file:\n%s\n---\n%s", out, again)
	}
	back, _, err := Unwrap(f, out, changes)
	if err != nil {
		t.Fatalf("unwrap: %v\n%s", err, out)
	}
	if string(back) != string(in) {
		t.Fatalf("unwrap did not restore the input:\n%q\n---\n%q", in, back)
	}
}

func seed(f *testing.F, format Format) {
	for _, g := range goldenFiles {
		if g.Format != format {
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata", g.Path))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzRoundTripJSON(f *testing.F) {
	seed(f, JSON)
	file := File{Cursor, "user", "fuzz.json", JSON, [][]string{{"mcpServers"}, {"projects", "*", "mcpServers"}}}
	f.Fuzz(func(t *testing.T, in []byte) { fuzzRoundTrip(t, file, in) })
}

func FuzzRoundTripTOML(f *testing.F) {
	seed(f, TOML)
	file := File{Codex, "user", "fuzz.toml", TOML, [][]string{{"mcp_servers"}}}
	f.Fuzz(func(t *testing.T, in []byte) { fuzzRoundTrip(t, file, in) })
}
