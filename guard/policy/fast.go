package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcpguard/mcpguard/guard/validate"
)

// The engine's hot path, a benign tools/call, spends much of its own time
// in encoding/json (decoding the arguments) and in the JSON Schema library
// (checking them), although nearly every call is a flat object of plain
// strings checked against a schema of typed properties. The fast paths
// here take that common case and give exactly the answer of the general
// code; whatever they are not sure of goes to the general code.

// maxFlat is the most members a flat object may have for the fast paths.
const maxFlat = 8

// flatArg is one member of a flat object of strings.
type flatArg struct{ key, val string }

// parseFlat reads raw when it is an object of at most maxFlat members that
// are all strings without escapes (the common shape of tool arguments),
// appending its members to dst in order. ok is false for anything else
// (escapes, other values, invalid UTF-8, a repeated key, bad syntax, more
// members): the caller decodes it with encoding/json.
func parseFlat(raw []byte, dst []flatArg) (args []flatArg, ok bool) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return dst, skipWS(raw, i+1) == len(raw)
	}
	var spans [maxFlat][4]int // key and value of each member, in raw
	n := 0
	for {
		k0, k1, ok := plainString(raw, i)
		if !ok || n == maxFlat {
			return nil, false
		}
		for _, sp := range spans[:n] {
			if bytes.Equal(raw[sp[0]:sp[1]], raw[k0:k1]) {
				return nil, false // a repeated key
			}
		}
		i = skipWS(raw, k1+1)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		v0, v1, ok := plainString(raw, skipWS(raw, i+1))
		if !ok {
			return nil, false
		}
		spans[n] = [4]int{k0, k1, v0, v1}
		n++
		i = skipWS(raw, v1+1)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipWS(raw, i+1)
			continue
		case '}':
			if skipWS(raw, i+1) != len(raw) {
				return nil, false
			}
		default:
			return nil, false
		}
		break
	}
	// Keys and values are substrings of one copy of raw: one allocation
	// for all of them.
	str := string(raw)
	for _, sp := range spans[:n] {
		dst = append(dst, flatArg{str[sp[0]:sp[1]], str[sp[2]:sp[3]]})
	}
	return dst, true
}

// flatGet returns the value of key in args.
func flatGet(args []flatArg, key string) (string, bool) {
	for _, a := range args {
		if a.key == key {
			return a.val, true
		}
	}
	return "", false
}

// flatMap is args as encoding/json decodes the object they came from.
func flatMap(args []flatArg) map[string]any {
	m := make(map[string]any, len(args))
	for _, a := range args {
		m[a.key] = a.val
	}
	return m
}

// decodeFlat decodes raw as json.Unmarshal into an interface would, when
// parseFlat reads it; ok is false otherwise.
func decodeFlat(raw []byte) (map[string]any, bool) {
	var arr [maxFlat]flatArg
	args, ok := parseFlat(raw, arr[:0])
	if !ok {
		return nil, false
	}
	return flatMap(args), true
}

// checkFlat is Check for arguments parseFlat read, without building the
// map of them: the same checks in the same order, with the same
// violations. done is false where it leaves the call to the general path
// (a schema the fast path cannot accept it by, a tool with an argv
// argument), before it has checked anything.
func (e *Engine) checkFlat(ctx context.Context, t *tool, raw []byte, args []flatArg, j *judged) (v *Violation, done bool) {
	if t.hasArgv || t.schema != nil && (t.simple == nil || !t.simple.acceptsFlat(args)) {
		return nil, false
	}
	for _, d := range t.topDefaults {
		if v, ok := flatGet(args, d); !ok || blank(v) {
			return nil, false // judged as its default: the general path's
		}
	}
	for i := range args {
		if _, ok := t.slots["/"+escapeToken(args[i].key)]; !ok {
			return nil, false // a key no slot names is judged: the general path's
		}
	}
	// In the general path's order (its keys sorted), so that the first
	// violation is the same one.
	byKey := func(a, b flatArg) int { return strings.Compare(a.key, b.key) }
	if !slices.IsSortedFunc(args, byKey) {
		args = slices.SortedFunc(slices.Values(args), byKey)
	}
	for i := range args {
		a := &args[i]
		sl := t.slots["/"+escapeToken(a.key)]
		j.collect(sl, a.val)
		if bad := e.judgeString(ctx, t, sl, a.val); bad != nil {
			bad.Arg = argLabel(sl.path, a.key)
			return bad, true
		}
	}
	if !e.o.L2 {
		return nil, true
	}
	if validate.MayCarryContentRisk(raw) {
		return e.checkContent(t, flatMap(args), nil), true
	}
	// checkSplit: the strings in the order of their keys.
	if len(args) < 2 {
		return nil, true
	}
	all := make([]string, len(args))
	for i, a := range args {
		all[i] = a.val
	}
	return splitSecret(t, all), true
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// plainString reads the JSON string at b[i:] when it has no escape and no
// control character and is valid UTF-8: its contents are b[start:end],
// and its closing quote is at end.
func plainString(b []byte, i int) (start, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, 0, false
	}
	ascii := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			if !ascii && !utf8.Valid(b[i+1:j]) {
				return 0, 0, false
			}
			return i + 1, j, true
		case c == '\\' || c < 0x20:
			return 0, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return 0, 0, false
}

