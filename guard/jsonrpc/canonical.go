package jsonrpc

import (
	"unicode/utf8"
)

// The canonical encoding is what a guard with layers forwards: the
// message it parsed and judged, written back in one form that every
// reader splits and decodes alike.
//
//   - No whitespace between tokens: the message is one line, and no CR,
//     LF, U+2028 or U+2029 is left outside a string.
//   - Keys and strings are written from their values: an escape that is
//     not needed is decoded ("\u0069d" is "id", "\/" is "/", a surrogate
//     pair is the UTF-8 of its character), and only these are escaped:
//     the quote and the backslash, control characters (\b \f \n \r \t, or
//     \u00XX in lower-case hex), and U+0085, U+2028 and U+2029 (line
//     breaks to some readers: Python's str.splitlines, JavaScript source).
//   - Numbers, true, false and null are kept as they were written: a
//     number's digits are its value, and re-formatting one (1.0 as 1)
//     would change how some parsers type it.
//
// Duplicate and case-variant keys never get this far: the Scanner refuses
// them. The canonical encoding of a canonical line is the line itself
// (Envelope.Canonical says so without a copy).

// AppendCanonical appends the canonical encoding of v to dst. v must be a
// JSON value the Scanner accepted (or a member's span of one); on other
// input the output is unspecified.
func AppendCanonical(dst, v []byte) []byte {
	for i := 0; i < len(v); {
		c := v[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			j := stringEnd(v, i)
			dst = appendCanonicalString(dst, v[i+1:j-1])
			i = j
		default:
			j := i + 1
			for j < len(v) && !structural(v[j]) {
				j++
			}
			dst = append(dst, v[i:j]...)
			i = j
		}
	}
	return dst
}

// structural reports bytes that end a number or a literal.
func structural(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ':', '[', ']', '{', '}', '"':
		return true
	}
	return false
}

// stringEnd returns the index just past the string that starts at v[i].
func stringEnd(v []byte, i int) int {
	for j := i + 1; j < len(v); j++ {
		switch v[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(v)
}

const hexDigits = "0123456789abcdef"

// appendCanonicalString writes the string whose body (without quotes,
// checked by the Scanner) is raw.
func appendCanonicalString(dst, raw []byte) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			var r rune
			r, i = decodeEscape(raw, i)
			dst = appendRune(dst, r)
		case c < utf8.RuneSelf:
			dst = appendRune(dst, rune(c))
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if escapedRune(r) {
				dst = appendRune(dst, r)
			} else {
				dst = append(dst, raw[i:i+n]...)
			}
			i += n
		}
	}
	return append(dst, '"')
}

// decodeEscape decodes the escape at raw[i] and returns its rune and the
// index after it; a valid surrogate pair is one rune.
func decodeEscape(raw []byte, i int) (rune, int) {
	switch raw[i+1] {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
		r, _ := hex4(raw, i+2)
		i += 6
		if r >= 0xD800 && r < 0xDC00 && i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
			if r2, ok := hex4(raw, i+2); ok && r2 >= 0xDC00 && r2 < 0xE000 {
				return 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00), i + 6
			}
		}
		if r >= 0xD800 && r < 0xE000 {
			r = utf8.RuneError // refused by the Scanner before it gets here
		}
		return r, i
	}
	return rune(raw[i+1]), i + 2 // " \ /
}

// appendRune writes one rune of a string in the canonical form.
func appendRune(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 || escapedRune(r) {
		return append(dst, '\\', 'u', hexDigits[r>>12&0xF], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
	}
	if r < utf8.RuneSelf {
		return append(dst, byte(r))
	}
	return utf8.AppendRune(dst, r)
}

// escapedRune reports the characters above ASCII that the canonical form
// escapes: readers that split lines on them would cut a message there.
func escapedRune(r rune) bool {
	return r == 0x85 || r == 0x2028 || r == 0x2029
}

// canonicalEscape reports whether the \u escape with hex digits h (rune
// r) is written so in the canonical form.
func canonicalEscape(h []byte, r rune) bool {
	switch r {
	case '\b', '\f', '\n', '\r', '\t':
		return false // these have short escapes
	}
	if r >= 0x20 && !escapedRune(r) {
		return false // written as the character itself
	}
	for _, c := range h {
		if c >= 'A' && c <= 'F' {
			return false
		}
	}
	return true
}

// Canonical returns line in the canonical encoding, with its envelope
// read again from it: line itself when it already is (no copy), else a
// new line. The Scanner must have accepted line (env is what it read).
// A caller that forwards what it judged judges the returned line.
func (s *Scanner) Canonical(line []byte, env Envelope) ([]byte, Envelope, error) {
	if env.Canonical {
		return line, env, nil
	}
	out := AppendCanonical(make([]byte, 0, len(line)), line)
	env, err := s.Scan(out)
	return out, env, err
}
