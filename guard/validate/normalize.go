package validate

import (
	"encoding/base64"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// invisible reports characters that render as nothing (or as a blank that
// is not a space) but that a model still reads, or that split a word so
// that a pattern no longer matches it: every format character (Cf: soft
// hyphen, zero-width joiners and spaces, bidi controls, tag characters,
// invisible operators), the Hangul fillers, the combining grapheme joiner,
// and the variation selectors other than the emoji ones (U+FE0E, U+FE0F),
// which are used to smuggle bytes.
func invisible(r rune) bool {
	if r < 0x80 {
		return false
	}
	switch {
	case r == 0x034F, r == 0x115F, r == 0x1160, r == 0x3164, r == 0xFFA0, r == 0x17B4, r == 0x17B5:
		return true
	case r >= 0xFE00 && r <= 0xFE0D, r >= 0xE0100 && r <= 0xE01EF:
		return true
	case r >= 0x1D173 && r <= 0x1D17A:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// homoglyphs maps letters of other scripts that look like Latin ones
// (Cyrillic, Greek, a few IPA and Latin-extended forms) to those.
var homoglyphs = strings.NewReplacer(
	"а", "a", "е", "e", "о", "o", "р", "p", "с", "c", "у", "y", "х", "x", "і", "i", "ј", "j",
	"ѕ", "s", "ԁ", "d", "һ", "h", "ӏ", "l", "ԛ", "q", "ԝ", "w", "ɡ", "g", "ո", "n", "ս", "u",
	"А", "a", "В", "b", "Е", "e", "К", "k", "М", "m", "Н", "h", "О", "o", "Р", "p", "С", "c",
	"Т", "t", "Х", "x", "І", "i", "Ј", "j", "Ѕ", "s",
	"ο", "o", "α", "a", "ε", "e", "ι", "i", "κ", "k", "ν", "v", "ρ", "p", "τ", "t", "υ", "u",
	"χ", "x", "Ο", "o", "Α", "a", "Β", "b", "Ε", "e", "Ι", "i", "Κ", "k", "Μ", "m", "Ν", "n",
	"Ρ", "p", "Τ", "t", "Χ", "x", "Υ", "y", "Ζ", "z", "Η", "h",
	"ı", "i", "ȷ", "j", "ℓ", "l",
)

// Normalize returns s as a model reads it, for matching: invisible
// characters removed, NFKC applied (full-width letters, ligatures, styled
// mathematical letters and non-breaking or other odd spaces become plain
// ones), lower-cased. Homoglyphs are kept: see Skeleton.
func Normalize(s string) string {
	return strings.ToLower(fold(s))
}

// fold is Normalize without the lower-casing.
func fold(s string) string {
	if isASCII(s) {
		return s
	}
	s = strings.Map(func(r rune) rune {
		if invisible(r) {
			return -1
		}
		return r
	}, s)
	s = norm.NFKC.String(s)
	// NFKC leaves some spaces (U+1680, U+180E were Cf) alone: fold every
	// Unicode space to a plain one.
	return strings.Map(func(r rune) rune {
		if r >= 0x80 && unicode.IsSpace(r) {
			return ' '
		}
		return r
	}, s)
}

// Skeleton is Normalize with homoglyphs mapped to the Latin letters they
// imitate ("іgnоrе" with Cyrillic і, о, е reads as "ignore").
func Skeleton(s string) string {
	n := Normalize(s)
	if isASCII(n) {
		return n
	}
	return homoglyphs.Replace(n)
}

// minB64Run is the shortest base64 run worth decoding: 18 bytes, enough
// for a short sentence or the head of a key.
const minB64Run = 24

// maxDecoded bounds how many base64 runs of one string are decoded.
const maxDecoded = 32

func b64Char(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '_' || c == '-'
}

// b64Runs returns up to max runs of base64 characters (standard or URL
// alphabet, with their padding) at least minB64Run long. A run with a "/"
// more often than every 16 characters is a path, not base64 (where "/" is
// one character in 64), and is skipped.
func b64Runs(s string, max int) []string {
	var out []string
	for i := 0; i < len(s) && len(out) < max; {
		if !b64Char(s[i]) {
			i++
			continue
		}
		j, slashes := i, 0
		for j < len(s) && b64Char(s[j]) {
			if s[j] == '/' {
				slashes++
			}
			j++
		}
		end := j
		for end < len(s) && end-j < 2 && s[end] == '=' {
			end++
		}
		if j-i >= minB64Run && slashes*16 <= j-i {
			out = append(out, s[i:end])
		}
		i = end
		if i == j {
			i++
		}
	}
	return out
}

// hasB64Run reports whether b holds a base64 run b64Runs would return.
func hasB64Run(b []byte) bool {
	run, slashes := 0, 0
	for _, c := range b {
		if b64Char(c) {
			run++
			if c == '/' {
				slashes++
			}
			if run >= minB64Run && slashes*16 <= run {
				return true
			}
			continue
		}
		run, slashes = 0, 0
	}
	return false
}

// decodedRuns returns the texts hidden in base64 runs of s (textIn).
func decodedRuns(s string) []string {
	var out []string
	for _, m := range b64Runs(s, maxDecoded) {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			b, err := enc.DecodeString(m)
			if err != nil {
				continue
			}
			if t := textIn(b); t != "" {
				out = append(out, t)
			}
			break
		}
	}
	return out
}

// minStretch is the shortest stretch of text in decoded bytes worth
// reading: the shortest secret the rules find is longer than 12 bytes.
const minStretch = 12

// textIn returns the text decoded bytes hold: all of them when they are
// text (printable), else every stretch of text of minStretch bytes or
// more, one a line. Text is read wherever it sits in the bytes: two bytes
// that are not UTF-8 before a token ("\xff\xfe" + a file, then base64)
// do not hide it.
func textIn(b []byte) string {
	if printable(b) {
		return string(b)
	}
	var out []byte
	start := -1
	flush := func(end int) {
		if start >= 0 && end-start >= minStretch {
			out = append(append(out, b[start:end]...), '\n')
		}
		start = -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 || r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
			flush(i)
		} else if start < 0 {
			start = i
		}
		i += max(n, 1)
	}
	flush(len(b))
	return string(out)
}

// printable reports whether b is mostly text: valid UTF-8 with at most a
// few control characters.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	ctl := 0
	for _, r := range string(b) {
		if r < 0x20 && r != '\n' && r != '\r' && r != '\t' {
			ctl++
		}
	}
	return ctl*20 <= len(b)
}

// decodeVariationSelectors returns the bytes smuggled in a run of
// variation selectors (U+FE00..FE0F for 0..15, U+E0100..E01EF for
// 16..255), or "" when s holds fewer than four.
func decodeVariationSelectors(s string) string {
	if isASCII(s) {
		return ""
	}
	var b []byte
	for _, r := range s {
		switch {
		case r >= 0xFE00 && r <= 0xFE0F:
			b = append(b, byte(r-0xFE00))
		case r >= 0xE0100 && r <= 0xE01EF:
			b = append(b, byte(r-0xE0100+16))
		}
	}
	if len(b) < 4 {
		return ""
	}
	return string(b)
}
