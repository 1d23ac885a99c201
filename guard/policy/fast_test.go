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
	// The whole check of a read_file (path resolution included) on the
	// corpus's filesystem policy, without the fast paths and with them.
	fx := newFixture(b)
	src, err := os.ReadFile("../../testdata/policies/filesystem.json")
	require.NoError(b, err)
	call, err := json.Marshal(map[string]string{"path": fx.ws + "/notes.txt"})
	require.NoError(b, err)
	for _, general := range []bool{true, false} {
		e := fx.engine(b, string(src), true)
		e.general = general
		name := "check=fast"
		if general {
			name = "check=general"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if v := e.Check(b.Context(), "read_file", call); v != nil {
					b.Fatal(v)
				}
			}
		})
	}
}

// flatValues are argument values for TestCheckFlatAgrees: paths in and
// out of the roots, through a symlink, relative, ~, file URIs, encoded
// traversal, option-like; URLs and hosts; commands; secrets, environment
// references, base64 and split keys.
func flatValues(f *fixture) []string {
	return []string{"", "x", f.ws + "/notes.txt", f.ws + "/docs/new.txt", f.ws + "/link", f.ws + "/../home/.ssh/id_rsa",
		"notes.txt", "docs/../notes.txt", "../ws-evil/x", "~/x", "~root/x", "file://" + f.ws + "/notes.txt", "file://evil/x",
		f.ws + "/%2e%2e/x", "-rf", "--output=/etc/passwd", "/usr/share/dict", "/etc/passwd", "http://127.0.0.2:8080/w",
		"https://api.example.com/v1", "http://rebind.example.com/", "http://intranet.example.com/", "127.0.0.2:8080", "10.0.0.8:22",
		"/bin/ls", "ls -l docs", "git log", "ls; rm -rf /", "AKIAIOSFODNN7EXAMPLE", "AKIA", "IOSFODNN7EXAMPLE", "$HOME", "${PATH}",
		"%APPDATA%", "/proc/self/environ", "QUtJQUlPU0ZPRE5ON0VYQU1QTEU=", "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
		"fast", "slow", "café", "a\u200bb"}
}

// Check gives the same answer, violation for violation, with the fast
// paths as without them, for every tool of the test policy and of the
// corpus's filesystem policy, with and without L2.
func TestCheckFlatAgrees(t *testing.T) {
	f := newFixture(t)
	fsPolicy, err := os.ReadFile("../../testdata/policies/filesystem.json")
	require.NoError(t, err)
	values := flatValues(f)
	ctx := t.Context()
	n := 0
	for _, src := range []string{testPolicy, string(fsPolicy)} {
		for _, l2 := range []bool{true, false} {
			fast, general := f.engine(t, src, l2), f.engine(t, src, l2)
			general.general = true
			for _, tool := range append(fast.Tools(), "unknown") {
				names := []string{"x"}
				if tl := fast.tools[tool]; tl != nil {
					for _, sl := range tl.slots {
						if strings.Count(sl.path, "/") == 1 && sl.path != "/*" {
							names = append(names, sl.name)
						}
					}
					if tl.simple != nil {
						for name := range tl.simple.props {
							names = append(names, name)
						}
					}
				}
				try := func(args map[string]string) {
					raw, err := json.Marshal(args)
					require.NoError(t, err)
					got, want := fast.Check(ctx, tool, raw), general.Check(ctx, tool, raw)
					if !sameViolation(got, want) {
						t.Fatalf("%s %s (L2 %v): fast path %+v, general %+v", tool, raw, l2, got, want)
					}
					n++
				}
				try(map[string]string{})
				for i, v := range values {
					for _, name := range names {
						try(map[string]string{name: v})
						// with a second member: another argument, or an
						// unknown one
						for _, other := range names {
							if other != name {
								try(map[string]string{name: v, other: values[(i+7)%len(values)]})
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d calls agree", n)
}

// FuzzCheckFlat: whatever the arguments' bytes, Check answers as it does
// without the fast paths.
func FuzzCheckFlat(f *testing.F) {
	fx := newFixture(f)
	fast, general := fx.engine(f, testPolicy, true), fx.engine(f, testPolicy, true)
	general.general = true
	tools := fast.Tools()
	for _, s := range flatSeeds {
		f.Add([]byte(s), uint8(0))
	}
	for i, v := range flatValues(fx) {
		raw, _ := json.Marshal(map[string]string{"path": v, "url": v, "command": v})
		f.Add(raw, uint8(i))
	}
	f.Fuzz(func(t *testing.T, raw []byte, which uint8) {
		tool := tools[int(which)%len(tools)]
		got, want := fast.Check(t.Context(), tool, raw), general.Check(t.Context(), tool, raw)
		if !sameViolation(got, want) {
			t.Fatalf("%s %q: fast path %+v, general %+v", tool, raw, got, want)
		}
	})
}

// sameViolation compares two answers of Check. The schema library lists
// additional properties in the order it meets them in a map, which varies
// from run to run: for its violations the reason is left out.
func sameViolation(a, b *Violation) bool {
	if a != nil && b != nil && a.Rule == RuleSchema && b.Rule == RuleSchema {
		return a.Layer == b.Layer && a.Target == b.Target && a.Arg == b.Arg
	}
	return reflect.DeepEqual(a, b)
}
