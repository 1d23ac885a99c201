package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var flatSeeds = []string{
	`{}`, ` { } `, `{"path":"/ws/notes.txt"}`, "{\n\t\"a\" : \"b\" ,\r\n \"c\":\"d\"}\n",
	`{"path":"/ws/caf\u00e9"}`, `{"path":"/ws/café"}`, `{"a":"b","a":"c"}`, `{"a":"b","A":"c"}`,
	`{"a":1}`, `{"a":null}`, `{"a":["b"]}`, `{"a":{"b":"c"}}`, `{"a":true}`, `{"a":"b"`, `{"a":"b",}`,
	`{"a":"b"}x`, `{"a":"b"}{}`, `{"a" "b"}`, `{a:"b"}`, `["a"]`, `"a"`, `null`, ``, `{`, `}`,
	"{\"a\":\"\x01\"}", "{\"a\":\"\xff\"}", "{\"\xc3\":\"b\"}", `{"":""}`, `{"a":"\"}`, `{"a":"b\\"}`,
	"{\"a\":\"\xed\xa0\x80\"}", `{"a":"b"} `, ` {"a":"b"}`, "\xef\xbb\xbf{}", `{"a":"b",,"c":"d"}`,
}

// decodeFlat answers only where encoding/json gives the same map.
func checkFlat(t *testing.T, raw []byte) {
	m, ok := decodeFlat(raw)
	if !ok {
		return
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decodeFlat(%q) = %v; encoding/json: %v", raw, m, err)
	}
	if !reflect.DeepEqual(any(m), v) {
		t.Fatalf("decodeFlat(%q) = %#v; encoding/json: %#v", raw, m, v)
	}
}

func TestDecodeFlat(t *testing.T) {
	for _, s := range flatSeeds {
		checkFlat(t, []byte(s))
	}
	for _, s := range []string{`{}`, `{"path":"/ws/notes.txt"}`, "{\n\t\"a\" : \"b\" ,\r\n \"c\":\"d\"}\n", `{"path":"/ws/café"}`} {
		if _, ok := decodeFlat([]byte(s)); !ok {
			t.Errorf("decodeFlat(%q) took the slow path", s)
		}
	}
	for _, s := range []string{`{"a":"b","a":"c"}`, `{"a":"\"}`, "{\"a\":\"\xff\"}", `{"a":"b"}x`, `{"a":1}`} {
		if _, ok := decodeFlat([]byte(s)); ok {
			t.Errorf("decodeFlat(%q) did not leave it to encoding/json", s)
		}
	}
}

func FuzzDecodeFlat(f *testing.F) {
	for _, s := range flatSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkFlat(t, raw) })
}

// schemaSeeds are schemas of the forms the fast path takes and of forms
// it must leave to the library.
var schemaSeeds = []string{
	`{"type":"object","properties":{"path":{"type":"string","description":"p"}},"required":["path"],"additionalProperties":false}`,
	`{"type":"object","properties":{"path":{"type":"string","maxLength":4}},"required":["path"]}`,
	`{"type":"object","properties":{"path":{"type":"string","minLength":1}},"additionalProperties":true}`,
	`{"type":"object","properties":{"n":{"type":"number"},"i":{"type":"integer"},"b":{"type":"boolean"},"z":{"type":"null"},"a":{"type":"array"},"o":{"type":"object"},"t":true,"f":{}}}`,
	`{"type":"object","properties":{},"required":[],"additionalProperties":false}`,
	`{"type":"object","properties":{"a":{"type":"string","pattern":"^x"}}}`,
	`{"type":"object","properties":{"a":{"type":["string","null"]}}}`,
	`{"type":"object","properties":{"a":false}}`,
	`{"type":"object","properties":{"a":{"type":"number","maxLength":1}}}`,
	`{"type":"object","additionalProperties":{"type":"string"}}`,
	`{"type":"object","properties":{"a":{"type":"string","minLength":1.5}}}`,
	`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"a":{"type":"string"}}}`,
	`{"properties":{"a":{"type":"string"}}}`,
	`{"type":"string"}`, `true`, `false`, `{}`,
}