// simpleSchema is a tool's JSON Schema when it is of the common simple
// form: an object with typed properties (a type name, and for strings
// minLength and maxLength; descriptions and titles), required members,
// and additionalProperties true or false. accepts answers for it without
// the library, and only says yes where the library says yes too.
type simpleSchema struct {
	props    map[string]simpleProp
	required []string
	closed   bool // additionalProperties: false
}

type simpleProp struct {
	typ      string // "" for any
	min, max int    // string length bounds in code points; max -1 for none
}

// newSimpleSchema reads the schema document the library compiled (as
// jsonschema.UnmarshalJSON decoded it) and returns its simple form, or nil
// when it uses anything else: then every call goes to the library.
func newSimpleSchema(doc any) *simpleSchema {
	top, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	s := &simpleSchema{props: map[string]simpleProp{}}
	for k, v := range top {
		switch k {
		case "type":
			if v != "object" {
				return nil
			}
		case "description", "title":
			if _, ok := v.(string); !ok {
				return nil
			}
		case "additionalProperties":
			b, ok := v.(bool)
			if !ok {
				return nil
			}
			s.closed = !b
		case "required":
			list, ok := v.([]any)
			if !ok {
				return nil
			}
			for _, r := range list {
				name, ok := r.(string)
				if !ok {
					return nil
				}
				s.required = append(s.required, name)
			}
		case "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			for name, ps := range props {
				p, ok := newSimpleProp(ps)
				if !ok {
					return nil
				}
				s.props[name] = p
			}
		default:
			return nil
		}
	}
	if top["type"] != "object" {
		return nil
	}
	return s
}

func newSimpleProp(v any) (simpleProp, bool) {
	p := simpleProp{max: -1}
	if b, ok := v.(bool); ok {
		return p, b // true admits anything; false goes to the library
	}
	m, ok := v.(map[string]any)
	if !ok {
		return p, false
	}
	for k, x := range m {
		switch k {
		case "type":
			t, ok := x.(string)
			if !ok {
				return p, false
			}
			switch t {
			case "string", "number", "integer", "boolean", "null", "array", "object":
				p.typ = t
			default:
				return p, false
			}
		case "description", "title":
			if _, ok := x.(string); !ok {
				return p, false
			}
		case "minLength", "maxLength":
			n, ok := x.(json.Number)
			if !ok {
				return p, false
			}
			i, err := strconv.Atoi(string(n))
			if err != nil || i < 0 {
				return p, false
			}
			if k == "minLength" {
				p.min = i
			} else {
				p.max = i
			}
		default:
			return p, false
		}
	}
	if (p.min > 0 || p.max >= 0) && p.typ != "string" {
		return p, false // length keywords on other types: the library's
	}
	return p, true
}

// accepts reports whether args certainly satisfies the schema. False means
// "not certain": the library decides (and words the error).
func (s *simpleSchema) accepts(args map[string]any) bool {
	for _, r := range s.required {
		if _, ok := args[r]; !ok {
			return false
		}
	}
	for k, v := range args {
		p, ok := s.props[k]
		if !ok {
			if s.closed {
				return false
			}
			continue
		}
		if !p.accepts(v) {
			return false
		}
	}
	return true
}

// acceptsFlat is accepts for a flat object of strings.
func (s *simpleSchema) acceptsFlat(args []flatArg) bool {
	for _, r := range s.required {
		if _, ok := flatGet(args, r); !ok {
			return false
		}
	}
	for _, a := range args {
		p, ok := s.props[a.key]
		if !ok {
			if s.closed {
				return false
			}
			continue
		}
		if !p.acceptsString(a.val) {
			return false
		}
	}
	return true
}

// acceptsString is accepts for a string value.
func (p simpleProp) acceptsString(s string) bool {
	switch p.typ {
	case "":
		return true
	case "string":
		if p.min > 0 || p.max >= 0 {
			n := utf8.RuneCountInString(s)
			return n >= p.min && (p.max < 0 || n <= p.max)
		}
		return true
	}
	return false
}

func (p simpleProp) accepts(v any) bool {
	switch p.typ {
	case "":
		return true
	case "string":
		s, ok := v.(string)
		return ok && p.acceptsString(s)
	case "number":
		f, ok := v.(float64)
		return ok && !math.IsNaN(f) && !math.IsInf(f, 0)
	case "integer":
		f, ok := v.(float64)
		return ok && !math.IsInf(f, 0) && f == math.Trunc(f)
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	}
	return false
}
