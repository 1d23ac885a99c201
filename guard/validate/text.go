package validate

import (
	"strings"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// mayInject is the cheap filter on a raw result or message: false means
// no string or key of it can hold an injection, a secret or a hidden
// character, so the walk can be skipped. Markup can split the words the
// patterns look for ("ig<b></b>nore"), so raw bytes with markup are read
// again with it reduced, a window at a time (a large result is not
// copied whole for it).
func mayInject(raw []byte) bool {
	if suspicious(raw) {
		return true
	}
	const window, overlap = 64 << 10, 512 // overlap: a tag (at most 256 bytes) or an anchor across a cut
	for off := 0; off < len(raw); off += window {
		w := string(raw[off:min(len(raw), off+window+overlap)])
		for _, r := range Demarkup(w) {
			if resultAnchors.inFold([]byte(r)) {
				return true
			}
		}
	}
	return false
}

// textOptions says which of the text checks run (an operator may waive
// each for a tool).
type textOptions struct{ inject, strip, redact bool }

// textVerdict is what reading a JSON text as the model reads it found.
type textVerdict struct {
	inject     *Finding // a prompt injection: the text is refused
	deepSecret *Finding // a secret that cannot be redacted in place: refused
	hidden     bool     // hidden characters were stripped
	kinds      []string // kinds of the secrets redacted
	out        []byte   // the text with those changes, or nil when unchanged
}

// scanText reads every string and key of raw (a JSON value the Scanner
// accepted) as FindInjection reads it, with markup reduced, and also the
// texts joined (a phrase or a key split across content items is what the
// model reads whole); it strips hidden characters and redacts secrets. It
// works on raw in place: its memory is a few copies of raw at most.
func scanText(raw []byte, o textOptions) textVerdict {
	var v textVerdict
	texts := 0
	eachString(raw, func(sp strSpan) bool {
		str := sp.text(raw)
		if o.inject && v.inject == nil {
			if f, ok := FindInjection(str); ok {
				v.inject = &f
			}
		}
		if o.strip {
			if _, ok := FindHidden(str); ok {
				v.hidden = true
				str = StripHidden(str)
			}
		}
		if o.redact {
			red, kinds := RedactSecrets(str)
			v.kinds = append(v.kinds, kinds...)
			if v.deepSecret == nil {
				if f, ok := FindSecretDeep(red); ok {
					v.deepSecret = &f
				}
			}
		}
		if !sp.Key && !sp.Label {
			texts++
		}
		return true
	})
	if texts > 1 {
		for _, sep := range []string{" ", ""} {
			joined := joinTexts(raw, sep)
			if o.inject && v.inject == nil {
				if f, ok := FindInjection(joined); ok {
					f.Kind = "split_" + f.Kind
					v.inject = &f
				}
			}
			if o.redact && v.deepSecret == nil && len(v.kinds) == 0 {
				if f, ok := FindSecretDeep(joined); ok {
					f.Kind = "split_" + f.Kind
					v.deepSecret = &f
				}
			}
		}
	}
	if v.inject != nil || v.deepSecret != nil || (!v.hidden && len(v.kinds) == 0) {
		return v
	}
	v.out = rewriteStrings(raw, func(_ strSpan, str string) (string, bool) {
		orig := str
		if o.strip {
			if _, ok := FindHidden(str); ok {
				str = StripHidden(str)
			}
		}
		if o.redact {
			str, _ = RedactSecrets(str)
		}
		return str, str != orig
	})
	return v
}

// joinTexts joins the string values of raw that a client shows (not keys,
// not labels) with sep, in the order they are written.
func joinTexts(raw []byte, sep string) string {
	var b strings.Builder
	n := 0
	eachString(raw, func(sp strSpan) bool {
		if sp.Key || sp.Label {
			return true
		}
		if n > 0 {
			b.WriteString(sep)
		}
		n++
		b.WriteString(sp.text(raw))
		return true
	})
	return b.String()
}

// modelText joins every string and key of raw with newlines: what a
// definition says to the model, for the poisoning checks.
func modelText(raw []byte) string {
	var b strings.Builder
	eachString(raw, func(sp strSpan) bool {
		b.WriteString(sp.text(raw))
		b.WriteByte('\n')
		return true
	})
	return b.String()
}

// validValue reports whether v (a layer's rewrite) is still read as one
// value by every reader: no duplicate or case-variant keys (stripping a
// hidden character from two keys can make them one).
func validValue(v []byte) error {
	var sc jsonrpc.Scanner
	return sc.Value(v)
}