var argsSeeds = []string{
	`{}`, `{"path":"/ws/a"}`, `{"path":""}`, `{"path":"abcde"}`, `{"path":"añb"}`, `{"path":"ñññññ"}`, `{"path":1}`,
	`{"path":null}`, `{"path":"/ws/a","x":"y"}`, `{"n":1.5,"i":2,"b":true,"z":null,"a":[],"o":{},"t":1,"f":"x"}`,
	`{"i":2.5}`, `{"i":1e300}`, `{"i":-0}`, `{"n":"1"}`, `{"a":"x"}`, `{"a":null}`, `{"a":["x"]}`,
}

// checkSchema: where the fast path accepts arguments, the library does too.
func checkSchema(t *testing.T, schema, args []byte) {
	s, doc, err := compileSchema("fuzz", schema)
	if err != nil {
		return
	}
	simple := newSimpleSchema(doc)
	if simple == nil {
		return
	}
	var v any
	if json.Unmarshal(args, &v) != nil {
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	if simple.accepts(m) {
		if err := s.Validate(m); err != nil {
			t.Fatalf("schema %s: fast path accepts %s; the library: %v", schema, args, err)
		}
	}
}

func TestSimpleSchemaAgreesWithLibrary(t *testing.T) {
	for _, s := range schemaSeeds {
		for _, a := range argsSeeds {
			checkSchema(t, []byte(s), []byte(a))
		}
	}
	// Every schema of the corpus's policies, with the arguments above and
	// with each property given a value of every type.
	files, err := filepath.Glob("../../testdata/policies/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	simple := 0
	values := []string{`"x"`, `""`, `1`, `1.5`, `true`, `null`, `[]`, `["x"]`, `{}`}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var p struct {
			Tools map[string]struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"tools"`
		}
		require.NoError(t, json.Unmarshal(raw, &p), f)
		for _, tool := range p.Tools {
			if len(tool.Schema) == 0 {
				continue
			}
			_, doc, err := compileSchema("t", tool.Schema)
			require.NoError(t, err)
			if newSimpleSchema(doc) != nil {
				simple++
			}
			var props struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			json.Unmarshal(tool.Schema, &props)
			var names []string
			for n := range props.Properties {
				names = append(names, n)
			}
			for _, a := range argsSeeds {
				checkSchema(t, tool.Schema, []byte(a))
			}
			for _, v := range values {
				// every property the same value; and each alone
				var all []string
				for _, n := range names {
					all = append(all, `"`+n+`":`+v)
					checkSchema(t, tool.Schema, []byte(`{"`+n+`":`+v+`}`))
				}
				checkSchema(t, tool.Schema, []byte(`{`+strings.Join(all, ",")+`}`))
				checkSchema(t, tool.Schema, []byte(`{`+strings.Join(append(all, `"extra":`+v), ",")+`}`))
			}
		}
	}
	if simple == 0 {
		t.Fatal("no schema of the corpus's policies takes the fast path")
	}
	t.Logf("%d corpus schemas take the fast path", simple)
}

func FuzzSimpleSchema(f *testing.F) {
	for _, s := range schemaSeeds {
		for _, a := range argsSeeds {
			f.Add([]byte(s), []byte(a))
		}
	}
	f.Fuzz(func(t *testing.T, schema, args []byte) { checkSchema(t, schema, args) })
}

// BenchmarkFastPaths compares each fast path with the general code it
// stands in for, in the same process: decoding a read_file's arguments,
// and checking them against the corpus's read_file schema.
func BenchmarkFastPaths(b *testing.B) {
	args := []byte(`{"path":"/tmp/TestStandalone1234/001/notes.txt"}`)
	b.Run("decode=encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v any
			if json.Unmarshal(args, &v) != nil {
				b.Fatal()
			}
		}
	})
	b.Run("decode=flat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := decodeFlat(args); !ok {
				b.Fatal()
			}
		}
	})
	schema := []byte(`{"additionalProperties":false,"properties":{"path":{"description":"Path of the file or directory","type":"string"}},"required":["path"],"type":"object"}`)
	s, doc, err := compileSchema("read_file", schema)
	require.NoError(b, err)
	simple := newSimpleSchema(doc)
	require.NotNil(b, simple)
	m, _ := decodeFlat(args)
	b.Run("schema=library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if s.Validate(m) != nil {
				b.Fatal()
			}
		}
	})
	b.Run("schema=simple", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !simple.accepts(m) {
				b.Fatal()
			}
		}
	})
}
