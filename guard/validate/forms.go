package validate

import (
	"net/url"
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// maxForms bounds how many normalised forms Forms returns, and
// formRounds how many times it decodes and normalises a form again: a
// value encoded three times (%25252e) is read back to "."; deeper nesting
// is not something a server undoes by accident.
const (
	maxForms   = 8
	formRounds = 3
)

// Forms returns the forms other than s that a server may turn s into
// before it uses it: percent-decoded (a server that URL-decodes a name:
// "..%2f" is "../"), with decode, and Unicode compatibility-normalised
// (NFKC: a server or a library that normalises file names turns the
// fullwidth "．．／" and the two-dot leader "‥" into "../" and ".."), each
// applied again to what the other gave, up to formRounds rounds. The
// caller judges every form as it judges s: a value whose decoded or
// normalised form would be refused is refused. ASCII without "%" has no
// other form, and costs one scan.
func Forms(s string, decode bool) []string {
	if !mayHaveForms(s, decode) {
		return nil
	}
	seen := []string{s}
	frontier := []string{s}
	for range formRounds {
		var next []string
		for _, x := range frontier {
			for _, f := range oneStep(x, decode) {
				if !slices.Contains(seen, f) && len(seen) <= maxForms {
					seen = append(seen, f)
					next = append(next, f)
				}
			}
		}
		if len(next) == 0 {
			break
		}
		frontier = next
	}
	if len(seen) == 1 {
		return nil
	}
	return seen[1:]
}

// oneStep is the forms one decoding or one normalisation gives x.
func oneStep(x string, decode bool) []string {
	var out []string
	if decode && strings.IndexByte(x, '%') >= 0 {
		if d, err := url.PathUnescape(x); err == nil && d != x {
			out = append(out, d)
		}
	}
	if !norm.NFKC.IsNormalString(x) {
		out = append(out, norm.NFKC.String(x))
	}
	return out
}

// mayHaveForms reports whether s can have a form other than itself: a
// "%" to decode, or a byte outside ASCII (NFKC leaves ASCII alone).
func mayHaveForms(s string, decode bool) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 || decode && s[i] == '%' {
			return true
		}
	}
	return false
}
