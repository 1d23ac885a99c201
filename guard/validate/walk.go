package validate

import (
	"bytes"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// The response side reads results and messages as streams: it walks the
// JSON text in place, never building a tree of it, so that what a message
// costs the proxy is bounded by a small multiple of its size whatever its
// shape (a tree of 24 MiB of small objects cost C-app 2 GB). The input is
// always a value the jsonrpc Scanner accepted; the walkers do not check
// the grammar again.

// strSpan is one string of a JSON text: raw[Off:End] with its quotes.
type strSpan struct {
	Off, End int
	Key      bool // an object's key
	// Label: the value of a key that labels rather than says something
	// (type, mimeType, role, uri): a client shows it as a field name.
	Label bool
}

// eachString calls f for every string of raw (keys included), in the
// order they are written; f returns false to stop. It returns false when
// stopped.
func eachString(raw []byte, f func(s strSpan) bool) bool {
	var open []byte // the open brackets, innermost last
	expectKey := false
	label := false
	for i := 0; i < len(raw); {
		switch c := raw[i]; c {
		case '"':
			j := stringEnd(raw, i)
			key := expectKey && len(open) > 0 && open[len(open)-1] == '{'
			sp := strSpan{Off: i, End: j, Key: key, Label: !key && label}
			label = key && isLabel(raw[i+1:j-1])
			if !f(sp) {
				return false
			}
			i = j
			continue
		case '{':
			open = append(open, c)
			expectKey = true
		case '[':
			open = append(open, c)
			label = false
		case '}', ']':
			open = open[:len(open)-1]
			expectKey = false
		case ':':
			expectKey = false
		case ',':
			expectKey = len(open) > 0 && open[len(open)-1] == '{'
		case ' ', '\t', '\n', '\r':
		default:
			label = false // a number or literal value
		}
		i++
	}
	return true
}

func isLabel(k []byte) bool {
	switch string(k) {
	case "type", "mimeType", "role", "uri":
		return true
	}
	return false
}

// stringEnd returns the index just past the string that starts at raw[i].
func stringEnd(raw []byte, i int) int {
	for j := i + 1; j < len(raw); {
		k := bytes.IndexAny(raw[j:], `"\`)
		if k < 0 {
			return len(raw)
		}
		j += k
		if raw[j] == '\\' {
			j += 2
			continue
		}
		return j + 1
	}
	return len(raw)
}

// text returns the value of the string at s.
func (s strSpan) text(raw []byte) string { return jsonrpc.Unquote(raw[s.Off:s.End]) }

// rewriteStrings returns raw with every string f changes replaced by the
// canonical encoding of f's result (f reports whether it changed the
// string), or raw itself when f changed none.
func rewriteStrings(raw []byte, f func(s strSpan, v string) (string, bool)) []byte {
	var out []byte
	last := 0
	eachString(raw, func(s strSpan) bool {
		v, changed := f(s, s.text(raw))
		if !changed {
			return true
		}
		if out == nil {
			out = make([]byte, 0, len(raw))
		}
		out = append(out, raw[last:s.Off]...)
		out = appendJSONString(out, v)
		last = s.End
		return true
	})
	if out == nil {
		return raw
	}
	return append(out, raw[last:]...)
}

// appendJSONString writes v as a JSON string in the canonical encoding.
func appendJSONString(dst []byte, v string) []byte {
	tmp := make([]byte, 0, len(v)+2)
	tmp = append(tmp, '"')
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"' || c == '\\':
			tmp = append(tmp, '\\', c)
		case c < 0x20:
			tmp = append(tmp, '\\', 'u', '0', '0', hexDigit(c>>4), hexDigit(c&0xF))
		default:
			tmp = append(tmp, c)
		}
	}
	tmp = append(tmp, '"')
	return jsonrpc.AppendCanonical(dst, tmp)
}

func hexDigit(b byte) byte { return "0123456789abcdef"[b] }
